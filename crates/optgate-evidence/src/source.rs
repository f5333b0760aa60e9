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
/// name it; the path and the error when it cannot be read. Read as untrusted
/// (`optgate_wrapper::untrusted::read_lines`): never through a link, a pipe or a device;
/// refused past its size cap; a file over the whole-read size keeps only the lines `keep`
/// accepts (the others stay as empty lines, so line numbers hold), so memory stays bounded
/// whatever the app printed.
pub(crate) fn read_text(
    run_dir: &Path,
    source: MetricSource,
    file: Option<&str>,
    keep: &dyn Fn(&str) -> bool,
) -> Result<(String, String), (PathBuf, std::io::Error)> {
    let rel = source_file(source, file);
    let path = run_dir.join(rel);
    match optgate_wrapper::untrusted::read_lines(run_dir, Path::new(rel), keep) {
        Ok(kept) => Ok((kept.text, path.display().to_string())),
        Err(e) => Err((path, e.into_io())),
    }
}
