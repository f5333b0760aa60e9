//! analysing: a look at the complete blocks (`crate::look::take_look`, blocking, off the
//! async workers), its files written, then the look and its consequence recorded in one
//! transaction. A run recorded completed whose manifest no longer says so is not counted:
//! the experiment goes back to `running` and the run to pending.

use std::sync::Arc;

use std::collections::BTreeSet;

use optgate_store::{AfterLook, ExperimentRow, ExperimentState, RunState, RunUpdate};

use crate::error::DaemonError;
use crate::work::Work;

use optgate_wrapper::manifest::write_atomic;

use super::Engine;
use crate::look::{LookError, take_look};

impl Engine {
    /// analysing: a look at the complete blocks, then more blocks or the end.
    pub(crate) async fn analyse(
        &mut self,
        row: &ExperimentRow,
        work: Arc<Work>,
    ) -> Result<(), DaemonError> {
        let id = row.id.clone();
        let (blocks, not_applicable, looks, jobs, runs) = self
            .ctx
            .db
            .call(move |s| {
                Ok((
                    s.blocks(&id)?,
                    s.not_applicable(&id)?,
                    s.looks(&id)?,
                    s.jobs(&id)?,
                    s.runs(&id)?,
                ))
            })
            .await?;
        let completed: BTreeSet<String> = runs
            .into_iter()
            .filter(|r| r.state == RunState::Completed)
            .map(|r| r.run_id)
            .collect();
        let node = self.node();
        let w = work.clone();
        let look = super::read_run_files(&row.id, "a look", move || {
            take_look(
                &w,
                &blocks,
                &not_applicable,
                &looks,
                &jobs,
                &node,
                &completed,
            )
        })
        .await?;
        let look = match look {
            Err(LookError::RecordedRunChanged { runs }) => return self.run_again(row, runs).await,
            other => other.map_err(|e| DaemonError::Experiment {
                id: row.id.clone(),
                message: e.to_string(),
            })?,
        };
        let crate::look::Look {
            row: look_row,
            report_json,
            after,
            files,
        } = look;
        // The report and samples of this look, then the look itself: a crash in between
        // leaves files that the look taken again at restart rewrites.
        write_look_files(row.id.clone(), files).await?;
        tracing::info!(
            "experiment {}: look {} at {} blocks: {} → {}",
            row.id,
            look_row.look,
            look_row.blocks,
            look_row.decisions,
            match &after {
                AfterLook::Extend { blocks, .. } => format!("adding {} block(s)", blocks.len()),
                AfterLook::Finish { state, .. } => state.to_string(),
            }
        );
        crate::failpoint::hit(&self.ctx.failpoints, "before-look-commit");
        let id = row.id.clone();
        self.ctx
            .db
            .call(move |s| s.record_look(&id, &look_row, &report_json, &after))
            .await
    }

    /// Runs recorded completed whose manifests no longer say so: back to `running`, then
    /// the runs to pending (in that order: a crash in between leaves `running` with
    /// nothing pending, which looks again and finds the same runs).
    async fn run_again(
        &mut self,
        row: &ExperimentRow,
        runs: Vec<String>,
    ) -> Result<(), DaemonError> {
        tracing::warn!(
            "experiment {}: run(s) {} were recorded completed but their manifests no longer say so; running them again",
            row.id,
            runs.join(", ")
        );
        let id = row.id.clone();
        self.ctx
            .db
            .call(move |s| {
                let detail =
                    "recorded completed, but its manifest no longer says so; it will run again";
                s.transition(
                    &id,
                    ExperimentState::Analysing,
                    ExperimentState::Running,
                    None,
                )?;
                let updates: Vec<RunUpdate> = runs
                    .into_iter()
                    .map(|run_id| RunUpdate {
                        run_id,
                        state: RunState::Pending,
                        detail: Some(detail.to_string()),
                    })
                    .collect();
                s.update_runs(&id, &updates)
            })
            .await
    }
}

/// Writes a look's files (blocking, off the async workers), each atomically.
async fn write_look_files(
    id: String,
    files: Vec<(std::path::PathBuf, Vec<u8>)>,
) -> Result<(), DaemonError> {
    tokio::task::spawn_blocking(move || {
        for (path, bytes) in files {
            write_atomic(&path, &bytes).map_err(|e| {
                // A full workdir pauses the experiment (the look is taken again later); any
                // other error is the experiment's own (`MAX_EXPERIMENT_ERRORS`).
                if crate::space::is_no_space_io(&e) {
                    DaemonError::Io {
                        op: "write",
                        path: path.clone(),
                        source: e,
                    }
                } else {
                    DaemonError::Experiment {
                        id: id.clone(),
                        message: format!("cannot write {}: {e}", path.display()),
                    }
                }
            })?;
        }
        Ok::<(), DaemonError>(())
    })
    .await
    .map_err(crate::error::join_error)?
}
