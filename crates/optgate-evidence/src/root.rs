//! An execution's root directory: created (0700) with the experiment copy and the plan
//! before anything runs, by the daemon's `submit` and by `optgate run` alike.

use std::path::PathBuf;

use optgate_experiment::{Experiment, Plan};
use optgate_wrapper::manifest::write_atomic;

use crate::layout::Layout;

#[derive(Debug, thiserror::Error)]
pub enum RootError {
    #[error("cannot {op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Records the governors a run changed, so a killed execution can put them back.
pub const GOVERNOR_RESTORE_FILE: &str = "governor-restore.json";

/// Creates `layout.root` with the experiment copy and the plan. Refuses a root that holds
/// a different experiment, so a new execution never mixes with an old one's data. The
/// root is 0700: runs' outputs, scripts and manifests stay the user's (the parents it
/// creates keep the umask's mode, so others still see that `optgate-runs/` exists).
pub fn prepare(exp: &Experiment, plan: &Plan, layout: &Layout) -> Result<(), RootError> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    let io = |op: &'static str, path: PathBuf| move |source| RootError::Io { op, path, source };
    if let Some(parent) = layout.root.parent() {
        std::fs::create_dir_all(parent).map_err(io("create", parent.to_path_buf()))?;
    }
    match std::fs::DirBuilder::new().mode(0o700).create(&layout.root) {
        Ok(()) => {}
        // Resuming: an existing root keeps its contents but not a mode others can read.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            std::fs::set_permissions(&layout.root, std::fs::Permissions::from_mode(0o700))
                .map_err(io("restrict the permissions of", layout.root.clone()))?;
        }
        Err(e) => return Err(io("create", layout.root.clone())(e)),
    }
    let copy = layout.experiment_copy();
    write_atomic(&copy, exp.source_text.as_bytes()).map_err(io("write", copy.clone()))?;
    let plan_path = layout.plan();
    let json = serde_json::to_vec_pretty(plan).expect("plan serialises");
    write_atomic(&plan_path, &json).map_err(io("write", plan_path.clone()))?;
    Ok(())
}
