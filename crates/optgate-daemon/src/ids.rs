//! New execution ids and their run roots.

use std::path::PathBuf;

use optgate_experiment::Experiment;

/// A new id for an execution of `exp`, and its root
/// (`<workdir>/optgate-runs/<name>/<id>`, not yet there).
pub fn new_root(exp: &Experiment) -> (String, PathBuf) {
    loop {
        let id = new_id();
        let root = exp.workdir.join("optgate-runs").join(exp.name()).join(&id);
        if !root.exists() {
            return (id, root);
        }
    }
}

/// `YYYYMMDD-HHMMSS-xxxx`: sortable by submission time, unique with the random suffix,
/// and only characters that are safe in directory and scheduler job names.
pub fn new_id() -> String {
    format!(
        "{}-{:04x}",
        chrono::Local::now().format("%Y%m%d-%H%M%S"),
        rand::random::<u16>()
    )
}
