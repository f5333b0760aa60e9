//! The local backend of the [`Scheduler`] trait: a job is a bash script started detached on
//! this machine (its own session, so it outlives a daemon crash), which waits for an
//! exclusive `flock` on one machine-wide lock file before running its runs one by one with
//! `optgate exec-run`, so local runs never overlap and their timings never compete.
//!
//! Everything about a job lives in files, never in the daemon's memory: the job directory
//! holds the script, its output, `job.pid` (pid and kernel start time, so a reused pid is
//! not mistaken for the job), `job.started` (the lock was taken), `job.exit` (the script's
//! exit status, written by its `EXIT` trap; `job.exit-unwritten` when it could not be, as on
//! a full disk) and `job.cancelled`. A registry directory in
//! the daemon's state directory maps each job name (the local job id) to its directory,
//! which is how `poll` and `find_by_name` find jobs after a restart.

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime};

use nix::sys::signal::Signal;
use nix::unistd::Pid;

use optgate_experiment::SchedulerKind;

use crate::backend::{JobId, JobSpec, JobState, SchedError, Scheduler};
use crate::batch::{JOB_ID_FILE, JOB_SCRIPT, render_body};
use crate::shell::quote;
use optgate_wrapper::manifest::write_atomic;

/// The job script's stdout and stderr (the runs' own output goes to their directories).
pub const JOB_OUTPUT: &str = "job.out";
/// `<pid> <start time in clock ticks since boot>` of the job script.
pub const JOB_PID: &str = "job.pid";
/// Written once the job holds the machine-wide lock: the job is running, not waiting.
pub const JOB_STARTED: &str = "job.started";
/// The job script's exit status, written by its `EXIT` trap.
pub const JOB_EXIT: &str = "job.exit";
/// Written by `cancel` before it signals the job, so the end reads as cancelled.
pub const JOB_CANCELLED: &str = "job.cancelled";
/// Left (empty: it needs no data block) by the `EXIT` trap when it could not write
/// [`JOB_EXIT`], which on a full file system is the one likely cause: the job then reads
/// as lost for lack of space, not as killed.
pub const JOB_EXIT_UNWRITTEN: &str = "job.exit-unwritten";

/// How long a submitted job may go without writing its pid file before it counts as lost.
const START_GRACE: Duration = Duration::from_secs(60);

/// Jobs on this machine, one run at a time. See the module docs.
#[derive(Debug, Clone)]
pub struct LocalBackend {
    /// `<state dir>/local-jobs`: job name → symbolic link to the job's directory.
    registry: PathBuf,
    /// The machine-wide lock every local job holds while it runs.
    lock_file: PathBuf,
}

fn io<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> SchedError + 'a {
    move |source| SchedError::Io {
        op,
        path: path.to_path_buf(),
        source,
    }
}

impl LocalBackend {
    /// A backend keeping its registry and lock file in `state_dir` (the daemon's).
    pub fn new(state_dir: &Path) -> LocalBackend {
        LocalBackend {
            registry: state_dir.join("local-jobs"),
            lock_file: state_dir.join("local-runs.lock"),
        }
    }

    /// A backend keeping its registry in `state_dir` and taking the machine-wide lock
    /// `lock_file` (another state directory's): `optgate run` keeps its jobs with its run
    /// root but shares the user's lock, so its runs never overlap the daemon's.
    pub fn with_lock(state_dir: &Path, lock_file: &Path) -> LocalBackend {
        LocalBackend {
            registry: state_dir.join("local-jobs"),
            lock_file: lock_file.to_path_buf(),
        }
    }

    pub fn lock_file(&self) -> &Path {
        &self.lock_file
    }

    fn job_dir(&self, id: &JobId) -> Option<PathBuf> {
        std::fs::read_link(self.registry.join(&id.0)).ok()
    }

    fn state_of(&self, id: &JobId) -> JobState {
        match self.job_dir(id) {
            Some(dir) => job_state_in(&dir, SystemTime::now()),
            None => JobState::Unknown,
        }
    }
}

/// The script of a local job: record its pid, arm the exit trap, take the machine-wide
/// lock, then the shared body (probe, one `exec-run` per run, exit status). Pure.
pub fn render_job_script(job: &JobSpec, lock_file: &Path) -> String {
    let mut s = String::new();
    s.push_str("#!/usr/bin/env bash\n");
    s.push_str(&format!(
        "cd -- {} || exit 125\n",
        quote(&job.dir.display().to_string())
    ));
    s.push_str(
        "# Pid and kernel start time (field 22 of /proc/PID/stat), so a reused pid is never\n\
         # mistaken for this job.\n\
         og_stat=$(</proc/$$/stat); og_stat=${og_stat##*) }; set -- $og_stat\n",
    );
    s.push_str(&format!(
        "printf '%s %s\\n' \"$$\" \"${{20}}\" > {JOB_PID}.tmp.$$ && mv -f {JOB_PID}.tmp.$$ {JOB_PID}\n"
    ));
    s.push_str(&format!(
        "trap 'og_rc=$?; {{ printf \"%s\\n\" \"$og_rc\" > {JOB_EXIT}.tmp && mv -f {JOB_EXIT}.tmp {JOB_EXIT}; }} 2>/dev/null || {{ rm -f {JOB_EXIT}.tmp; : > {JOB_EXIT_UNWRITTEN}; }}' EXIT\n"
    ));
    s.push_str("trap 'exit 143' TERM INT HUP\n");
    s.push_str(
        "# One line per start in job.out: a job started twice would show twice.\n\
         printf 'optgate: job started, pid %s\\n' \"$$\"\n",
    );
    s.push_str(&format!("export OPTGATE_JOB_ID={}\n", quote(&job.name)));
    s.push_str(&format!(
        "# One run at a time on this machine: wait for the machine-wide lock. This script\n\
         # alone holds it: the body runs with fd 9 closed (bash keeps its own copy\n\
         # close-on-exec), so a process an app leaves behind cannot hold up later runs; the\n\
         # run wrapper stops each run's whole process group when the run ends badly.\n\
         exec 9>>{}\n\
         flock -x 9 || exit 125\n\
         : > {JOB_STARTED}\n",
        quote(&lock_file.display().to_string())
    ));
    s.push_str("{\n");
    s.push_str(&render_body(
        job,
        "local",
        &vec![String::new(); job.runs.len()],
    ));
    s.push_str("} 9>&-\n");
    s
}

/// What the files in a job directory say about the job, at time `now`.
pub fn job_state_in(dir: &Path, now: SystemTime) -> JobState {
    let cancelled = dir.join(JOB_CANCELLED).exists();
    if let Ok(text) = std::fs::read_to_string(dir.join(JOB_EXIT)) {
        return match (cancelled, text.trim().parse::<i32>()) {
            (true, _) => JobState::Cancelled,
            (false, Ok(0)) => JobState::Completed,
            (false, Ok(code)) => {
                JobState::Failed(format!("the job script exited with status {code}"))
            }
            (false, Err(_)) => JobState::Failed(format!(
                "the job script's exit status file holds `{}`",
                text.trim()
            )),
        };
    }
    match std::fs::read_to_string(dir.join(JOB_PID))
        .ok()
        .and_then(|t| parse_pid_file(&t))
    {
        Some((pid, start)) if process_alive(pid, start) => {
            if dir.join(JOB_STARTED).exists() {
                JobState::Running
            } else {
                JobState::Pending
            }
        }
        Some(_) if cancelled => JobState::Cancelled,
        Some(_) if dir.join(JOB_EXIT_UNWRITTEN).exists() => JobState::Lost(
            "the job's script could not record its exit status (ENOSPC: no space left on the \
             job directory's file system)"
                .into(),
        ),
        Some(_) => JobState::Lost(
            "the job's script ended without recording an exit status (it was killed)".into(),
        ),
        None => {
            // Submitted moments ago: the script has not written its pid yet.
            let age = std::fs::metadata(dir.join(JOB_SCRIPT))
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| now.duration_since(t).ok());
            match age {
                Some(a) if a < START_GRACE => JobState::Pending,
                _ if cancelled => JobState::Cancelled,
                _ => JobState::Lost("the job never started (no pid file)".into()),
            }
        }
    }
}

/// `(pid, start time)` from a `job.pid` file.
pub fn parse_pid_file(text: &str) -> Option<(i32, u64)> {
    let mut it = text.split_whitespace();
    let pid = it.next()?.parse().ok()?;
    let start = it.next()?.parse().ok()?;
    Some((pid, start))
}

/// State letter and start time (clock ticks since boot) from `/proc/PID/stat` text. The
/// command name (field 2) may hold spaces and parentheses, so fields are counted from
/// the last `)`.
pub fn parse_proc_stat(text: &str) -> Option<(char, u64)> {
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let state = fields.first()?.chars().next()?;
    // Field 3 is fields[0]; the start time is field 22.
    let start = fields.get(19)?.parse().ok()?;
    Some((state, start))
}

/// Whether `pid` is alive (not a zombie) and is the process that started at `start`.
fn process_alive(pid: i32, start: u64) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|t| parse_proc_stat(&t))
    {
        Some((state, s)) => s == start && state != 'Z' && state != 'X',
        None => false,
    }
}

impl Scheduler for LocalBackend {
    fn kind(&self) -> SchedulerKind {
        SchedulerKind::Local
    }

    fn submit(&self, job: &JobSpec) -> Result<JobId, SchedError> {
        let dir = &job.dir;
        std::fs::create_dir_all(dir).map_err(io("create job directory", dir))?;
        // Only reached when `find_by_name` did not find this job: files of an attempt that
        // never started must not be read as this one's.
        for f in [
            JOB_PID,
            JOB_STARTED,
            JOB_EXIT,
            JOB_CANCELLED,
            JOB_EXIT_UNWRITTEN,
        ] {
            let p = dir.join(f);
            match std::fs::remove_file(&p) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(io("remove stale", &p)(e)),
            }
        }
        let script = dir.join(JOB_SCRIPT);
        std::fs::write(&script, render_job_script(job, &self.lock_file))
            .map_err(io("write", &script))?;
        std::fs::create_dir_all(&self.registry)
            .map_err(io("create job registry", &self.registry))?;
        let link = self.registry.join(&job.name);
        let tmp_link = self
            .registry
            .join(format!(".{}.tmp{}", job.name, std::process::id()));
        let _ = std::fs::remove_file(&tmp_link);
        std::os::unix::fs::symlink(dir, &tmp_link).map_err(io("register job", &tmp_link))?;
        std::fs::rename(&tmp_link, &link).map_err(io("register job", &link))?;

        let out_path = dir.join(JOB_OUTPUT);
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&out_path)
            .map_err(io("open", &out_path))?;
        let err = out.try_clone().map_err(io("open", &out_path))?;
        let mut cmd = Command::new("bash");
        cmd.arg(&script)
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        // SAFETY: setsid is async-signal-safe; between fork and exec nothing else runs.
        // A new session detaches the job from the daemon's terminal and process group, so
        // neither Ctrl-C nor the daemon's death reaches it.
        unsafe {
            cmd.pre_exec(|| {
                nix::unistd::setsid().map_err(std::io::Error::from)?;
                Ok(())
            });
        }
        let mut child = cmd.spawn().map_err(|source| SchedError::Spawn {
            command: format!("bash {}", script.display()),
            source,
        })?;
        let pid = child.id() as i32;
        // The child is ours until it exits; reap it so it never lingers as a zombie.
        std::thread::spawn(move || {
            let _ = child.wait();
        });
        // The script writes the same file itself; writing it here too means a pid file
        // exists as soon as `submit` returns, whatever the script has reached.
        if let Some((_, start)) = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|t| parse_proc_stat(&t))
        {
            let path = dir.join(JOB_PID);
            if !path.exists() {
                let _ = write_atomic(&path, format!("{pid} {start}\n").as_bytes());
            }
        }
        let id_path = dir.join(JOB_ID_FILE);
        let mut f = std::fs::File::create(&id_path).map_err(io("write", &id_path))?;
        writeln!(f, "{}", job.name).map_err(io("write", &id_path))?;
        Ok(JobId(job.name.clone()))
    }

    fn poll(&self, ids: &[JobId]) -> Result<BTreeMap<JobId, JobState>, SchedError> {
        Ok(ids
            .iter()
            .map(|id| (id.clone(), self.state_of(id)))
            .collect())
    }

    fn find_by_name(&self, names: &[String]) -> Result<BTreeMap<String, JobId>, SchedError> {
        // A job counts once it was started (pid or exit file), finished or not: the daemon
        // then records and polls it instead of submitting it again.
        Ok(names
            .iter()
            .filter_map(|n| {
                let dir = std::fs::read_link(self.registry.join(n)).ok()?;
                (dir.join(JOB_PID).exists() || dir.join(JOB_EXIT).exists())
                    .then(|| (n.clone(), JobId(n.clone())))
            })
            .collect())
    }

    fn cancel(&self, ids: &[JobId]) -> Result<(), SchedError> {
        for id in ids {
            let Some(dir) = self.job_dir(id) else {
                continue;
            };
            let marker = dir.join(JOB_CANCELLED);
            std::fs::write(&marker, b"").map_err(io("write", &marker))?;
            if let Some((pid, start)) = std::fs::read_to_string(dir.join(JOB_PID))
                .ok()
                .and_then(|t| parse_pid_file(&t))
                && process_alive(pid, start)
            {
                // The script leads its own session and process group: the signal reaches
                // `exec-run`, which stops the app and writes an `interrupted` manifest.
                let _ = optgate_wrapper::signal::signal_group(Pid::from_raw(pid), Signal::SIGTERM);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(dir: &Path) -> JobSpec {
        let run = |arm: &str| crate::backend::JobRun {
            run_id: format!("b001-{arm}"),
            arm: arm.into(),
            block: 1,
            replicate: 1,
            run_dir: dir.join("runs").join(format!("b001-{arm}")),
            nodes: 1,
            tasks_per_node: 1,
            cpus_per_task: 1,
            gpus_per_task: 0,
            launcher_args: vec![],
            time_limit: None,
            governor: None,
        };
        JobSpec {
            name: "og-e1-b001".into(),
            dir: dir.join("jobs/og-e1-b001"),
            runs: vec![run("v1"), run("baseline")],
            nodes: 1,
            tasks_per_node: 1,
            cpus_per_task: 1,
            gpus_per_task: 0,
            time_limit: Duration::from_secs(600),
            queue: None,
            account: None,
            exclusive: false,
            extra_directives: vec![],
            optgate_bin: PathBuf::from("/opt/optgate dir/bin/optgate"),
            attempt: 1,
        }
    }

    #[test]
    fn the_job_script_takes_the_lock_then_runs_each_run_in_order() {
        let s = render_job_script(
            &job(Path::new("/scratch/x")),
            Path::new("/home/me/.st/lock"),
        );
        let pos = |needle: &str| {
            s.find(needle)
                .unwrap_or_else(|| panic!("`{needle}` missing from:\n{s}"))
        };
        assert!(
            s.starts_with("#!/usr/bin/env bash\ncd -- /scratch/x/jobs/og-e1-b001 || exit 125\n")
        );
        assert!(pos("> job.pid.tmp.$$ && mv -f job.pid.tmp.$$ job.pid") < pos("flock -x 9"));
        assert!(pos("trap 'og_rc=$?;") < pos("flock -x 9"));
        assert!(s.contains("exec 9>>/home/me/.st/lock\n"));
        assert!(s.contains("export OPTGATE_JOB_ID=og-e1-b001\n"));
        assert!(s.contains("OPTGATE_BIN='/opt/optgate dir/bin/optgate'\n"));
        let v1 =
            pos("\"$OPTGATE_BIN\" exec-run /scratch/x/runs/b001-v1 --attempt 1 -- ; og_after $?");
        let base = pos(
            "\"$OPTGATE_BIN\" exec-run /scratch/x/runs/b001-baseline --attempt 1 -- ; og_after $?",
        );
        assert!(pos(": > job.started") < v1 && v1 < base);
        // The body runs with the lock's descriptor closed.
        assert!(pos(": > job.started") < pos("{\n") && pos("{\n") < v1);
        assert!(s.ends_with("exit \"$og_status\"\n} 9>&-\n"), "{s}");
    }

    /// A process a run leaves behind does not inherit the machine-wide lock: once the job
    /// has ended, the lock is free although that process still lives.
    #[test]
    fn a_process_left_behind_does_not_hold_the_lock() {
        let d = tempfile::tempdir().unwrap();
        let backend = LocalBackend::new(&d.path().join("state"));
        let mut j = job(d.path());
        j.runs.truncate(1);
        let pidfile = d.path().join("left-behind.pid");
        let fake = d.path().join("fake-optgate");
        std::fs::write(
            &fake,
            format!(
                "#!/usr/bin/env bash\n[ \"$1\" = exec-run ] || exit 0\nsleep 60 &\necho $! > {}\nexit 0\n",
                pidfile.display()
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        j.optgate_bin = fake;
        let id = backend.submit(&j).unwrap();
        while !backend.poll(std::slice::from_ref(&id)).unwrap()[&id].is_finished() {
            std::thread::sleep(Duration::from_millis(20));
        }
        let pid: i32 = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let alive = std::path::Path::new(&format!("/proc/{pid}")).exists();
        // The job reads as finished once its exit trap has written `job.exit`; its bash
        // lets go of the lock a moment later, when it exits. A bounded wait for that: the
        // process left behind (which must not hold it) lives for 60 s.
        let try_lock = || {
            let lock = std::fs::OpenOptions::new()
                .append(true)
                .open(backend.lock_file())
                .unwrap();
            nix::fcntl::Flock::lock(lock, nix::fcntl::FlockArg::LockExclusiveNonblock)
        };
        let give_up = std::time::Instant::now() + Duration::from_secs(10);
        let mut free = try_lock();
        while free.is_err() && std::time::Instant::now() < give_up {
            std::thread::sleep(Duration::from_millis(20));
            free = try_lock();
        }
        // The sleeper is ours (its pid was written by the script we ran): stop it.
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
        assert!(alive, "the left-behind process should still run");
        assert!(
            free.is_ok(),
            "the lock is still held by the process left behind"
        );
    }

    #[test]
    fn proc_stat_is_read_from_the_last_parenthesis() {
        let line = "4242 (a (weird) name) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10";
        assert_eq!(parse_proc_stat(line), Some(('S', 987654)));
        assert_eq!(parse_proc_stat("garbage"), None);
        assert_eq!(parse_pid_file("12 345\n"), Some((12, 345)));
        assert_eq!(parse_pid_file("12"), None);
    }

    #[test]
    fn job_states_come_from_the_files() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path();
        let now = SystemTime::now();
        std::fs::write(dir.join(JOB_SCRIPT), "").unwrap();
        assert_eq!(job_state_in(dir, now), JobState::Pending);
        assert!(matches!(
            job_state_in(dir, now + Duration::from_secs(3600)),
            JobState::Lost(_)
        ));
        // Our own process: alive, with its real start time; a wrong start time is a
        // reused pid, so the job is gone.
        let me = std::process::id() as i32;
        let (_, start) =
            parse_proc_stat(&std::fs::read_to_string("/proc/self/stat").unwrap()).unwrap();
        std::fs::write(dir.join(JOB_PID), format!("{me} {start}\n")).unwrap();
        assert_eq!(job_state_in(dir, now), JobState::Pending);
        std::fs::write(dir.join(JOB_STARTED), "").unwrap();
        assert_eq!(job_state_in(dir, now), JobState::Running);
        std::fs::write(dir.join(JOB_PID), format!("{me} {}\n", start + 1)).unwrap();
        let lost = |d: &Path| match job_state_in(d, now) {
            JobState::Lost(why) => why,
            other => panic!("{other:?}"),
        };
        assert!(lost(dir).ends_with("(it was killed)"), "{}", lost(dir));
        // Its exit trap could not write the status (a full disk): lost for lack of space.
        std::fs::write(dir.join(JOB_EXIT_UNWRITTEN), "").unwrap();
        assert!(lost(dir).contains("ENOSPC"), "{}", lost(dir));
        std::fs::write(dir.join(JOB_EXIT), "0\n").unwrap();
        assert_eq!(job_state_in(dir, now), JobState::Completed);
        std::fs::write(dir.join(JOB_EXIT), "1\n").unwrap();
        assert!(matches!(job_state_in(dir, now), JobState::Failed(_)));
        std::fs::write(dir.join(JOB_CANCELLED), "").unwrap();
        assert_eq!(job_state_in(dir, now), JobState::Cancelled);
    }

    #[test]
    fn a_job_runs_detached_and_reports_its_end() {
        let d = tempfile::tempdir().unwrap();
        let state = d.path().join("state");
        let backend = LocalBackend::new(&state);
        let mut j = job(d.path());
        // A stand-in for the optgate binary: records each exec-run call.
        let fake = d.path().join("fake-optgate");
        std::fs::write(
            &fake,
            format!(
                "#!/usr/bin/env bash\n[ \"$1\" = exec-run ] && echo \"$2 $OPTGATE_JOB_ID\" >> {}\nexit 0\n",
                d.path().join("calls").display()
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        j.optgate_bin = fake;
        assert!(backend.find_by_name(&[j.name.clone()]).unwrap().is_empty());
        let id = backend.submit(&j).unwrap();
        assert_eq!(
            backend.find_by_name(&[j.name.clone()]).unwrap()[&j.name],
            id
        );
        // Wait for the end through the backend's own view (no timing is asserted).
        let state_now = loop {
            let s = backend.poll(std::slice::from_ref(&id)).unwrap()[&id].clone();
            if s.is_finished() {
                break s;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        assert_eq!(state_now, JobState::Completed);
        let calls = std::fs::read_to_string(d.path().join("calls")).unwrap();
        let want = format!(
            "{} og-e1-b001\n{} og-e1-b001\n",
            j.runs[0].run_dir.display(),
            j.runs[1].run_dir.display()
        );
        assert_eq!(calls, want);
        assert_eq!(
            backend.poll(&[JobId("never-submitted".into())]).unwrap()
                [&JobId("never-submitted".into())],
            JobState::Unknown
        );
    }
}
