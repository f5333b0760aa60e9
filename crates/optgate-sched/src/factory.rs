//! The one place a scheduler backend is chosen from an experiment's `scheduler.kind`. The
//! daemon calls nothing else to get a backend, so a new backend plugs in here and nowhere
//! in the daemon.

use std::path::Path;
use std::sync::Arc;

use optgate_experiment::SchedulerKind;

use tokio_util::sync::CancellationToken;

use crate::backend::Scheduler;
use crate::command::{RetryPolicy, SystemRunner};
use crate::flux::FluxBackend;
use crate::local_backend::LocalBackend;
use crate::slurm::SlurmBackend;

/// The backend for `kind`. `state_dir` is the daemon's state directory, where the local
/// backend keeps its job registry and the machine-wide run lock. Cancelling `stop` ends
/// any scheduler command in flight and every retry pause (the daemon is stopping).
pub fn backend_for(
    kind: SchedulerKind,
    state_dir: &Path,
    stop: CancellationToken,
) -> Arc<dyn Scheduler> {
    let runner = || Arc::new(SystemRunner::stoppable(stop.clone()));
    match kind {
        SchedulerKind::Local => Arc::new(LocalBackend::new(state_dir)),
        SchedulerKind::Slurm => {
            Arc::new(SlurmBackend::with_runner(runner(), RetryPolicy::default()))
        }
        SchedulerKind::Flux => Arc::new(FluxBackend::with_runner(runner(), RetryPolicy::default())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_gets_its_backend() {
        let dir = Path::new("/tmp/state");
        for kind in SchedulerKind::ALL {
            assert_eq!(
                backend_for(kind, dir, CancellationToken::new()).kind(),
                kind
            );
        }
    }
}
