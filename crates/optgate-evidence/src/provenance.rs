//! The provenance of an execution's report, typed: everything needed to tell later how
//! the numbers were made — the experiment file, the plan's seed and recorded order, the
//! node that built the report, each arm as it ran and each collected run with its
//! manifest's times. `report::build_report` stores it in the report's provenance object
//! under these keys (the samples file's and the decision's parts are typed in
//! `optgate_report::provenance`).

use std::collections::BTreeMap;

use serde::Serialize;

use optgate_experiment::{Design, Experiment, Plan, PlannedBlock, Resources};
use optgate_probe::{IsaSummary, Probe};

use crate::collect::ArmCorrectness;
use crate::{Collected, Layout, RunStatus};

/// An execution's provenance.
#[derive(Debug, Serialize)]
pub struct ExecutionProvenance<'a> {
    pub optgate_version: &'static str,
    pub experiment_file: String,
    pub experiment_sha256: &'a str,
    pub run_root: String,
    pub scheduler: String,
    pub design: &'a Design,
    pub seed: u64,
    pub recorded_order: &'a [PlannedBlock],
    pub node: NodeProvenance<'a>,
    pub arms: Vec<ArmProvenance<'a>>,
    pub correctness: Correctness<'a>,
    pub runs: Vec<RunProvenance<'a>>,
    pub failed_runs: usize,
}

/// The machine that built the report.
#[derive(Debug, Serialize)]
pub struct NodeProvenance<'a> {
    pub hostname: &'a Option<String>,
    pub cpu_model: &'a Option<String>,
    pub physical_cores: u32,
    pub hardware_threads: u32,
    pub numa_nodes: u32,
    pub isa: &'a IsaSummary,
    pub governors: &'a [String],
    pub kernel: &'a Option<String>,
}

/// One arm as it ran: its variables, resources, command line, build, governor, and why it
/// was not applicable.
#[derive(Debug, Serialize)]
pub struct ArmProvenance<'a> {
    pub name: &'a str,
    pub env: &'a BTreeMap<String, String>,
    pub unset: &'a [String],
    pub resources: &'a Resources,
    pub args: &'a [String],
    pub command: String,
    pub build: Option<BuildProvenance<'a>>,
    pub governor: &'a Option<String>,
    pub requires: &'a [String],
    pub not_applicable: Option<&'a String>,
}

/// The build an arm ran.
#[derive(Debug, Serialize)]
pub struct BuildProvenance<'a> {
    pub id: &'a str,
    pub command: String,
}

/// Whether correctness was checked, and each arm's verdict when it was.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum Correctness<'a> {
    /// In words: why it was not.
    NotChecked(&'static str),
    Checked(&'a BTreeMap<String, ArmCorrectness>),
}

/// One collected run with its manifest's times, exit code and job id, and the governor
/// changes it recorded (`governor.json` as the run wrote it).
#[derive(Debug, Serialize)]
pub struct RunProvenance<'a> {
    pub id: &'a str,
    pub arm: &'a str,
    pub block: u32,
    pub status: &'a RunStatus,
    pub host: &'a Option<String>,
    pub elapsed_s: Option<f64>,
    pub started_at: Option<String>,
    pub ended_at: Option<String>,
    pub exit_code: Option<i32>,
    pub scheduler_job_id: Option<String>,
    pub governor_changes: Option<serde_json::Value>,
}

/// The provenance of an execution whose runs are `collected`, built on `probe`'s node.
pub fn execution_provenance<'a>(
    exp: &'a Experiment,
    plan: &'a Plan,
    layout: &Layout,
    collected: &'a Collected,
    not_applicable: &'a BTreeMap<String, String>,
    probe: &'a Probe,
) -> ExecutionProvenance<'a> {
    ExecutionProvenance {
        optgate_version: env!("CARGO_PKG_VERSION"),
        experiment_file: exp.source.display().to_string(),
        experiment_sha256: &exp.source_sha256,
        run_root: layout.root.display().to_string(),
        scheduler: exp.kind.to_string(),
        design: &exp.design,
        seed: plan.seed,
        recorded_order: &plan.blocks,
        node: NodeProvenance {
            hostname: &probe.hostname,
            cpu_model: &probe.cpu_model,
            physical_cores: probe.physical_cores,
            hardware_threads: probe.hardware_threads,
            numa_nodes: probe.numa_nodes,
            isa: &probe.isa,
            governors: &probe.cpufreq.governors,
            kernel: &probe.kernel,
        },
        arms: arms(exp, not_applicable),
        correctness: match &collected.correctness {
            None => Correctness::NotChecked(
                "not checked: the experiment declares no correctness files, values or expected verdict",
            ),
            Some(c) => Correctness::Checked(c),
        },
        runs: runs(layout, collected),
        failed_runs: collected
            .runs
            .iter()
            .filter(|r| matches!(r.status, RunStatus::Failed { .. }))
            .count(),
    }
}

fn arms<'a>(
    exp: &'a Experiment,
    not_applicable: &'a BTreeMap<String, String>,
) -> Vec<ArmProvenance<'a>> {
    use optgate_sched::script::app_command_line;
    exp.arms
        .iter()
        .map(|a| ArmProvenance {
            name: &a.name,
            env: &a.env,
            unset: &a.unset,
            resources: &a.resources,
            args: &a.args,
            command: app_command_line(&exp.app_command, &a.args),
            build: a.build.map(|i| &exp.builds[i]).map(|b| BuildProvenance {
                id: &b.id,
                command: app_command_line(b.command(), &[]),
            }),
            governor: &a.governor,
            requires: &a.requires,
            not_applicable: not_applicable.get(&a.name),
        })
        .collect()
}

fn runs<'a>(layout: &Layout, collected: &'a Collected) -> Vec<RunProvenance<'a>> {
    collected
        .runs
        .iter()
        .map(|r| {
            let dir = layout.run_dir(&r.id);
            let manifest = optgate_wrapper::manifest::RunManifest::read(&dir)
                .ok()
                .flatten();
            let governor = std::fs::read_to_string(dir.join("governor.json"))
                .ok()
                .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok());
            RunProvenance {
                id: &r.id,
                arm: &r.arm,
                block: r.block,
                status: &r.status,
                host: &r.host,
                elapsed_s: r.elapsed_s,
                started_at: manifest.as_ref().map(|m| m.started_at.clone()),
                ended_at: manifest.as_ref().map(|m| m.ended_at.clone()),
                exit_code: manifest.as_ref().and_then(|m| m.exit_code),
                scheduler_job_id: manifest.as_ref().and_then(|m| m.scheduler_job_id.clone()),
                governor_changes: governor,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RunResult;

    fn keys(v: &serde_json::Value) -> Vec<&str> {
        v.as_object().unwrap().keys().map(String::as_str).collect()
    }

    /// Arm `v`'s run of block 1, failed with `exit 1` on host `n1` after 1.5 s.
    fn failed_run() -> RunResult {
        RunResult {
            id: "b001-v".into(),
            arm: "v".into(),
            block: 1,
            replicate: 1,
            status: RunStatus::Failed {
                reason: "exit 1".into(),
            },
            epochs: Default::default(),
            epoch_labels: Vec::new(),
            guardrails: Default::default(),
            system_value: None,
            resources: None,
            tasks: Vec::new(),
            core_use: None,
            nodes: Vec::new(),
            host: Some("n1".into()),
            elapsed_s: Some(1.5),
            interval: None,
            conditions: None,
            trace_categories: None,
            stderr_tail: None,
            evidence: None,
            labels_differ: false,
        }
    }

    /// The typed provenance keeps the keys an execution's report has always had (reports
    /// stored by older optgates and users' scripts read them), and says what it records.
    /// Catches a renamed or dropped field, and a correctness or not-applicable value lost.
    #[test]
    fn an_executions_provenance_has_the_reports_keys() {
        let yaml = "name: t\napp: { command: [app] }\nmetric: { pattern: 'epoch (?P<epoch>\\d+) took (?P<seconds>[0-9.]+) s' }\n\
                    replicates: 5\nvariants:\n  - { name: v, dimension: l2_threading_model, env: { X: '1' } }\n";
        let exp = optgate_experiment::load_str(yaml, std::path::Path::new("/tmp/t.yaml"))
            .unwrap()
            .experiment;
        let plan = Plan::for_experiment(&exp);
        let collected = Collected {
            runs: vec![failed_run()],
            correctness: None,
        };
        let na = BTreeMap::from([("v".to_string(), "no avx512".to_string())]);
        let probe = optgate_probe::probe_live();
        let layout = Layout::new("/nonexistent/root");
        let p = execution_provenance(&exp, &plan, &layout, &collected, &na, &probe);
        let v = serde_json::to_value(&p).unwrap();
        let mut top = keys(&v);
        top.sort();
        assert_eq!(
            top,
            [
                "arms",
                "correctness",
                "design",
                "experiment_file",
                "experiment_sha256",
                "failed_runs",
                "node",
                "optgate_version",
                "recorded_order",
                "run_root",
                "runs",
                "scheduler",
                "seed"
            ]
        );
        let mut node = keys(&v["node"]);
        node.sort();
        assert_eq!(
            node,
            [
                "cpu_model",
                "governors",
                "hardware_threads",
                "hostname",
                "isa",
                "kernel",
                "numa_nodes",
                "physical_cores"
            ]
        );
        let arm = &v["arms"][1];
        assert_eq!(arm["name"], "v");
        assert_eq!(arm["not_applicable"], "no avx512");
        assert_eq!(arm["env"]["X"], "1");
        assert_eq!(arm["command"], "app");
        assert!(arm["build"].is_null());
        assert!(
            v["correctness"]
                .as_str()
                .unwrap()
                .starts_with("not checked")
        );
        let r = &v["runs"][0];
        assert_eq!(r["status"]["state"], "failed");
        assert_eq!(r["host"], "n1");
        assert_eq!(r["elapsed_s"], 1.5);
        assert!(r["started_at"].is_null() && r["governor_changes"].is_null());
        assert_eq!(v["failed_runs"], 1);
        assert_eq!(v["run_root"], "/nonexistent/root");
    }
}
