//! Crash injection for the crash tests: `OPTGATE_FAILPOINT=NAME[:N]` makes the daemon kill
//! itself with SIGKILL the N-th time (default: first) it reaches the point NAME, exactly
//! as `kill -9` would at that moment. Points sit in the windows a crash leaves in doubt:
//!
//! * `before-submit`: a job is recorded `submitting`, `submit` not called yet;
//! * `after-submit`: the scheduler has the job, its id is not recorded yet;
//! * `before-look-commit`: a look's report files are written, the look is not recorded.
//!
//! Unset (always, outside tests), a point costs one relaxed atomic load.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

struct Armed {
    name: String,
    at: u32,
    hits: AtomicU32,
}

fn armed() -> Option<&'static Armed> {
    static ARMED: OnceLock<Option<Armed>> = OnceLock::new();
    ARMED
        .get_or_init(|| {
            let spec = std::env::var("OPTGATE_FAILPOINT").ok()?;
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

/// Dies here if this point is armed and due.
pub fn hit(name: &str) {
    if let Some(a) = armed()
        && a.name == name
        && a.hits.fetch_add(1, Ordering::Relaxed) + 1 == a.at
    {
        tracing::warn!("failpoint {name}: killing this daemon (SIGKILL)");
        let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
    }
}
