//! Which file of a run directory a reader of run output reads (`source: stdout | file`),
//! and reading it as text: shared by the metric, the system metric and the correctness
//! checks.

use std::path::{Path, PathBuf};

use optgate_experiment::MetricSource;
use optgate_wrapper::run::STDOUT_FILE;

/// The file, relative to the run directory, that a value of `source` is read from: `file`
/// for `source: file`, else the run's stdout (a `file:` beside another source is not read).
pub(crate) fn source_file(source: MetricSource, file: Option<&str>) -> &str {
    match source {
        MetricSource::File => file.unwrap_or(STDOUT_FILE),
        _ => STDOUT_FILE,
    }
}

/// The text of the run's `source` file (invalid UTF-8 replaced) and its path as messages
/// name it; the path and the error when it cannot be read.
pub(crate) fn read_text(
    run_dir: &Path,
    source: MetricSource,
    file: Option<&str>,
) -> Result<(String, String), (PathBuf, std::io::Error)> {
    let path = run_dir.join(source_file(source, file));
    match std::fs::read(&path) {
        Ok(text) => Ok((
            String::from_utf8_lossy(&text).into_owned(),
            path.display().to_string(),
        )),
        Err(e) => Err((path, e)),
    }
}
