//! Small readers for /proc and /sys files under a root directory: trimmed text,
//! optional facts (absent file = `None`) and numbers, with errors that carry the path.

use std::path::{Path, PathBuf};

use crate::error::ProbeError;

/// Reads a whole file, mapping failure to [`ProbeError::Io`] with the path.
pub fn read_text(path: &Path) -> Result<String, ProbeError> {
    std::fs::read_to_string(path).map_err(|source| ProbeError::Io {
        op: "read",
        path: path.to_path_buf(),
        source,
    })
}

/// Reads a sysfs attribute and trims it; `None` when it does not exist or cannot be
/// read. Many attributes are optional (an older kernel, a driver that lacks them), and
/// the probe reports their absence rather than failing.
pub fn read_opt(path: &Path) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

/// Reads a sysfs attribute holding one unsigned integer.
pub fn read_u64(path: &Path) -> Option<u64> {
    read_opt(path)?.parse().ok()
}

/// Lists the entries of a directory whose names are `prefix` followed by a decimal
/// number (`cpu12`, `node3`, `policy0`), sorted by that number.
pub fn numbered_entries(dir: &Path, prefix: &str) -> Result<Vec<(u32, PathBuf)>, ProbeError> {
    let entries = std::fs::read_dir(dir).map_err(|source| ProbeError::Io {
        op: "list",
        path: dir.to_path_buf(),
        source,
    })?;
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| ProbeError::Io {
            op: "list",
            path: dir.to_path_buf(),
            source,
        })?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        // The MSRV (1.85) predates let-chains, hence the nesting.
        let Some(rest) = name.strip_prefix(prefix) else {
            continue;
        };
        if rest.is_empty() || !rest.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        if let Ok(n) = rest.parse::<u32>() {
            out.push((n, entry.path()));
        }
    }
    out.sort_by_key(|(n, _)| *n);
    Ok(out)
}

/// Whether this process may write `path`, asked with `access(2)` and `W_OK` so the file
/// itself is never opened for writing (opening a sysfs attribute for write is harmless,
/// but a probe must not even look like it changes anything).
pub fn may_write(path: &Path) -> bool {
    nix::unistd::access(path, nix::unistd::AccessFlags::W_OK).is_ok()
}

/// Joins an absolute in-system path such as `/sys/devices/system/cpu` onto `root`.
pub fn under(root: &Path, abs: &str) -> PathBuf {
    root.join(abs.trim_start_matches('/'))
}
