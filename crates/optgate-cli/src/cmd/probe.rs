//! `optgate probe [--json]`: the facts of this node (also the first step of every job).

use anyhow::Result;

use crate::exit;

pub fn probe(json: bool) -> Result<i32> {
    let p = node_probe();
    if json {
        println!("{}", serde_json::to_string_pretty(&p)?);
    } else {
        print!("{}", optgate_probe::render_text(&p));
    }
    Ok(exit::OK)
}

/// The root the probe and the governor control read: `/`, or `$OPTGATE_SYSFS_ROOT` — a
/// captured `/proc` + `/sys` tree — so tests can exercise other machines' files.
pub fn sysfs_root() -> std::path::PathBuf {
    std::env::var_os("OPTGATE_SYSFS_ROOT")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from("/"))
}

/// This node's probe (or the probe of `$OPTGATE_SYSFS_ROOT`).
pub fn node_probe() -> optgate_probe::Probe {
    let root = sysfs_root();
    if root == std::path::Path::new("/") {
        optgate_probe::probe_live()
    } else {
        optgate_probe::probe(&root).unwrap_or_else(|e| {
            tracing::warn!(
                "cannot probe {}: {e}; using this machine's facts",
                root.display()
            );
            optgate_probe::probe_live()
        })
    }
}
