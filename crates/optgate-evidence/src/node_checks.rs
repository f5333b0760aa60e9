//! Every node of a run's step judged on its own, from the node records and task records
//! `optgate step` left: over-subscription (the node's tasks ran more threads than it has
//! cores, and kept its cores busy) and interference (the node busier than its cores before
//! the step), each naming the node. Pure: reads only what the manifest recorded.
//!
//! Over-subscription is measured, not read from the CPUs each task was allowed: a launcher
//! that does not bind (Flux's default) allows every task the whole node, which is no
//! over-subscription while the tasks together run no more threads than there are cores.

use optgate_wrapper::nodes::NodeRecord;
use optgate_wrapper::tasks::TaskRecord;

pub use optgate_report::utilisation::OVERSUBSCRIBED_USED_SHARE;

/// A load average above this many times the node's online CPUs means other work
/// competed with the run for CPUs.
pub const LOAD_FLAG_RATIO: f64 = 1.0;

/// What one node of a step was found to be.
#[derive(Debug, Clone, PartialEq)]
pub enum NodeFinding {
    /// The tasks on the node ran `threads` threads in all (each task's most) on `cores`
    /// cores, and used `cores_used` of them (CPU seconds / wall seconds, summed): at least
    /// [`OVERSUBSCRIBED_USED_SHARE`] of the node busy.
    Oversubscribed {
        node: String,
        threads: u32,
        cores_used: f64,
        cores: u32,
    },
    /// The node's load average before the step was above
    /// [`LOAD_FLAG_RATIO`] × its cores: other work competed for them.
    Busy { node: String, load: f64, cores: u32 },
}

impl std::fmt::Display for NodeFinding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NodeFinding::Oversubscribed {
                node,
                threads,
                cores_used,
                cores,
            } => write!(
                f,
                "node {node} over-subscribed: its tasks ran {threads} thread(s) on {cores} core(s), {cores_used:.1} of them busy"
            ),
            NodeFinding::Busy { node, load, cores } => write!(
                f,
                "node {node} busy: load average {load:.2} before the step on {cores} core(s)"
            ),
        }
    }
}

/// How a node is named in a finding: its host, with the scheduler's name when it differs
/// (`n2 (rank 1)`).
fn node_name(n: &NodeRecord) -> String {
    match &n.node {
        Some(name) if *name != n.host => format!("{} ({name})", n.host),
        _ => n.host.clone(),
    }
}

/// Each node's findings, in the node records' (host) order. A node whose cores are not
/// known is not judged.
pub fn judge_nodes(tasks: &[TaskRecord], nodes: &[NodeRecord]) -> Vec<NodeFinding> {
    let mut findings = Vec::new();
    for n in nodes {
        let Some(cores) = n.cores else { continue };
        if let Some(found) = oversubscribed(tasks, n, cores) {
            findings.push(found);
        }
        if let Some(load) = n.load_avg
            && load > LOAD_FLAG_RATIO * f64::from(cores)
        {
            findings.push(NodeFinding::Busy {
                node: node_name(n),
                load,
                cores,
            });
        }
    }
    findings
}

/// Whether task `t` ran on node `n`: the same host and, when both carry the scheduler's
/// name for the node, the same name (fake nodes of one machine share a host).
fn on(t: &TaskRecord, n: &NodeRecord) -> bool {
    t.host == n.host
        && match (&t.node, &n.node) {
            (Some(a), Some(b)) => a == b,
            _ => true,
        }
}

/// Whether the tasks on node `n` ran more threads than its `cores` and kept at least
/// [`OVERSUBSCRIBED_USED_SHARE`] of them busy; tasks without a thread count are not counted.
fn oversubscribed(tasks: &[TaskRecord], n: &NodeRecord, cores: u32) -> Option<NodeFinding> {
    let on_node = || tasks.iter().filter(|t| on(t, n));
    let threads: u32 = on_node().filter_map(|t| t.threads_max).sum();
    let cores_used: f64 = on_node()
        .filter(|t| t.wall_s > 0.0)
        .map(|t| t.cpu_s / t.wall_s)
        .sum();
    (threads > cores && cores_used >= OVERSUBSCRIBED_USED_SHARE * f64::from(cores)).then(|| {
        NodeFinding::Oversubscribed {
            node: node_name(n),
            threads,
            cores_used,
            cores,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use optgate_wrapper::tasks::TaskEnd;

    /// A task on `host` that ran `threads` threads and used `cores_used` cores.
    fn task(host: &str, threads: u32, cores_used: f64) -> TaskRecord {
        TaskRecord {
            scheduler: None,
            rank: Some(0),
            local_rank: None,
            node: None,
            host: host.into(),
            step_size: None,
            cpus_allowed: 4,
            cpus_allowed_list: String::new(),
            threads_max: Some(threads),
            cpu_user_s: cores_used,
            cpu_system_s: 0.0,
            cpu_s: cores_used,
            max_rss_kib: 0,
            wall_s: 1.0,
            end: TaskEnd::Exited,
            exit_code: Some(0),
            signal: None,
            forwarded_signal: None,
        }
    }

    fn node(host: &str, name: &str, load: f64, cores: Option<u32>) -> NodeRecord {
        NodeRecord {
            node: Some(name.into()),
            host: host.into(),
            governor: "none".into(),
            load_avg: Some(load),
            cores,
            energy_j: None,
            energy_unmeasured: None,
        }
    }

    /// Nodes of four cores, every task allowed all four (no binding). n1: 2 + 2 threads,
    /// all busy (fits exactly); n2: 3 + 2 threads, 3.8 cores busy (over-subscribed); n3:
    /// 8 threads mostly waiting, 1.2 cores busy (not over-subscribed), busy before the
    /// step; n4's cores are unknown. Planted bugs caught: CPUs allowed summed (every node
    /// flagged), threads summed over the whole step rather than per node, `>=` for `>`
    /// (n1 flagged), the busy share ignored (n3 flagged), the load compared with the
    /// step's total cores, a node with unknown cores judged, the wrong node named.
    #[test]
    fn each_node_is_judged_on_its_own_tasks_and_load() {
        let tasks = [
            task("n1", 2, 2.0),
            task("n1", 2, 2.0),
            task("n2", 3, 2.0),
            task("n2", 2, 1.8),
            task("n3", 8, 1.2),
            task("n4", 64, 64.0),
        ];
        let nodes = [
            node("n1", "n1", 4.0, Some(4)),
            node("n2", "1", 0.5, Some(4)),
            node("n3", "n3", 4.5, Some(4)),
            node("n4", "n4", 99.0, None),
        ];
        let got: Vec<String> = judge_nodes(&tasks, &nodes)
            .iter()
            .map(|f| f.to_string())
            .collect();
        assert_eq!(
            got,
            [
                "node n2 (1) over-subscribed: its tasks ran 5 thread(s) on 4 core(s), 3.8 of them busy",
                "node n3 busy: load average 4.50 before the step on 4 core(s)",
            ]
        );
        assert!(judge_nodes(&tasks, &[]).is_empty());
    }

    /// Two brokers of one machine: the same host, told apart by the scheduler's node name.
    /// Planted bug caught: tasks matched by host only (both nodes would count all 4
    /// threads and be flagged).
    #[test]
    fn nodes_sharing_a_host_are_judged_by_their_own_tasks() {
        let on = |name: &str, threads, used| TaskRecord {
            node: Some(name.into()),
            ..task("vm", threads, used)
        };
        let tasks = [on("0", 2, 2.0), on("1", 2, 2.0)];
        let nodes = [node("vm", "0", 0.1, Some(2)), node("vm", "1", 0.1, Some(2))];
        assert!(judge_nodes(&tasks, &nodes).is_empty());
        let tasks = [on("0", 2, 2.0), on("1", 3, 2.0)];
        let got: Vec<String> = judge_nodes(&tasks, &nodes)
            .iter()
            .map(|f| f.to_string())
            .collect();
        assert_eq!(
            got,
            [
                "node vm (1) over-subscribed: its tasks ran 3 thread(s) on 2 core(s), 2.0 of them busy"
            ]
        );
    }
}
