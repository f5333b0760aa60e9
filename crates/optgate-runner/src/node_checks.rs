//! Every node of a run's step judged on its own, from the node records and task records
//! `optgate step` left: over-subscription (the node's tasks allowed more CPUs in total
//! than the node has cores) and interference (the node busier than its cores before the
//! step), each naming the node. Pure: reads only what the manifest recorded.

use optgate_wrapper::nodes::NodeRecord;
use optgate_wrapper::tasks::TaskRecord;

/// What one node of a step was found to be.
#[derive(Debug, Clone, PartialEq)]
pub enum NodeFinding {
    /// The tasks on the node were allowed `cpus_allowed` CPUs in total on `cores` cores.
    Oversubscribed {
        node: String,
        cpus_allowed: u32,
        cores: u32,
    },
    /// The node's load average before the step was above
    /// [`crate::collect::LOAD_FLAG_RATIO`] × its cores: other work competed for them.
    Busy { node: String, load: f64, cores: u32 },
}

impl std::fmt::Display for NodeFinding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NodeFinding::Oversubscribed {
                node,
                cpus_allowed,
                cores,
            } => write!(
                f,
                "node {node} over-subscribed: its tasks were allowed {cpus_allowed} CPU(s) on {cores} core(s)"
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
        let cpus_allowed: u32 = tasks
            .iter()
            .filter(|t| t.host == n.host)
            .map(|t| t.cpus_allowed)
            .sum();
        if cpus_allowed > cores {
            findings.push(NodeFinding::Oversubscribed {
                node: node_name(n),
                cpus_allowed,
                cores,
            });
        }
        if let Some(load) = n.load_avg
            && load > crate::collect::LOAD_FLAG_RATIO * f64::from(cores)
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

#[cfg(test)]
mod tests {
    use super::*;
    use optgate_wrapper::tasks::TaskEnd;

    fn task(host: &str, cpus: u32) -> TaskRecord {
        TaskRecord {
            scheduler: None,
            rank: Some(0),
            local_rank: None,
            node: None,
            host: host.into(),
            step_size: None,
            cpus_allowed: cpus,
            cpus_allowed_list: String::new(),
            threads_max: None,
            cpu_user_s: 0.0,
            cpu_system_s: 0.0,
            cpu_s: 0.0,
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

    /// Two nodes of four cores: n1's two tasks take 2 + 2 (fits exactly), n2's take
    /// 3 + 2 (over-subscribed), n3 was busy before the step, n4's cores are unknown.
    /// Planted bugs caught: CPUs summed over the whole step rather than per node (n1
    /// would be flagged), `>=` for `>` (n1 flagged), the load compared with the step's
    /// total cores, a node with unknown cores judged, the wrong node named.
    #[test]
    fn each_node_is_judged_on_its_own_tasks_and_load() {
        let tasks = [
            task("n1", 2),
            task("n1", 2),
            task("n2", 3),
            task("n2", 2),
            task("n3", 1),
            task("n4", 64),
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
                "node n2 (1) over-subscribed: its tasks were allowed 5 CPU(s) on 4 core(s)",
                "node n3 busy: load average 4.50 before the step on 4 core(s)",
            ]
        );
        assert!(judge_nodes(&tasks, &[]).is_empty());
    }
}
