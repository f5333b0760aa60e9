//! Reading a text file an input names, bounded: a regular file only (a pipe never ends, a
//! device like `/dev/zero` never stops giving bytes), its size checked before a byte is
//! read and the read itself limited, so neither a large file nor one that grows while it
//! is read costs more memory than the limit. Used for experiment files and samples files.

use std::io::Read;
use std::path::Path;

/// Why a file could not be read as a bounded text.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// Opening, inspecting or reading it failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// A directory, device, pipe or socket.
    #[error("it is not a regular file (it is {kind})")]
    NotRegular { kind: &'static str },
    /// Larger than the limit: `bytes` as its metadata says, or the limit + 1 when it grew.
    #[error("it is {bytes} bytes, more than the limit of {limit} bytes")]
    TooLarge { bytes: u64, limit: u64 },
    /// Not UTF-8; `valid_up_to` is the offset of the first bad byte.
    #[error("it is not UTF-8 text (byte {valid_up_to} is not valid)")]
    NotUtf8 { valid_up_to: usize },
}

/// The text of the regular file at `path`, of at most `limit` bytes. The type and the size
/// are checked (from the path, so a pipe is never opened and waited on) before it is
/// opened, again on the open file, and the read stops at `limit + 1` bytes.
pub fn read_regular_text(path: &Path, limit: u64) -> Result<String, ReadError> {
    let meta = std::fs::metadata(path)?;
    check_meta(&meta, limit)?;
    let file = std::fs::File::open(path)?;
    // The path may name something else by now: check what was opened.
    let meta = file.metadata()?;
    check_meta(&meta, limit)?;
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(ReadError::TooLarge {
            bytes: bytes.len() as u64,
            limit,
        });
    }
    String::from_utf8(bytes).map_err(|e| ReadError::NotUtf8 {
        valid_up_to: e.utf8_error().valid_up_to(),
    })
}

fn check_meta(meta: &std::fs::Metadata, limit: u64) -> Result<(), ReadError> {
    if !meta.is_file() {
        return Err(ReadError::NotRegular {
            kind: file_kind(meta),
        });
    }
    if meta.len() > limit {
        return Err(ReadError::TooLarge {
            bytes: meta.len(),
            limit,
        });
    }
    Ok(())
}

/// What a non-regular file is, in words: "a directory", "a pipe", ….
pub fn file_kind(meta: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::MetadataExt;
    optgate_probe::file_kind(meta.mode())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_what_is_not_a_regular_file_and_what_is_too_large() {
        let dir = tempfile::tempdir().unwrap();
        let err = read_regular_text(dir.path(), 100).unwrap_err();
        assert_eq!(
            err.to_string(),
            "it is not a regular file (it is a directory)"
        );
        // /dev/zero never ends: refused before a byte is read.
        let err = read_regular_text(Path::new("/dev/zero"), 100).unwrap_err();
        assert_eq!(
            err.to_string(),
            "it is not a regular file (it is a character device)"
        );
        let big = dir.path().join("big");
        std::fs::write(&big, "x".repeat(101)).unwrap();
        let err = read_regular_text(&big, 100).unwrap_err();
        assert!(
            matches!(
                err,
                ReadError::TooLarge {
                    bytes: 101,
                    limit: 100
                }
            ),
            "{err:?}"
        );
        std::fs::write(&big, "x".repeat(100)).unwrap();
        assert_eq!(read_regular_text(&big, 100).unwrap().len(), 100);
        std::fs::write(&big, b"ab\xffc").unwrap();
        let err = read_regular_text(&big, 100).unwrap_err();
        assert!(
            matches!(err, ReadError::NotUtf8 { valid_up_to: 2 }),
            "{err:?}"
        );
    }

    #[test]
    fn a_pipe_is_refused_without_waiting_for_a_writer() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        // Opening a FIFO blocks until a writer comes; checking first never opens it.
        let err = read_regular_text(&fifo, 100).unwrap_err();
        assert_eq!(err.to_string(), "it is not a regular file (it is a pipe)");
    }
}
