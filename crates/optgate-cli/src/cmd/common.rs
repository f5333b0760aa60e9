//! What several commands share: an experiment loaded with its warnings shown (the
//! checklist's as the command wants), where an execution's root goes, and the refusal of a
//! cluster experiment by `optgate run`.

use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::exit;

/// A Slurm or Flux experiment (or campaign) is refused unless `--here`: `optgate run`
/// executes runs on this machine, which on a login node is the wrong place.
pub(crate) fn refuse_cluster_kind(
    path: &Path,
    kind: optgate_experiment::SchedulerKind,
    here: bool,
) -> Result<()> {
    if kind == optgate_experiment::SchedulerKind::Local || here {
        return Ok(());
    }
    Err(exit::with_code(
        exit::INVALID_INPUT,
        anyhow::anyhow!(
            "{} is a `scheduler: {kind}` experiment: `optgate run` executes runs on this \
             machine, which on a login node is the wrong place. Submit it to {kind} with \
             `optgate submit {}`, or pass --here to run it on this machine anyway",
            path.display(),
            path.display()
        ),
    ))
}

/// Where an execution goes: `--out` (made absolute), else a new timestamped folder
/// `WORKDIR/optgate-runs/NAME/YYYYmmdd-HHMMSS`.
pub(crate) fn run_root(out: Option<PathBuf>, workdir: &Path, name: &str) -> PathBuf {
    match out {
        Some(o) => std::path::absolute(&o).unwrap_or(o),
        None => workdir
            .join("optgate-runs")
            .join(name)
            .join(chrono::Local::now().format("%Y%m%d-%H%M%S").to_string()),
    }
}

/// How a command shows the loader's "checklist: no verdict for N of the 10 dimensions"
/// warning, which every command loading the file would otherwise repeat in full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChecklistNote {
    /// In full (`validate`, whose job it is).
    Full,
    /// One short line pointing at `optgate validate --strict` (`run`, `submit`).
    Short,
    /// Not at all (`plan`).
    Silent,
}

/// Whether `w` is the loader's warning about dimensions without a verdict.
fn is_checklist_warning(w: &optgate_experiment::Diagnostic) -> bool {
    w.message.starts_with("checklist: no verdict")
}

/// Loads an experiment, printing its warnings (the checklist's as `note` says); invalid
/// files exit with INVALID_INPUT.
pub fn load_experiment(
    path: &std::path::Path,
    note: ChecklistNote,
) -> Result<optgate_experiment::Loaded> {
    if is_campaign_file(path) {
        return Err(exit::with_code(
            exit::INVALID_INPUT,
            anyhow::anyhow!(
                "{} is a campaign (it has `stages:`): this command takes an experiment; \
                 `optgate validate` lists its stages, `optgate run` and `optgate submit` take it",
                path.display()
            ),
        ));
    }
    match optgate_experiment::load(path) {
        Ok(loaded) => {
            const SHOWN: usize = optgate_experiment::limits::MAX_DIAGNOSTICS_SHOWN;
            for w in loaded.warnings.iter().take(SHOWN) {
                if !is_checklist_warning(w) || note == ChecklistNote::Full {
                    errln!("{w}");
                } else if note == ChecklistNote::Short {
                    // "checklist: no verdict for 9 of the 10 dimensions", without the list.
                    let head = w.message.split(" (").next().unwrap_or(&w.message);
                    errln!(
                        "optgate: {head}; `optgate validate --strict {}` lists them",
                        path.display()
                    );
                }
            }
            let more = loaded.warnings.len().saturating_sub(SHOWN);
            if more > 0 {
                errln!("… and {more} more warnings");
            }
            Ok(loaded)
        }
        Err(e @ optgate_experiment::LoadError::Read { .. }) => {
            Err(exit::with_code(exit::INVALID_INPUT, e))
        }
        Err(e) => Err(exit::with_code(exit::INVALID_INPUT, e)),
    }
}

/// Whether the file at `path` is a campaign (a `stages:` key); an unreadable file is not
/// (the experiment loader then says why).
pub fn is_campaign_file(path: &Path) -> bool {
    let limit = optgate_experiment::yaml::MAX_FILE_BYTES as u64;
    optgate_experiment::read::read_regular_text(path, limit)
        .is_ok_and(|t| optgate_experiment::campaign::is_campaign_text(&t))
}
