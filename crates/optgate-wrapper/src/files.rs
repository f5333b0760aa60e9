//! How the wrapper writes its files: whole or not at all ([`write_atomic`]), and named
//! per attempt ([`attempt_file`]).

use std::io::Write;
use std::path::Path;

/// The name of an attempt's own copy of a run file: `stdout.attempt-2`.
pub fn attempt_file(name: &str, attempt: u32) -> String {
    format!("{name}.attempt-{attempt}")
}

/// Writes `bytes` to `path` through a temporary file in the same directory, fsynced and
/// renamed into place, then fsyncs the directory: readers see the old file or the whole
/// new one, never a prefix, even after a crash.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), std::io::Error> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp{}", std::process::id()));
    let written = std::fs::File::create(&tmp).and_then(|mut f| {
        f.write_all(bytes)?;
        f.sync_all()
    });
    if let Err(e) = written.and_then(|()| std::fs::rename(&tmp, path)) {
        // A full disk must not keep the partial copy (it holds the space it lacks).
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}
