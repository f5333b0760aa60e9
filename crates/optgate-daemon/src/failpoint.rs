//! Crash injection for the crash tests. Two ways to arm a point:
//!
//! * `OPTGATE_FAILPOINT=NAME[:N]` makes the daemon kill itself with SIGKILL the N-th time
//!   (default: first) it reaches the point NAME, exactly as `kill -9` would at that moment
//!   (`tests/daemon/crash.rs`, through the real binary);
//! * [`Failpoints::arm`] on a daemon context makes the N-th hit panic instead, which ends
//!   that engine's task (or build task) there, leaving the database as it was committed —
//!   the control-loop tests (`tests/engine_loop.rs`) then start a new engine on the same
//!   database, in milliseconds.
//!
//! Points sit in the windows a crash leaves in doubt:
//!
//! * `before-submit`: a job is recorded `submitting`, `submit` not called yet;
//! * `after-submit`: the scheduler has the job, its id is not recorded yet;
//! * `after-job-end`: a job's end and its runs' outcomes are recorded, nothing done with
//!   them yet (fail fast, the look);
//! * `building`: an experiment is `building`, its build task started;
//! * `before-look-commit`: a look's report files are written, the look is not recorded.
//!
//! A third, [`stall`], slows the daemon down instead: `OPTGATE_STALL=NAME:MILLIS` makes it
//! sleep that long at point NAME — `exiting`: the daemon has stopped serving and has not
//! exited yet (`tests/daemon/cli.rs`: `daemon stop` waits for the process, and no second
//! daemon starts meanwhile).
//!
//! The two variables are test hooks, so they are read only by debug builds (what `cargo
//! test` builds and runs): a release binary ignores them, and no environment a user sets
//! can make an installed daemon kill itself or stall. Unarmed (always, outside tests), a
//! point costs one relaxed atomic load and one uncontended lock.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock};

struct Armed {
    name: String,
    at: u32,
    hits: AtomicU32,
}

fn armed() -> Option<&'static Armed> {
    static ARMED: OnceLock<Option<Armed>> = OnceLock::new();
    ARMED
        .get_or_init(|| {
            let spec = test_hook("OPTGATE_FAILPOINT")?;
            let (name, at) = match spec.split_once(':') {
                Some((n, k)) => (n.to_string(), k.parse().ok()?),
                None => (spec, 1),
            };
            Some(Armed {
                name,
                at,
                hits: AtomicU32::new(0),
            })
        })
        .as_ref()
}

/// The value of test-hook variable `name`: only in a debug build.
fn test_hook(name: &str) -> Option<String> {
    hook_in_build(cfg!(debug_assertions), || std::env::var(name).ok())
}

/// A test hook's value in a build that is (`debug_build`) or is not a debug build: the
/// variable is not even read in a release build.
fn hook_in_build(debug_build: bool, read: impl FnOnce() -> Option<String>) -> Option<String> {
    match debug_build {
        true => read(),
        false => None,
    }
}

/// Points armed in this process, for one daemon context.
#[derive(Debug, Default)]
pub struct Failpoints {
    /// (name, the hit that fires, hits so far)
    armed: Mutex<Vec<(String, u32, u32)>>,
}

impl Failpoints {
    /// The `at`-th hit of point `name` panics (1: the first).
    pub fn arm(&self, name: &str, at: u32) {
        self.lock().push((name.to_string(), at, 0));
    }

    /// Whether an armed point has fired.
    pub fn fired(&self) -> bool {
        self.lock().iter().any(|(_, at, hits)| hits >= at)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(String, u32, u32)>> {
        self.armed.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether point `name` fires now (counts the hit).
    fn due(&self, name: &str) -> bool {
        let mut armed = self.lock();
        armed.iter_mut().any(|(n, at, hits)| {
            if n != name {
                return false;
            }
            *hits += 1;
            *hits == *at
        })
    }
}

/// Dies here if this point is armed and due: the process (`OPTGATE_FAILPOINT`) or, armed
/// in `points`, the task that reached it.
pub fn hit(points: &Failpoints, name: &str) {
    if points.due(name) {
        tracing::warn!("failpoint {name}: ending this task here (panic), as a crash would");
        panic!("failpoint {name}");
    }
    if let Some(a) = armed()
        && a.name == name
        && a.hits.fetch_add(1, Ordering::Relaxed) + 1 == a.at
    {
        tracing::warn!("failpoint {name}: killing this daemon (SIGKILL)");
        let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
    }
}

/// Sleeps here for the milliseconds `OPTGATE_STALL=NAME:MILLIS` gives when NAME is this
/// point; does nothing otherwise.
pub fn stall(name: &str) {
    let Some(millis) = test_hook("OPTGATE_STALL").and_then(|spec| {
        let (n, ms) = spec.split_once(':')?;
        (n == name).then(|| ms.parse::<u64>().ok())?
    }) else {
        return;
    };
    tracing::warn!("stall {name}: sleeping {millis} ms");
    std::thread::sleep(std::time::Duration::from_millis(millis));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_release_build_never_reads_a_test_hook() {
        let set = || Some("exiting:60000".to_string());
        assert_eq!(hook_in_build(false, set), None);
        assert_eq!(hook_in_build(true, set).as_deref(), Some("exiting:60000"));
        assert_eq!(
            hook_in_build(false, || panic!("read in a release build")),
            None
        );
    }
}
