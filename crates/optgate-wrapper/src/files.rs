//! How the wrapper writes its files: whole or not at all ([`write_atomic`], never through
//! a link planted at its temporary name), into folders that are real folders
//! ([`real_dir`]), and named per attempt ([`attempt_file`]).

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
    // A leftover (or a link planted there) goes first; the file is then created anew,
    // never opened through whatever the name pointed to. The rename replaces a link at
    // `path` itself, not its target.
    let _ = std::fs::remove_file(&tmp);
    let created = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp);
    let written = created.and_then(|mut f| {
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

/// `path` is a folder itself, not a link to one (nor anything else): an error saying what
/// it is otherwise.
pub fn real_dir(path: &Path) -> Result<(), std::io::Error> {
    let meta = std::fs::symlink_metadata(path)?;
    let what = if meta.file_type().is_symlink() {
        "a symbolic link"
    } else if !meta.is_dir() {
        "not a directory"
    } else {
        return Ok(());
    };
    Err(std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        format!(
            "{} is {what} (run-directory folders must be real folders)",
            path.display()
        ),
    ))
}

/// Creates the folder `path` when it is absent (its parent must exist) and checks it is a
/// real folder ([`real_dir`]): a link planted in its place is refused, never followed.
pub fn ensure_real_dir(path: &Path) -> Result<(), std::io::Error> {
    match std::fs::create_dir(path) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(e),
        _ => {}
    }
    real_dir(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Planted bugs caught: the temporary opened through a link planted at its name (the
    /// target outside would be overwritten), a linked folder accepted.
    #[test]
    fn writes_never_go_through_a_planted_link() {
        let tmp = tempfile::tempdir().unwrap();
        let outside = tmp.path().join("outside");
        std::fs::write(&outside, "keep").unwrap();
        let run = tmp.path().join("run");
        std::fs::create_dir(&run).unwrap();
        let name = format!(".rank-0.json.tmp{}", std::process::id());
        std::os::unix::fs::symlink(&outside, run.join(name)).unwrap();
        std::os::unix::fs::symlink(&outside, run.join("rank-0.json")).unwrap();
        write_atomic(&run.join("rank-0.json"), b"{}").unwrap();
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "keep");
        assert_eq!(
            std::fs::read_to_string(run.join("rank-0.json")).unwrap(),
            "{}"
        );
        std::os::unix::fs::symlink(tmp.path(), run.join("tasks.attempt-1")).unwrap();
        let err = ensure_real_dir(&run.join("tasks.attempt-1")).unwrap_err();
        assert!(err.to_string().contains("is a symbolic link"), "{err}");
        ensure_real_dir(&run.join("nodes.attempt-1")).unwrap();
        ensure_real_dir(&run.join("nodes.attempt-1")).unwrap();
        assert!(real_dir(&run.join("rank-0.json")).is_err());
    }
}
