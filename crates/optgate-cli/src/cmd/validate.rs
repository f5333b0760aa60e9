//! `optgate validate`: the experiment file's problems, all at once, with their places; then
//! the pre-flight checks against this node (over-subscription, tunability, capabilities).

use std::path::Path;

use anyhow::Result;

use optgate_evidence::preflight::{self, Finding, Level};
use optgate_experiment::yaml::Locator;
use optgate_experiment::{Diagnostic, Experiment, SchedulerKind, SequentialRule, Severity};

use crate::exit;

pub fn validate(path: &Path, strict: bool) -> Result<i32> {
    let loaded = super::common::load_experiment(path, super::common::ChecklistNote::Full)?;
    let exp = &loaded.experiment;
    refuse_unknown_directives(path, exp)?;
    let findings = preflight_findings(exp);
    for f in &findings {
        errln!("{}", show_finding(path, f));
    }
    let errors = findings.iter().filter(|f| f.level == Level::Error).count();
    if errors > 0 {
        return Err(exit::with_code(
            exit::INVALID_INPUT,
            anyhow::anyhow!("{errors} pre-flight error(s)"),
        ));
    }
    let warnings = loaded.warnings.len() + findings.len();
    if strict && warnings > 0 {
        return Err(exit::with_code(
            exit::INVALID_INPUT,
            anyhow::anyhow!("{warnings} warning(s) and --strict was given"),
        ));
    }
    let runs = (exp.arms.len() as u64).saturating_mul(u64::from(exp.replicates));
    outln!(
        "{}: valid: experiment `{}`, {} arms ({}), {} build(s), {} replicates per arm = {} runs ({}), scheduler {}",
        path.display(),
        exp.name(),
        exp.arms.len(),
        exp.arm_names().join(", "),
        exp.builds.len(),
        exp.replicates,
        runs,
        budget_summary(exp),
        exp.kind,
    );
    if exp.kind == SchedulerKind::Local {
        let probe = super::probe::node_probe();
        for (arm, reason) in preflight::not_applicable(exp, &probe, &optgate_probe::sysfs_root()) {
            outln!("  {arm}: will be not applicable here: {reason}");
        }
    } else {
        for (arm, reason) in preflight::cluster_not_applicable(exp) {
            outln!("  {arm}: will be not applicable when submitted: {reason}");
        }
        outln!(
            "  capabilities and over-subscription are checked again on the compute node (each job's probe.json)"
        );
    }
    Ok(exit::OK)
}

/// How the looks go: "5 blocks first, at most 30, staged rule", or one look when the
/// budget is `replicates`.
fn budget_summary(exp: &Experiment) -> String {
    let rule = match exp.sequential {
        SequentialRule::Staged => "staged rule",
        SequentialRule::ObrienFleming => "O'Brien–Fleming rule",
    };
    if exp.max_replicates > exp.replicates {
        format!(
            "{} blocks first, at most {}, {rule}",
            exp.replicates, exp.max_replicates
        )
    } else {
        format!("{} blocks, one look", exp.replicates)
    }
}

/// Every `scheduler.extra_directives` entry the backend's batch command would not accept
/// (`--constraint` under Flux, whose option is `--requires`), at its place in the file.
pub fn unknown_directives(path: &Path, exp: &Experiment) -> Vec<Diagnostic> {
    let kind = exp.kind;
    let locator = Locator::index(&exp.source_text);
    exp.allocation
        .extra_directives
        .iter()
        .enumerate()
        .filter_map(|(i, d)| {
            let at = format!("scheduler.extra_directives[{i}]");
            optgate_sched::batch::unknown_directive(kind, d).map(|message| {
                Diagnostic::new(
                    Severity::Error,
                    path.to_path_buf(),
                    locator.value(&at),
                    at,
                    // The option's name is quoted whole there: cut it to its prefix.
                    optgate_experiment::limits::shorten_quoted(&message),
                )
            })
        })
        .collect()
}

/// Prints [`unknown_directives`] and fails with exit 2 when there are any.
pub fn refuse_unknown_directives(path: &Path, exp: &Experiment) -> Result<()> {
    let found = unknown_directives(path, exp);
    const SHOWN: usize = optgate_experiment::limits::MAX_DIAGNOSTICS_SHOWN;
    for d in found.iter().take(SHOWN) {
        errln!("{d}");
    }
    if found.len() > SHOWN {
        errln!("… and {} more", found.len() - SHOWN);
    }
    if found.is_empty() {
        Ok(())
    } else {
        Err(exit::with_code(
            exit::INVALID_INPUT,
            anyhow::anyhow!(
                "{} error(s) in the experiment file: extra directives the {} scheduler does not know",
                found.len(),
                kind_name(exp)
            ),
        ))
    }
}

fn kind_name(exp: &Experiment) -> String {
    exp.kind.to_string()
}

/// Over-subscription findings; on the local scheduler against this machine's cores, on a
/// cluster against nothing yet (the compute node's probe checks again).
pub fn preflight_findings(exp: &Experiment) -> Vec<Finding> {
    let mut findings = preflight::required_paths(exp, std::env::var_os("PATH").as_deref());
    findings.extend(if exp.kind == SchedulerKind::Local {
        let probe = super::probe::node_probe();
        let node = probe
            .hostname
            .clone()
            .unwrap_or_else(|| "this machine".into());
        preflight::oversubscription(exp, Some(preflight::usable_cores(&probe)), &node)
    } else {
        preflight::oversubscription(exp, None, "the compute node")
    });
    findings
}

/// Prints every pre-flight finding of `exp` (read from `path`); any error refuses the
/// command (exit 2) with "pre-flight errors: nothing was `done`".
pub fn refuse_preflight_errors(path: &Path, exp: &Experiment, done: &str) -> Result<()> {
    let findings = preflight_findings(exp);
    for f in &findings {
        errln!("{}", show_finding(path, f));
    }
    if findings.iter().any(|f| f.level == Level::Error) {
        return Err(exit::with_code(
            exit::INVALID_INPUT,
            anyhow::anyhow!("pre-flight errors: nothing was {done}"),
        ));
    }
    Ok(())
}

pub fn show_finding(path: &Path, f: &Finding) -> String {
    let level = match f.level {
        Level::Error => "error",
        Level::Warning => "warning",
    };
    if f.arm.is_empty() {
        return format!("{}: {level}: pre-flight: {}", path.display(), f.message);
    }
    format!(
        "{}: {level}: pre-flight: arm `{}`: {}",
        path.display(),
        f.arm,
        f.message
    )
}
