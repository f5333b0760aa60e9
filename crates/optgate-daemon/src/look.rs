//! A look, as data in and decision out: the complete blocks collected and analysed under
//! the experiment's rule, the report with its provenance, and what follows (more blocks, or
//! the end). Reads run directories; writes nothing (the engine writes what it returns).

use std::collections::{BTreeMap, BTreeSet};

use optgate_probe::Probe;
use optgate_store::{AfterLook, BlockRow, ExperimentState, JobRow, LookRow};
use optgate_wrapper::manifest::RunManifest;

use crate::work::Work;
use optgate_policy::decide::{Next, next_after_look, next_after_staged_look};
use optgate_policy::staged::VariantDecision;

/// A look taken: its record, its report, what follows, and the files to write into the
/// run root before it is recorded.
pub(crate) struct Look {
    pub row: LookRow,
    pub report_json: String,
    pub after: AfterLook,
    pub files: Vec<(std::path::PathBuf, Vec<u8>)>,
}

/// Why a look could not be taken (the experiment's own error: counted, and after
/// `MAX_EXPERIMENT_ERRORS` in a row the experiment ends `failed` with it).
#[derive(Debug, thiserror::Error)]
pub enum LookError {
    #[error("{blocks} blocks is not a planned look")]
    NotALook { blocks: u32 },
    #[error("analysis failed: {0}")]
    Analysis(#[source] optgate_stats::StatsError),
    /// Runs recorded completed whose manifests no longer say so (a stale writer replaced
    /// them): the look is not taken; the engine sends them back to pending.
    #[error(
        "run(s) {} were recorded completed but their manifests no longer say so",
        runs.join(", ")
    )]
    RecordedRunChanged { runs: Vec<String> },
}

/// The compute nodes' probes (`probe.json` in each job's directory, written as the job's
/// first step) checked against the experiment, and the governor each governor variant's
/// runs recorded inside their steps (`step_governors` of their manifests) against the one
/// it asked for. Local jobs ran on this machine, which the experiment was already checked
/// against when it was submitted.
pub(crate) fn compute_node_facts(
    work: &Work,
    jobs: &[JobRow],
) -> (
    BTreeMap<String, String>,
    Vec<optgate_evidence::preflight::Finding>,
) {
    let mut na = BTreeMap::new();
    let mut findings: Vec<optgate_evidence::preflight::Finding> = Vec::new();
    if work.exp.kind == optgate_experiment::SchedulerKind::Local {
        return (na, findings);
    }
    for job in jobs {
        let path = work.layout.job_dir(&job.name).join("probe.json");
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let Ok(probe) = serde_json::from_str::<Probe>(&text) else {
            tracing::warn!(
                "{}: not a probe; compute-node checks skipped for this job",
                path.display()
            );
            continue;
        };
        let (job_na, job_findings) =
            optgate_evidence::preflight::compute_node_checks(&work.exp, &probe);
        for (arm, reason) in job_na {
            na.entry(arm).or_insert(reason);
        }
        for f in job_findings {
            if !findings.contains(&f) {
                findings.push(f);
            }
        }
    }
    let governed: BTreeSet<&str> = work
        .exp
        .arms
        .iter()
        .filter(|a| a.governor.is_some())
        .map(|a| a.name.as_str())
        .collect();
    let manifests: Vec<RunManifest> = jobs
        .iter()
        .flat_map(|j| &j.run_ids)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .filter(|r| governed.iter().any(|a| r.ends_with(&format!("-{a}"))))
        .filter_map(|r| RunManifest::read(&work.layout.run_dir(r)).ok().flatten())
        .filter(|m| governed.contains(m.arm.as_str()))
        .collect();
    let steps = optgate_evidence::preflight::step_governor_not_applicable(
        &work.exp,
        manifests.iter().map(|m| (m.arm.as_str(), m)),
    );
    for (arm, reason) in steps {
        na.entry(arm).or_insert(reason);
    }
    (na, findings)
}

/// What a look analyses.
pub(crate) struct LookAt<'a> {
    plan: &'a optgate_experiment::Plan,
    collected: &'a optgate_evidence::Collected,
    not_applicable: &'a BTreeMap<String, String>,
    node: &'a Probe,
    look: u32,
    blocks: u32,
}

/// The report of a look under the experiment's rule: §13's over every variant, or the
/// staged rule's over the open ones with the decided ones kept (and its verdicts).
pub(crate) fn look_report(
    work: &Work,
    at: &LookAt,
    closed: &BTreeMap<String, VariantDecision>,
) -> Result<(optgate_report::Report, Option<optgate_stats::StagedLook>), LookError> {
    let mut staged_look = None;
    let source = optgate_evidence::report::Source::Execution(optgate_evidence::report::Execution {
        exp: &work.exp,
        plan: at.plan,
        layout: &work.layout,
        collected: at.collected,
        not_applicable: at.not_applicable,
        node: at.node,
    });
    let report = match &work.staged {
        None => optgate_evidence::report::build_report(
            &source,
            work.sequential.as_ref().map(|p| (p, at.look)),
        ),
        Some(sp) => optgate_evidence::report::build_report_with(&source, |base, others, cfg| {
            let (analysis, l) =
                optgate_policy::staged::analyse(base, others, cfg, sp, closed, at.blocks)?;
            staged_look = Some(l);
            Ok(analysis)
        }),
    }
    .map_err(LookError::Analysis)?;
    Ok((report, staged_look))
}

/// The look at the complete blocks: collect, analyse at this look's level, decide what
/// follows. Reads the run directories; returns the files to write into the run root
/// (`samples.csv`, `report.json`, and `plan.json` when blocks are added) with the look.
pub(crate) fn take_look(
    work: &Work,
    blocks: &[BlockRow],
    not_applicable: &BTreeMap<String, String>,
    looks: &[LookRow],
    jobs: &[JobRow],
    node: &Probe,
    recorded_completed: &BTreeSet<String>,
) -> Result<Look, LookError> {
    let mut plan = work.plan(blocks);
    let n_blocks = blocks.len() as u32;
    let look = work
        .look_at(n_blocks)
        .ok_or(LookError::NotALook { blocks: n_blocks })?;
    let (merged, node_findings) = with_compute_node_facts(work, jobs, not_applicable);
    let not_applicable = &merged;
    let collected = optgate_evidence::collect(&work.exp, &plan, &work.layout, not_applicable);
    let changed = optgate_evidence::collect::changed_since_recorded(&collected, recorded_completed);
    if !changed.is_empty() {
        return Err(LookError::RecordedRunChanged { runs: changed });
    }
    let closed = closed_at_earlier_looks(looks);
    let at = LookAt {
        plan: &plan,
        collected: &collected,
        not_applicable,
        node,
        look,
        blocks: n_blocks,
    };
    let (mut report, staged_look) = look_report(work, &at, &closed)?;
    let (next, keep) = next_after(
        work,
        &report,
        &collected,
        not_applicable,
        &closed,
        &staged_look,
        n_blocks,
    );
    let decisions = decisions_of(&report, staged_look.as_ref(), &closed, n_blocks);
    let nominal_alpha = report.analysis.alpha;
    add_provenance(
        &mut report,
        work,
        looks,
        (look, n_blocks, &decisions),
        jobs,
        &node_findings,
    );
    let report_json = optgate_report::render_json(&report);
    let mut files = vec![
        (
            work.layout.samples(),
            optgate_evidence::analysis::samples_csv(&collected).into_bytes(),
        ),
        (work.layout.report_json(), report_json.clone().into_bytes()),
    ];
    let (after, plan_json) = after_look(next, &mut plan, n_blocks, keep.as_ref(), not_applicable);
    if let Some(json) = plan_json {
        files.push((work.layout.plan(), json));
    }
    Ok(Look {
        row: LookRow {
            look,
            blocks: n_blocks,
            nominal_alpha,
            decisions: serde_json::to_string(&decisions).expect("serialises"),
            created_at: String::new(),
        },
        report_json,
        after,
        files,
    })
}

/// `not_applicable` with what the compute nodes lack added, and the nodes' findings.
/// Each job probed its compute node first: what that node lacks is not applicable, and
/// over-subscription is checked against its real cores.
fn with_compute_node_facts(
    work: &Work,
    jobs: &[JobRow],
    not_applicable: &BTreeMap<String, String>,
) -> (
    BTreeMap<String, String>,
    Vec<optgate_evidence::preflight::Finding>,
) {
    let (node_na, node_findings) = compute_node_facts(work, jobs);
    let mut merged = not_applicable.clone();
    for (arm, reason) in node_na {
        merged.entry(arm).or_insert(reason);
    }
    (merged, node_findings)
}

/// The staged rule: variants decided at earlier looks are out of the block plan.
fn closed_at_earlier_looks(looks: &[LookRow]) -> BTreeMap<String, VariantDecision> {
    optgate_policy::staged::closed_variants(
        looks.iter().map(|l| {
            serde_json::from_str::<Vec<VariantDecision>>(&l.decisions).unwrap_or_default()
        }),
    )
}

/// The consequence of `next` to record with the look, and the plan file's new text when
/// blocks are added.
fn after_look(
    next: Next,
    plan: &mut optgate_experiment::Plan,
    n_blocks: u32,
    keep: Option<&Vec<String>>,
    not_applicable: &BTreeMap<String, String>,
) -> (AfterLook, Option<Vec<u8>>) {
    let finish = |state, reason| (AfterLook::Finish { state, reason }, None);
    match next {
        Next::Decided => finish(ExperimentState::Decided, None),
        Next::BudgetExhausted => finish(
            ExperimentState::BudgetExhausted,
            Some(format!(
                "still inconclusive after {n_blocks} blocks, the most max_replicates allows"
            )),
        ),
        Next::Failed(reason) => finish(ExperimentState::Failed, Some(reason)),
        Next::Extend(n) => {
            let (after, json) = extend(plan, n, keep, not_applicable);
            (after, Some(json))
        }
    }
}

/// What follows the look under the experiment's rule, and (staged rule) the variants that
/// stay in the block plan.
fn next_after(
    work: &Work,
    report: &optgate_report::Report,
    collected: &optgate_evidence::Collected,
    not_applicable: &BTreeMap<String, String>,
    closed: &BTreeMap<String, VariantDecision>,
    staged_look: &Option<optgate_stats::StagedLook>,
    n_blocks: u32,
) -> (Next, Option<Vec<String>>) {
    // A baseline run that fails its own correctness checks is an error of the experiment:
    // fail fast stops it after that block, and a look that finds one ends it too.
    if let Some(why) = optgate_evidence::collect::baseline_error(&work.exp, &collected.runs) {
        return (Next::Failed(why), None);
    }
    let counts: Vec<(String, usize)> = work
        .exp
        .arms
        .iter()
        .filter(|a| !not_applicable.contains_key(&a.name))
        .map(|a| (a.name.clone(), collected.complete_runs(&a.name).count()))
        .collect();
    match (&work.staged, staged_look) {
        (Some(sp), Some(l)) => {
            // A variant that left earlier (even one decided `failed`) is not analysed now.
            let open: Vec<(String, usize)> = counts
                .iter()
                .filter(|(a, _)| !closed.contains_key(a))
                .cloned()
                .collect();
            optgate_policy::staged::next(next_after_staged_look(l, n_blocks, sp, &open))
        }
        _ => (
            next_after_look(&report.analysis, n_blocks, &work.schedule, &counts),
            None,
        ),
    }
}

/// Each variant's decision at this look (the staged rule's keep earlier looks' verdicts).
fn decisions_of(
    report: &optgate_report::Report,
    staged_look: Option<&optgate_stats::StagedLook>,
    closed: &BTreeMap<String, VariantDecision>,
    n_blocks: u32,
) -> Vec<VariantDecision> {
    match staged_look {
        Some(l) => {
            let order: Vec<&str> = report
                .analysis
                .variants
                .iter()
                .map(|v| v.name.as_str())
                .collect();
            optgate_policy::staged::decisions(l, closed, n_blocks, &order)
        }
        None => report
            .analysis
            .variants
            .iter()
            .map(|v| VariantDecision {
                variant: v.name.clone(),
                decision: v.decision,
                reason: v.reason.clone(),
                stop: None,
                blocks: None,
                retired: false,
            })
            .collect(),
    }
}

/// The provenance of the decision: the experiment id, the looks taken so far (this one,
/// `(look, blocks, decisions)`, included) under the rule, the jobs, and what the compute
/// nodes' probes found.
fn add_provenance(
    report: &mut optgate_report::Report,
    work: &Work,
    looks: &[LookRow],
    this: (u32, u32, &[VariantDecision]),
    jobs: &[JobRow],
    node_findings: &[optgate_evidence::preflight::Finding],
) {
    use optgate_report::{DecisionProvenance, JobProvenance, LookProvenance, SequentialProvenance};
    let (look, n_blocks, decisions) = this;
    let mut taken: Vec<LookProvenance> = looks
        .iter()
        .map(|l| LookProvenance {
            look: l.look,
            blocks: l.blocks,
            nominal_alpha: l.nominal_alpha,
            decisions: serde_json::from_str(&l.decisions).unwrap_or_default(),
        })
        .collect();
    taken.push(LookProvenance {
        look,
        blocks: n_blocks,
        nominal_alpha: report.analysis.alpha,
        decisions: serde_json::to_value(decisions).unwrap_or_default(),
    });
    let rule = match (&work.staged, &work.sequential) {
        (Some(sp), _) => format!(
            "staged (per-variant stopping, futility β = {}): {}",
            sp.futility.alpha, sp.efficacy.rule
        ),
        (None, Some(s)) => s.rule.clone(),
        (None, None) => {
            "a single look at the experiment's alpha (max_replicates not above replicates)"
                .to_string()
        }
    };
    report.set_decision_provenance(&DecisionProvenance {
        experiment_id: work.id.clone(),
        sequential: SequentialProvenance {
            rule,
            overall_alpha: work.exp.alpha,
            first_look_blocks: work.schedule.first,
            max_blocks: work.schedule.max,
            planned_looks: work.schedule.planned_looks(),
            looks: taken,
        },
        jobs: jobs
            .iter()
            .map(|j| JobProvenance {
                name: j.name.clone(),
                block: j.block,
                attempt: j.attempt,
                scheduler_job_id: j.scheduler_job_id.clone(),
                state: j.state.as_str().to_string(),
            })
            .collect(),
        compute_node_findings: node_findings
            .iter()
            .map(|f| serde_json::to_value(f).unwrap_or_default())
            .collect(),
    });
}

/// `n` more blocks (under the staged rule only with the variants in `keep`), their runs
/// for the arms applicable here, and the plan file's new text.
fn extend(
    plan: &mut optgate_experiment::Plan,
    n: u32,
    keep: Option<&Vec<String>>,
    not_applicable: &BTreeMap<String, String>,
) -> (AfterLook, Vec<u8>) {
    let had = plan.blocks.len();
    plan.extend(n);
    if let Some(open) = keep {
        optgate_policy::staged::keep_only(plan, had as u32, open);
    }
    let (blocks, runs) =
        crate::work::plan_rows(plan, had as u32, |arm| not_applicable.contains_key(arm));
    let json = serde_json::to_vec_pretty(plan).expect("plan serialises");
    (AfterLook::Extend { blocks, runs }, json)
}
