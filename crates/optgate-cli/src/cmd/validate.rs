//! `optgate validate`: the experiment file's problems, all at once, with their places.

use std::path::Path;

use anyhow::Result;

use crate::exit;

pub fn validate(path: &Path, strict: bool) -> Result<i32> {
    let loaded = super::load_experiment(path)?;
    let exp = &loaded.experiment;
    if strict && !loaded.warnings.is_empty() {
        return Err(exit::with_code(
            exit::INVALID_INPUT,
            anyhow::anyhow!(
                "{} warning(s) and --strict was given",
                loaded.warnings.len()
            ),
        ));
    }
    let runs = exp.arms.len() as u32 * exp.file.replicates;
    println!(
        "{}: valid: experiment `{}`, {} arms ({}), {} build(s), {} replicates per arm = {} runs, scheduler {}",
        path.display(),
        exp.name(),
        exp.arms.len(),
        exp.arm_names().join(", "),
        exp.builds.len(),
        exp.file.replicates,
        runs,
        exp.file.scheduler.kind,
    );
    Ok(exit::OK)
}
