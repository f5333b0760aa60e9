//! `optgate probe [--json]`: the facts of this node (also the first step of every job).

use anyhow::Result;

use crate::exit;

pub fn probe(json: bool) -> Result<i32> {
    let p = node_probe();
    if json {
        outln!("{}", serde_json::to_string_pretty(&p)?);
    } else {
        out!("{}", optgate_probe::render_text(&p));
    }
    Ok(exit::OK)
}

/// This node's probe (or the probe of `$OPTGATE_SYSFS_ROOT`). A Flux job id is written in
/// decimal, as the backend records it at submission.
pub fn node_probe() -> optgate_probe::Probe {
    let mut p = raw_node_probe();
    if let Some(a) = p.allocation.as_mut()
        && a.scheduler.as_deref() == Some("flux")
        && let Some(id) = a.job_id.as_deref()
        && let Ok(dec) = optgate_sched::flux::parse_job_id(id)
    {
        a.job_id = Some(dec.0);
    }
    p
}

fn raw_node_probe() -> optgate_probe::Probe {
    let root = optgate_probe::sysfs_root();
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
