//! Typed errors of the probe: every failure names the file it concerns and what was
//! being done to it, so a pre-flight report can say exactly which fact was missing.

use std::path::PathBuf;

/// Why [`crate::probe`] could not describe the tree under its root.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// A file or directory the probe needs could not be read or listed.
    #[error("cannot {op} {}", path.display())]
    Io {
        /// What was being done: "read", "list", …
        op: &'static str,
        /// The file or directory concerned (root included).
        path: PathBuf,
        /// The operating system's answer.
        #[source]
        source: std::io::Error,
    },
    /// A file was read but its contents are not what the kernel writes there.
    #[error("cannot parse {}: {detail}", path.display())]
    Parse {
        /// The file concerned (root included).
        path: PathBuf,
        /// What was wrong with it.
        detail: String,
    },
}
