//! Processes a dead daemon left behind. Builds run as the daemon's children, so `kill -9`
//! orphans a build that was under way; before that build runs again, its orphans are found
//! by their environment (`OPTGATE_BUILD_DIR`, which every process of a build inherits) and
//! stopped, so two builds never write the same directory. Linux `/proc` only; processes of
//! other users are not readable and so never touched.

use std::path::Path;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use nix::unistd::Pid;
use optgate_wrapper::signal::signal_group;

/// How long orphans get between SIGTERM and SIGKILL.
const GRACE: Duration = Duration::from_secs(5);

/// Pids of the processes whose environment holds `NAME=value` exactly.
pub fn processes_with_env(name: &str, value: &str) -> Vec<i32> {
    let needle = format!("{name}={value}");
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let me = std::process::id() as i32;
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| pid != me)
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .map(|env| env.split(|&b| b == 0).any(|kv| kv == needle.as_bytes()))
                .unwrap_or(false)
        })
        .collect()
}

/// Stops every process of an orphaned build into `build_dir` (its whole process group),
/// and waits until they are gone. Returns how many processes there were.
pub fn stop_orphan_builds(build_dir: &Path) -> usize {
    let value = build_dir.display().to_string();
    let found = processes_with_env("OPTGATE_BUILD_DIR", &value);
    if found.is_empty() {
        return 0;
    }
    tracing::warn!(
        "stopping {} process(es) of an interrupted build into {value}",
        found.len()
    );
    let groups: Vec<Pid> = found
        .iter()
        .filter_map(|&p| nix::unistd::getpgid(Some(Pid::from_raw(p))).ok())
        .collect();
    for g in &groups {
        let _ = signal_group(*g, Signal::SIGTERM);
    }
    let t0 = Instant::now();
    while !processes_with_env("OPTGATE_BUILD_DIR", &value).is_empty() {
        if t0.elapsed() > GRACE {
            for g in &groups {
                let _ = signal_group(*g, Signal::SIGKILL);
            }
        }
        if t0.elapsed() > GRACE * 2 {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    found.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;

    #[test]
    fn an_orphaned_build_is_found_by_its_environment_and_stopped() {
        let dir = tempfile::tempdir().unwrap();
        let build_dir = dir.path().join("builds/build-1");
        // `sleep` itself, not `bash -c`: spawn returns once the exec is done, and no later
        // exec (bash replacing itself by sleep) can hide the environment mid-scan.
        let mut child = std::process::Command::new("sleep")
            .arg("60")
            .env("OPTGATE_BUILD_DIR", &build_dir)
            .process_group(0)
            .spawn()
            .unwrap();
        let value = build_dir.display().to_string();
        assert_eq!(
            processes_with_env("OPTGATE_BUILD_DIR", &value),
            vec![child.id() as i32]
        );
        assert!(stop_orphan_builds(&build_dir) >= 1);
        let status = child.wait().unwrap();
        assert!(!status.success());
        assert_eq!(stop_orphan_builds(&build_dir), 0);
    }
}
