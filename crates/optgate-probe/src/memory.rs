//! Memory and NUMA facts: `MemTotal` of `/proc/meminfo` and the per-node CPU lists and
//! memory sizes of `/sys/devices/system/node`.

use std::path::Path;

use crate::cpulist::{format_cpulist, parse_cpulist};
use crate::error::ProbeError;
use crate::fsread::{numbered_entries, read_opt, under};
use crate::types::NumaNode;

/// Finds `key` (e.g. `MemTotal`) in meminfo text and returns it in bytes. Both the
/// global file (`MemTotal:  123 kB`) and the per-node one (`Node 0 MemTotal:  123 kB`)
/// are understood.
pub fn meminfo_bytes(text: &str, key: &str) -> Option<u64> {
    for line in text.lines() {
        let Some((left, right)) = line.split_once(':') else {
            continue;
        };
        if left.split_whitespace().last() != Some(key) {
            continue;
        }
        let mut parts = right.split_whitespace();
        let value: u64 = parts.next()?.parse().ok()?;
        return Some(match parts.next() {
            Some("kB") => value * 1024,
            _ => value,
        });
    }
    None
}

/// Reads the NUMA nodes; an absent `node` directory (a kernel without NUMA) is no nodes.
pub fn numa_nodes(root: &Path) -> Result<Vec<NumaNode>, ProbeError> {
    let dir = under(root, "/sys/devices/system/node");
    if !dir.is_dir() {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for (id, node) in numbered_entries(&dir, "node")? {
        let cpus = read_opt(&node.join("cpulist"))
            .and_then(|s| parse_cpulist(&s))
            .map(|s| format_cpulist(&s))
            .unwrap_or_default();
        let memory_total_bytes =
            read_opt(&node.join("meminfo")).and_then(|t| meminfo_bytes(&t, "MemTotal"));
        out.push(NumaNode {
            id,
            cpus,
            memory_total_bytes,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn global_and_node_meminfo() {
        let global = "MemTotal:       32489496 kB\nMemFree:        28118332 kB\n";
        assert_eq!(meminfo_bytes(global, "MemTotal"), Some(32489496 * 1024));
        assert_eq!(meminfo_bytes(global, "MemFree"), Some(28118332 * 1024));
        let node = "Node 1 MemTotal:       49519964 kB\nNode 1 MemFree:  1 kB\n";
        assert_eq!(meminfo_bytes(node, "MemTotal"), Some(49519964 * 1024));
        assert_eq!(meminfo_bytes(node, "Buffers"), None);
    }
}
