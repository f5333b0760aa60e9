//! A recurrence's `notify:` command, run: the argument vector as it is (no shell), in the
//! experiment file's folder, in its own process group, the summary JSON on its stdin,
//! stdout discarded, the last [`STDERR_TAIL_BYTES`] of stderr kept, for at most
//! [`NOTIFY_TIMEOUT`] — past it its group (and only its group) gets SIGTERM, then SIGKILL
//! after [`NOTIFY_KILL_GRACE`]. Every end is an [`NotifyOutcome`], a command that cannot
//! be started included; nothing here fails the daemon.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use optgate_client::protocol::{NotifyOutcome, NotifyState};

/// The longest a notify command may run: 30 s. It sends a message or writes a file; one
/// that hangs (a mail server that does not answer) is stopped, and its outcome says so.
pub const NOTIFY_TIMEOUT: Duration = Duration::from_secs(30);

/// Between the SIGTERM of an overrunning notify's group and its SIGKILL: 2 s.
pub const NOTIFY_KILL_GRACE: Duration = Duration::from_secs(2);

/// How much of a notify's stderr is kept (its end): 2 KiB, what `status` shows of it.
pub const STDERR_TAIL_BYTES: usize = 2048;

/// Runs `argv` in `dir` with `input` on its stdin, bounded by `timeout`; blocking. A
/// relative program with a `/` is taken from `dir`.
pub fn run(
    argv: &[String],
    dir: &Path,
    input: &[u8],
    timeout: Duration,
    base: NotifyOutcome,
) -> NotifyOutcome {
    let mut out = base;
    let Some(program) = argv.first() else {
        out.state = NotifyState::NoCommand;
        return out;
    };
    let program = if program.contains('/') {
        dir.join(program)
    } else {
        program.into()
    };
    let mut cmd = Command::new(&program);
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    cmd.args(&argv[1..])
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            out.state = NotifyState::NotStarted;
            out.detail = Some(format!("cannot start {}: {e}", program.display()));
            return out;
        }
    };
    let tail = Arc::new(Mutex::new(Vec::new()));
    if let Some(mut stderr) = child.stderr.take() {
        let tail = tail.clone();
        std::thread::spawn(move || keep_tail(&mut stderr, &tail));
    }
    if let Some(mut stdin) = child.stdin.take() {
        let input = input.to_vec();
        // A command that never reads its stdin must not block the wait.
        std::thread::spawn(move || {
            let _ = stdin.write_all(&input);
        });
    }
    let status = wait_bounded(&mut child, timeout, &mut out);
    if let Some(status) = status {
        use std::os::unix::process::ExitStatusExt;
        out.exit_code = status.code();
        out.signal = status.signal();
    }
    // The reader ends when the group's last writer is gone; a moment for it to drain.
    std::thread::sleep(Duration::from_millis(50));
    let bytes = tail.lock().map(|t| t.clone()).unwrap_or_default();
    out.stderr_tail = String::from_utf8_lossy(&bytes).into_owned();
    out
}

/// Waits for `child` up to `timeout`; past it, SIGTERM to its group, then SIGKILL after
/// [`NOTIFY_KILL_GRACE`], and the outcome says it timed out.
fn wait_bounded(
    child: &mut std::process::Child,
    timeout: Duration,
    out: &mut NotifyOutcome,
) -> Option<std::process::ExitStatus> {
    use nix::sys::signal::Signal;
    let pgid = nix::unistd::Pid::from_raw(child.id() as i32);
    let start = Instant::now();
    let mut signalled: Option<Signal> = None;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                out.state = if signalled.is_some() {
                    NotifyState::TimedOut
                } else {
                    NotifyState::Exited
                };
                return Some(status);
            }
            Ok(None) => {}
            Err(e) => {
                out.state = NotifyState::Exited;
                out.detail = Some(format!("cannot wait for it: {e}"));
                return None;
            }
        }
        let next = match signalled {
            None if start.elapsed() >= timeout => Some(Signal::SIGTERM),
            Some(Signal::SIGTERM) if start.elapsed() >= timeout + NOTIFY_KILL_GRACE => {
                Some(Signal::SIGKILL)
            }
            _ => None,
        };
        if let Some(sig) = next {
            let _ = optgate_wrapper::signal::signal_group(pgid, sig);
            out.detail = Some(format!(
                "ran past {timeout:?}; its process group was sent {sig}"
            ));
            signalled = Some(sig);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Reads `r` to its end, keeping its last [`STDERR_TAIL_BYTES`] in `tail`.
fn keep_tail(r: &mut impl Read, tail: &Mutex<Vec<u8>>) {
    let mut buf = [0u8; 4096];
    while let Ok(n) = r.read(&mut buf) {
        if n == 0 {
            break;
        }
        let Ok(mut t) = tail.lock() else { break };
        t.extend_from_slice(&buf[..n]);
        if t.len() > STDERR_TAIL_BYTES {
            let cut = t.len() - STDERR_TAIL_BYTES;
            t.drain(..cut);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> NotifyOutcome {
        NotifyOutcome::new("e2", "flipped", NotifyState::Started)
    }

    fn sh(script: &str) -> Vec<String> {
        vec!["sh".into(), "-c".into(), script.into()]
    }

    /// The summary arrives on stdin as it was given; each word reaches the program as it
    /// is (a `$x` stays `$x`: no shell); the exit status and stderr's end are kept.
    #[test]
    fn the_command_gets_its_input_and_its_end_is_recorded() {
        let dir = tempfile::tempdir().unwrap();
        let argv = vec![
            "sh".into(),
            "-c".into(),
            "cat > got; printf '%s' \"$1\" > arg; echo oops >&2; exit 3".into(),
            "sh".into(),
            "$HOME; rm -rf x".into(),
        ];
        let o = run(
            &argv,
            dir.path(),
            b"{\"a\":1}",
            Duration::from_secs(20),
            base(),
        );
        assert_eq!(o.state, NotifyState::Exited);
        assert_eq!(o.exit_code, Some(3));
        assert_eq!(o.stderr_tail, "oops\n");
        assert_eq!(std::fs::read(dir.path().join("got")).unwrap(), b"{\"a\":1}");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("arg")).unwrap(),
            "$HOME; rm -rf x"
        );
    }

    /// A command that overruns is stopped with its whole group (its background child too),
    /// and the outcome says it timed out; one that cannot start is an outcome, not a panic.
    #[test]
    fn an_overrunning_command_is_killed_and_a_missing_one_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let argv = sh("sleep 30 & echo $! > child; echo started >&2; wait");
        let o = run(&argv, dir.path(), b"", Duration::from_millis(300), base());
        assert_eq!(o.state, NotifyState::TimedOut, "{o:?}");
        assert!(o.detail.as_deref().unwrap().contains("ran past"), "{o:?}");
        let child: i32 = std::fs::read_to_string(dir.path().join("child"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // The group's background sleep got the signal too (it is gone or a zombie).
        let gone = (0..100).any(|_| {
            let stat = std::fs::read_to_string(format!("/proc/{child}/stat")).unwrap_or_default();
            let done = stat.is_empty() || stat.split(' ').nth(2) == Some("Z");
            if !done {
                std::thread::sleep(Duration::from_millis(20));
            }
            done
        });
        assert!(gone, "the notify's background child outlived it");
        let o = run(
            &["./no-such-notify".to_string()],
            dir.path(),
            b"",
            Duration::from_secs(1),
            base(),
        );
        assert_eq!(o.state, NotifyState::NotStarted);
        assert!(o.detail.unwrap().contains("no-such-notify"));
        let long = sh("head -c 10000 /dev/zero | tr '\\0' x >&2");
        let o = run(&long, dir.path(), b"", Duration::from_secs(20), base());
        assert_eq!(o.stderr_tail.len(), STDERR_TAIL_BYTES);
    }
}
