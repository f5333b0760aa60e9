//! Reading a run directory's files as untrusted: the app (and anything else that can write
//! there) may leave a pipe, a device, a symbolic link out of the directory or a file of any
//! size where optgate expects its own small record. Every component under the run
//! directory is opened with `openat` and `O_NOFOLLOW` (a link is refused, never followed),
//! the last one with `O_NONBLOCK` after its type was checked without opening it, its type
//! checked again on the open file, and its size capped before a byte is read. Output
//! files are read line by line ([`read_lines`]), with bounded lines and bounded memory.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

use nix::fcntl::{OFlag, openat};
use nix::sys::stat::{FileStat, Mode, fstat, fstatat};

/// A task or node record, `run.json`: optgate writes a few hundred bytes.
pub const MAX_RECORD_BYTES: u64 = 1 << 20;
/// A run's manifest: its environment and one entry per task of the step (10,000 tasks are
/// a few MiB).
pub const MAX_MANIFEST_BYTES: u64 = 64 << 20;
/// An output file read for a metric, a guardrail, a correctness check or hashed: past it
/// the file is refused before a byte is read (a 10 GB sparse file is answered at once).
pub const MAX_OUTPUT_BYTES: u64 = 4 << 30;
/// An output file up to this size is read whole, as it is; a larger one line by line,
/// keeping only the lines a reader asks for.
pub const WHOLE_OUTPUT_BYTES: u64 = 64 << 20;
/// Bytes of one line kept when an output is read line by line; the rest of a longer line
/// is skipped (and counted).
pub const MAX_LINE_BYTES: usize = 64 << 10;
/// Bytes kept of one output file read line by line (the kept lines and an empty line for
/// each other one, so line numbers stay true).
pub const MAX_KEPT_BYTES: usize = 256 << 20;

/// Why a run directory's file was not read.
#[derive(Debug, thiserror::Error)]
pub enum UntrustedError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: a symbolic link (links in a run directory are not followed)", path.display())]
    Symlink { path: PathBuf },
    #[error("{}: {kind}, not a regular file", path.display())]
    NotRegular { path: PathBuf, kind: &'static str },
    #[error("{}: {bytes} bytes, more than the limit of {limit} bytes", path.display())]
    TooLarge {
        path: PathBuf,
        bytes: u64,
        limit: u64,
    },
    #[error("{}: not a path inside the run directory", path.display())]
    Outside { path: PathBuf },
}

impl UntrustedError {
    /// Whether the file is simply not there (a run that did not write it).
    pub fn is_absent(&self) -> bool {
        matches!(self, UntrustedError::Io { source, .. }
            if source.kind() == std::io::ErrorKind::NotFound)
    }

    /// The error without the file's path in front (for a message that names it already).
    pub fn reason(&self) -> String {
        let text = self.to_string();
        let prefix = format!("{}: ", self.path().display());
        text.strip_prefix(&prefix).unwrap_or(&text).to_string()
    }

    /// The same error as an `io::Error` of its reason, for callers that carry those.
    pub fn into_io(self) -> std::io::Error {
        match self {
            UntrustedError::Io { source, .. } => source,
            other => std::io::Error::new(std::io::ErrorKind::InvalidData, other.reason()),
        }
    }

    /// The file the error is about.
    pub fn path(&self) -> &Path {
        match self {
            UntrustedError::Io { path, .. }
            | UntrustedError::Symlink { path }
            | UntrustedError::NotRegular { path, .. }
            | UntrustedError::TooLarge { path, .. }
            | UntrustedError::Outside { path } => path,
        }
    }
}

/// What a file type is, in words; None for a regular file.
fn kind_of(st: &FileStat) -> Option<&'static str> {
    Some(optgate_probe::file_kind(st.st_mode)).filter(|&k| k != "a regular file")
}

/// The components of `rel`, each a plain name: `..`, a root or a prefix is refused.
fn names(dir: &Path, rel: &Path) -> Result<Vec<PathBuf>, UntrustedError> {
    let mut out = Vec::new();
    for c in rel.components() {
        match c {
            Component::Normal(n) => out.push(PathBuf::from(n)),
            Component::CurDir => {}
            _ => {
                return Err(UntrustedError::Outside {
                    path: dir.join(rel),
                });
            }
        }
    }
    if out.is_empty() {
        return Err(UntrustedError::Outside {
            path: dir.join(rel),
        });
    }
    Ok(out)
}

/// Opens the regular file `dir/rel` without following a link in any component under
/// `dir` and without blocking; its size checked against `limit`. The file and its size.
pub fn open_regular(dir: &Path, rel: &Path, limit: u64) -> Result<(File, u64), UntrustedError> {
    let path = dir.join(rel);
    let errno = |e: nix::errno::Errno| UntrustedError::Io {
        path: path.clone(),
        source: std::io::Error::from(e),
    };
    let parts = names(dir, rel)?;
    let dir_flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
    let mut at: OwnedFd = nix::fcntl::open(dir, dir_flags, Mode::empty()).map_err(errno)?;
    let (last, parents) = parts.split_last().expect("names is never empty");
    for p in parents {
        at = openat(
            at.as_fd(),
            p.as_path(),
            dir_flags | OFlag::O_NOFOLLOW,
            Mode::empty(),
        )
        .map_err(|e| refused(&path, &at, p, e))?;
    }
    // Its type from the directory entry first: a pipe or a device is never opened.
    let st = fstatat(
        at.as_fd(),
        last.as_path(),
        nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
    )
    .map_err(errno)?;
    check_stat(&path, &st, limit)?;
    let flags = OFlag::O_RDONLY
        | OFlag::O_NOFOLLOW
        | OFlag::O_NONBLOCK
        | OFlag::O_NOCTTY
        | OFlag::O_CLOEXEC;
    let fd = openat(at.as_fd(), last.as_path(), flags, Mode::empty())
        .map_err(|e| refused(&path, &at, last, e))?;
    // The entry may name something else by now: check what was opened.
    let st = fstat(fd.as_fd()).map_err(errno)?;
    check_stat(&path, &st, limit)?;
    Ok((File::from(fd), st.st_size as u64))
}

/// The error of an `openat` that failed: a link when `O_NOFOLLOW` met one.
fn refused(path: &Path, at: &OwnedFd, name: &Path, e: nix::errno::Errno) -> UntrustedError {
    let is_link = fstatat(at.as_fd(), name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW)
        .is_ok_and(|st| kind_of(&st) == Some("a symbolic link"));
    if is_link {
        UntrustedError::Symlink {
            path: path.to_path_buf(),
        }
    } else {
        UntrustedError::Io {
            path: path.to_path_buf(),
            source: std::io::Error::from(e),
        }
    }
}

fn check_stat(path: &Path, st: &FileStat, limit: u64) -> Result<(), UntrustedError> {
    match kind_of(st) {
        Some("a symbolic link") => {
            return Err(UntrustedError::Symlink {
                path: path.to_path_buf(),
            });
        }
        Some(kind) => {
            return Err(UntrustedError::NotRegular {
                path: path.to_path_buf(),
                kind,
            });
        }
        None => {}
    }
    let bytes = st.st_size as u64;
    if bytes > limit {
        return Err(UntrustedError::TooLarge {
            path: path.to_path_buf(),
            bytes,
            limit,
        });
    }
    Ok(())
}

/// The bytes of the regular file `dir/rel`, at most `limit` of them (a file that grows
/// past it while read is refused too).
pub fn read_bytes(dir: &Path, rel: &Path, limit: u64) -> Result<Vec<u8>, UntrustedError> {
    let (file, size) = open_regular(dir, rel, limit)?;
    let path = dir.join(rel);
    let mut bytes = Vec::with_capacity(size as usize);
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|source| UntrustedError::Io {
            path: path.clone(),
            source,
        })?;
    if bytes.len() as u64 > limit {
        return Err(UntrustedError::TooLarge {
            path,
            bytes: bytes.len() as u64,
            limit,
        });
    }
    Ok(bytes)
}

/// The names of the record files (`*.json`, not hidden) in the folder `dir/rel`, sorted;
/// empty when the folder is absent. A folder that is a link, or not a folder, is refused.
pub fn record_names(dir: &Path, rel: &Path) -> Result<Vec<String>, UntrustedError> {
    let path = dir.join(rel);
    let io = |source| UntrustedError::Io {
        path: path.clone(),
        source,
    };
    match std::fs::symlink_metadata(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io(e)),
        Ok(m) if m.file_type().is_symlink() => return Err(UntrustedError::Symlink { path }),
        Ok(m) if !m.is_dir() => {
            return Err(UntrustedError::NotRegular {
                path,
                kind: "not a directory",
            });
        }
        Ok(_) => {}
    }
    let mut names: Vec<String> = std::fs::read_dir(&path)
        .map_err(io)?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".json") && !n.starts_with('.'))
        .collect();
    names.sort();
    Ok(names)
}

/// Why a folder of records gives no figure: the file (relative to the run directory) and
/// the rule it broke, or why it could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: {why}")]
pub struct RecordProblem {
    pub file: String,
    pub why: String,
}

/// Every record file of the folder `run_dir/folder` ([`record_names`]), each read as
/// untrusted (at most [`MAX_RECORD_BYTES`]) and parsed, with its path relative to
/// `run_dir`; the first file that cannot be read or is not a record is the problem.
pub fn read_json_records<T: serde::de::DeserializeOwned>(
    run_dir: &Path,
    folder: &Path,
) -> Result<Vec<(String, T)>, RecordProblem> {
    let problem = |file: &Path, why: String| RecordProblem {
        file: file.display().to_string(),
        why,
    };
    // The error names the whole path; the problem names the file once.
    let unreadable = |file: &Path, e: UntrustedError| problem(file, e.reason());
    let names = record_names(run_dir, folder).map_err(|e| unreadable(folder, e))?;
    let mut out = Vec::with_capacity(names.len());
    for name in names {
        let file = folder.join(&name);
        let bytes =
            read_bytes(run_dir, &file, MAX_RECORD_BYTES).map_err(|e| unreadable(&file, e))?;
        let record = serde_json::from_slice(&bytes)
            .map_err(|e| problem(&file, format!("not a record ({e})")))?;
        out.push((file.display().to_string(), record));
    }
    Ok(out)
}

/// An output file's text as read for one reader: the text (invalid UTF-8 replaced) and what
/// was left out of it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct KeptText {
    pub text: String,
    /// Lines longer than [`MAX_LINE_BYTES`], cut to it.
    pub lines_cut: u64,
    /// Lines left out because the reader did not ask for them (read line by line only).
    pub lines_left_out: u64,
}

/// The text of the output file `dir/rel`: whole when it is at most [`WHOLE_OUTPUT_BYTES`],
/// else read line by line, each line cut to [`MAX_LINE_BYTES`] and kept only when `keep`
/// says so (another line stays as an empty line, so line numbers hold), at most
/// [`MAX_KEPT_BYTES`] kept. Refused past [`MAX_OUTPUT_BYTES`].
pub fn read_lines(
    dir: &Path,
    rel: &Path,
    keep: &dyn Fn(&str) -> bool,
) -> Result<KeptText, UntrustedError> {
    let (file, size) = open_regular(dir, rel, MAX_OUTPUT_BYTES)?;
    let path = dir.join(rel);
    let io = |source| UntrustedError::Io {
        path: path.clone(),
        source,
    };
    if size <= WHOLE_OUTPUT_BYTES {
        let mut bytes = Vec::with_capacity(size as usize);
        file.take(WHOLE_OUTPUT_BYTES)
            .read_to_end(&mut bytes)
            .map_err(io)?;
        return Ok(KeptText {
            text: String::from_utf8_lossy(&bytes).into_owned(),
            ..KeptText::default()
        });
    }
    let mut kept = KeptText::default();
    let mut reader = BufReader::with_capacity(1 << 16, file.take(MAX_OUTPUT_BYTES));
    let mut line = Vec::with_capacity(MAX_LINE_BYTES);
    loop {
        line.clear();
        let (more, cut) = next_line(&mut reader, &mut line).map_err(io)?;
        if !more {
            break;
        }
        kept.lines_cut += u64::from(cut);
        let text = String::from_utf8_lossy(&line);
        if keep(&text) {
            kept.text.push_str(&text);
        } else {
            kept.lines_left_out += 1;
        }
        kept.text.push('\n');
        if kept.text.len() > MAX_KEPT_BYTES {
            return Err(UntrustedError::TooLarge {
                path,
                bytes: kept.text.len() as u64,
                limit: MAX_KEPT_BYTES as u64,
            });
        }
    }
    Ok(kept)
}

/// Reads one line (without its `\n`) into `line`, at most [`MAX_LINE_BYTES`] of it, the
/// rest of the line skipped: whether there was a line, and whether it was cut.
fn next_line(reader: &mut impl BufRead, line: &mut Vec<u8>) -> std::io::Result<(bool, bool)> {
    let (mut any, mut cut) = (false, false);
    loop {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            return Ok((any, cut));
        }
        any = true;
        let (chunk, done) = match memchr_newline(buf) {
            Some(i) => (&buf[..i], Some(i + 1)),
            None => (buf, None),
        };
        let room = MAX_LINE_BYTES.saturating_sub(line.len());
        cut |= chunk.len() > room;
        line.extend_from_slice(&chunk[..chunk.len().min(room)]);
        let used = done.unwrap_or(buf.len());
        reader.consume(used);
        if done.is_some() {
            return Ok((true, cut));
        }
    }
}

fn memchr_newline(buf: &[u8]) -> Option<usize> {
    buf.iter().position(|&b| b == b'\n')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mkfifo(path: &Path) {
        let made = std::process::Command::new("mkfifo")
            .arg(path)
            .status()
            .unwrap();
        assert!(made.success());
    }

    /// Planted bugs caught: a pipe opened (the test would hang in `open`), a link followed
    /// (the secret outside would be read), a device read (never ends), no size cap.
    #[test]
    fn pipes_links_devices_and_oversize_files_are_refused_naming_the_file() {
        let tmp = tempfile::tempdir().unwrap();
        let run = tmp.path().join("run");
        std::fs::create_dir_all(run.join("tasks.attempt-1")).unwrap();
        std::fs::write(tmp.path().join("secret"), "s3cret").unwrap();
        mkfifo(&run.join("tasks.attempt-1/rank-0.json"));
        let err = read_bytes(&run, Path::new("tasks.attempt-1/rank-0.json"), 100).unwrap_err();
        assert!(matches!(
            err,
            UntrustedError::NotRegular { kind: "a pipe", .. }
        ));
        assert!(
            err.to_string()
                .contains("tasks.attempt-1/rank-0.json: a pipe"),
            "{err}"
        );
        std::os::unix::fs::symlink(tmp.path().join("secret"), run.join("link")).unwrap();
        let err = read_bytes(&run, Path::new("link"), 100).unwrap_err();
        assert!(matches!(err, UntrustedError::Symlink { .. }), "{err:?}");
        std::os::unix::fs::symlink("/dev/zero", run.join("zero")).unwrap();
        assert!(matches!(
            read_bytes(&run, Path::new("zero"), 100).unwrap_err(),
            UntrustedError::Symlink { .. }
        ));
        // A link in a folder component is refused as well.
        std::os::unix::fs::symlink(tmp.path(), run.join("up")).unwrap();
        let err = read_bytes(&run, Path::new("up/secret"), 100).unwrap_err();
        assert!(matches!(err, UntrustedError::Symlink { .. }), "{err:?}");
        let err = read_bytes(&run, Path::new("../secret"), 100).unwrap_err();
        assert!(matches!(err, UntrustedError::Outside { .. }), "{err:?}");
        std::fs::write(run.join("big"), "x".repeat(101)).unwrap();
        let err = read_bytes(&run, Path::new("big"), 100).unwrap_err();
        assert!(matches!(
            err,
            UntrustedError::TooLarge {
                bytes: 101,
                limit: 100,
                ..
            }
        ));
        assert_eq!(read_bytes(&run, Path::new("big"), 101).unwrap().len(), 101);
        assert!(
            read_bytes(&run, Path::new("absent"), 100)
                .unwrap_err()
                .is_absent()
        );
        // The folder of records itself a link: refused, not listed.
        std::os::unix::fs::symlink(tmp.path(), run.join("tasks.attempt-2")).unwrap();
        assert!(matches!(
            record_names(&run, Path::new("tasks.attempt-2")).unwrap_err(),
            UntrustedError::Symlink { .. }
        ));
        assert_eq!(
            record_names(&run, Path::new("tasks.attempt-1")).unwrap(),
            vec!["rank-0.json".to_string()]
        );
        assert!(
            record_names(&run, Path::new("tasks.attempt-9"))
                .unwrap()
                .is_empty()
        );
    }

    /// A big output is read line by line: lines not asked for stay empty (line numbers
    /// hold), a huge line is cut. Planted bugs caught: every line kept (the text would be
    /// the whole file), no cut (a line of the whole file).
    #[test]
    fn a_large_output_keeps_only_the_lines_asked_for_each_cut_to_the_limit() {
        let tmp = tempfile::tempdir().unwrap();
        let mut text = String::new();
        while text.len() as u64 <= WHOLE_OUTPUT_BYTES {
            text.push_str("noise noise noise noise noise noise noise noise noise noise\n");
        }
        text.push_str("epoch 1 took 2.5 s\n");
        text.push_str(&"y".repeat(MAX_LINE_BYTES * 3));
        text.push('\n');
        std::fs::write(tmp.path().join("stdout"), &text).unwrap();
        let keep = |l: &str| l.starts_with("epoch") || l.starts_with('y');
        let kept = read_lines(tmp.path(), Path::new("stdout"), &keep).unwrap();
        let lines: Vec<&str> = kept.text.lines().collect();
        assert_eq!(lines.len(), text.lines().count());
        assert_eq!(lines[lines.len() - 2], "epoch 1 took 2.5 s");
        assert_eq!(lines[lines.len() - 1].len(), MAX_LINE_BYTES);
        assert_eq!(kept.lines_cut, 1);
        assert_eq!(kept.lines_left_out, lines.len() as u64 - 2);
        assert!(kept.text.len() < 2 << 20, "{} bytes kept", kept.text.len());
        // A small file is read whole, as it is.
        std::fs::write(tmp.path().join("small"), "a\nb").unwrap();
        let small = read_lines(tmp.path(), Path::new("small"), &|_| false).unwrap();
        assert_eq!(small.text, "a\nb");
    }

    /// A sparse file past the cap is refused from its size, at once.
    #[test]
    fn a_sparse_file_past_the_output_cap_is_refused_before_reading() {
        let tmp = tempfile::tempdir().unwrap();
        let f = File::create(tmp.path().join("metric.txt")).unwrap();
        f.set_len(10 << 30).unwrap();
        let err = read_lines(tmp.path(), Path::new("metric.txt"), &|_| true).unwrap_err();
        assert!(
            matches!(err, UntrustedError::TooLarge { bytes, .. } if bytes == 10 << 30),
            "{err:?}"
        );
    }
}
