//! planned → building → running: the arms this node cannot run, then the builds, as a
//! task per experiment on the login node.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use optgate_sched::prepare::{BUILD_RECORD, BuildRecord, execute_build};
use optgate_store::{ExperimentRow, ExperimentState};

use crate::context::Daemon;
use crate::error::DaemonError;
use crate::work::Work;

use super::{BuildTask, Engine};

impl Engine {
    /// planned → building: records the arms this node cannot run, then builds.
    pub(crate) async fn start_build(
        &mut self,
        row: &ExperimentRow,
        work: Arc<Work>,
    ) -> Result<(), DaemonError> {
        let not_applicable = if row.scheduler == optgate_experiment::SchedulerKind::Local {
            let node = self.node();
            // Where runs change the governor (the run wrapper reads the same root).
            optgate_evidence::preflight::not_applicable(
                &work.exp,
                &node,
                &optgate_probe::sysfs_root(),
            )
        } else {
            // On a cluster the compute nodes decide capabilities (from each job's probe, at
            // every look); the login node's facts do not apply. A governor variant is
            // submitted on Slurm (`srun --cpu-freq`; each look checks the governor its
            // steps ran under) and not applicable under Flux, which has no equivalent.
            optgate_evidence::preflight::cluster_not_applicable(&work.exp)
        };
        for (arm, reason) in &not_applicable {
            tracing::info!(
                "experiment {}: `{arm}` is not applicable here: {reason}",
                row.id
            );
        }
        let id = row.id.clone();
        self.ctx
            .db
            .call(move |s| s.begin_building(&id, &not_applicable))
            .await?;
        tracing::info!("experiment {}: building", row.id);
        self.spawn_build(work);
        Ok(())
    }

    pub(crate) fn spawn_build(&mut self, work: Arc<Work>) {
        let cancel = CancellationToken::new();
        let ctx = self.ctx.clone();
        let c = cancel.clone();
        let id = work.id.clone();
        let handle = self
            .build_tasks
            .spawn(async move { build_task(ctx, work, c).await });
        self.builds.insert(id, BuildTask { cancel, handle });
    }
}

/// The build phase of one experiment, as a task: every build that has not already
/// succeeded (a restart keeps finished builds), then building → running.
async fn build_task(ctx: Arc<Daemon>, work: Arc<Work>, cancel: CancellationToken) {
    let id = work.id.clone();
    let end = |state: ExperimentState, reason: Option<String>| {
        let ctx = ctx.clone();
        let id = id.clone();
        async move {
            let i = id.clone();
            let r = ctx
                .db
                .call(move |s| {
                    s.transition(&i, ExperimentState::Building, state, reason.as_deref())
                })
                .await;
            if let Err(e) = r {
                tracing::error!("experiment {id}: cannot record the end of its builds: {e}");
            }
            ctx.wake.notify_one();
        }
    };
    crate::failpoint::hit(&ctx.failpoints, "building");
    for build in &work.exp.builds {
        let dir = work.layout.build_dir(&build.id);
        let done = std::fs::read(dir.join(BUILD_RECORD))
            .ok()
            .and_then(|b| serde_json::from_slice::<BuildRecord>(&b).ok())
            .is_some_and(|r| r.succeeded);
        if done {
            continue;
        }
        tracing::info!("experiment {id}: build {} in {}", build.id, dir.display());
        let result = execute_build(&work.exp, build, &dir, &cancel).await;
        if cancel.is_cancelled() {
            // Stopped (daemon stopping or experiment cancelled): left `building`, so a
            // restart builds again; a cancelled experiment is already past it.
            return;
        }
        match result {
            Ok(r) if r.succeeded => {}
            Ok(r) => {
                let log = std::fs::read_to_string(&r.log).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(10).collect();
                let reason = format!(
                    "build {} failed (exit status {}); log {}:\n{}",
                    build.id,
                    r.exit_code.map_or("none".to_string(), |c| c.to_string()),
                    r.log.display(),
                    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                );
                tracing::warn!("experiment {id}: {reason}");
                end(ExperimentState::Failed, Some(reason)).await;
                return;
            }
            Err(e) if crate::space::chain_is_no_space(&e) => {
                // Left `building` with the reason: the engine starts the build again at a
                // later pass, and it goes on once space is back.
                let lack = optgate_client::space::NoSpace {
                    place: optgate_client::space::Place::Workdir,
                    free: optgate_client::space::bytes_free(&dir),
                    path: dir.clone(),
                };
                tracing::warn!("experiment {id}: build {}: {}", build.id, lack.paused());
                end(ExperimentState::Building, Some(lack.paused())).await;
                return;
            }
            Err(e) => {
                end(
                    ExperimentState::Failed,
                    Some(format!("build {}: {e}", build.id)),
                )
                .await;
                return;
            }
        }
    }
    tracing::info!("experiment {id}: running");
    end(ExperimentState::Running, None).await;
}
