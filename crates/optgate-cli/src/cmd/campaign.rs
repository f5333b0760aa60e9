//! `optgate run CAMPAIGN.yaml`: each stage's generated experiment executed in turn through
//! the same foreground engine as any experiment (`run::execute`, one root per stage under
//! the campaign's root), each stage's winner carried into the next stage's baseline, then
//! the confirmation; the campaign report is written beside them (`campaign-report.json`,
//! `campaign-report.md`) and shown in the `--format` asked for. `--out` of an interrupted campaign resumes it: a
//! finished stage's root answers at once with its recorded end, so no stage runs twice.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use optgate_evidence::Layout;
use optgate_experiment::Experiment;
use optgate_experiment::campaign::{self, Campaign, CampaignNext, Chain};
use optgate_report::Report;
use optgate_report::campaign::CampaignReport;

use crate::choices::Format;
use crate::exit;

/// The campaign at `path`, its warnings shown; an invalid one is the experiment loader's
/// invalid-input error.
pub fn load(path: &Path) -> Result<Campaign> {
    match campaign::load(path) {
        Ok(c) => {
            for w in &c.warnings {
                errln!("{w}");
            }
            Ok(c)
        }
        Err(e) => Err(exit::with_code(exit::INVALID_INPUT, anyhow::Error::from(e))),
    }
}

/// One stage's experiment as the chain so far makes it.
fn stage_experiment(c: &Campaign, text: &str) -> Result<Experiment> {
    campaign::load_generated(text, &c.source)
        .map(|l| l.experiment)
        .map_err(|e| exit::with_code(exit::INVALID_INPUT, anyhow::Error::from(e)))
}

/// `optgate validate CAMPAIGN.yaml`: every problem at once (by the loader), then the stages
/// in the order they run, saying so when it differs from the file's.
pub fn validate(path: &Path, strict: bool) -> Result<i32> {
    let c = load(path)?;
    if strict && !c.warnings.is_empty() {
        return Err(exit::with_code(
            exit::INVALID_INPUT,
            anyhow::anyhow!("{} warning(s) and --strict was given", c.warnings.len()),
        ));
    }
    outln!(
        "{}: valid: campaign `{}`, {} stage(s)",
        path.display(),
        c.name,
        c.stages.len()
    );
    if c.reordered {
        outln!(
            "  stages reordered into the canonical order I/O → communication → memory → compute:"
        );
    }
    for (k, s) in c.stages.iter().enumerate() {
        let n = s
            .keys
            .get("variants")
            .and_then(|v| v.as_array())
            .map_or(0, Vec::len);
        outln!(
            "  {}. {} (stage {} in the file, experiment `{}`): {n} variant(s){}",
            k + 1,
            s.component,
            s.file_index + 1,
            c.stage_name(k),
            s.description
                .as_deref()
                .map(|d| format!(" — {d}"))
                .unwrap_or_default()
        );
    }
    outln!(
        "  then `{}`: every winner together against the original baseline",
        c.confirmation_name()
    );
    Ok(exit::OK)
}

pub fn run(
    path: &Path,
    out: Option<PathBuf>,
    format: Format,
    quiet: bool,
    here: bool,
) -> Result<i32> {
    let c = load(path)?;
    if c.reordered {
        let order: Vec<&str> = c.stages.iter().map(|s| s.component.as_str()).collect();
        errln!(
            "optgate: stages run in the canonical order: {}",
            order.join(" → ")
        );
    }
    let first = stage_experiment(&c, &c.stage_text(0, &Chain::default()))?;
    super::common::refuse_cluster_kind(path, first.kind, here)?;
    let root = super::common::run_root(out, &first.workdir, &c.name);
    let mut steps: Vec<(String, Report)> = Vec::new();
    loop {
        let lists: Vec<&[optgate_stats::VariantAnalysis]> = steps
            .iter()
            .map(|(_, r)| r.analysis.variants.as_slice())
            .collect();
        let (replayed, next) = campaign::advance(&c, &lists);
        say_stage_outcome(&c, &replayed, steps.len());
        let text = match next {
            CampaignNext::Stage(_, text) | CampaignNext::Confirmation(text) => text,
            CampaignNext::NoCombination(why) => {
                errln!("optgate: {why}");
                break;
            }
            CampaignNext::Finished => break,
        };
        let k = steps.len();
        let exp = stage_experiment(&c, &text)?;
        say_next_stage(&c, &replayed, k);
        let Some(report) = execute(&exp, path, &root.join(campaign::step_dir(&c, k)), quiet)?
        else {
            return Ok(exit::INTERRUPTED);
        };
        // Named by its folder under the campaign's root (the daemon names it by its id).
        steps.push((campaign::step_dir(&c, k), report));
    }
    let report = optgate_report::campaign::assemble(&c, &steps);
    write_and_show(&root, &report, format)
}

/// The outcome of the stage that just ended (the `done`-th step), once it is a stage.
fn say_stage_outcome(c: &Campaign, replayed: &campaign::Replay, done: usize) {
    if done == 0 || done > c.stages.len() {
        return;
    }
    if let Some(o) = replayed.outcomes.last() {
        let k = done - 1;
        errln!(
            "optgate: stage {} ({}): {}",
            k + 1,
            c.stages[k].component,
            o.reason
        );
    }
}

/// What step `k` is about to run: a stage with its baseline, or the confirmation.
fn say_next_stage(c: &Campaign, replayed: &campaign::Replay, k: usize) {
    match c.stages.get(k) {
        Some(s) => errln!(
            "optgate: campaign `{}` stage {}/{} ({}): baseline = {}",
            c.name,
            k + 1,
            c.stages.len(),
            s.component,
            replayed.chain.describe()
        ),
        None => errln!(
            "optgate: campaign `{}` confirmation: {} against the original baseline",
            c.name,
            replayed.chain.describe()
        ),
    }
}

/// Executes one stage (or the confirmation) and reads the report its last look wrote;
/// `None` when it was interrupted.
fn execute(exp: &Experiment, path: &Path, root: &Path, quiet: bool) -> Result<Option<Report>> {
    let (row, _failures) = match super::run::execute(exp, path, root, quiet)? {
        Ok(f) => f,
        Err(_) => return Ok(None),
    };
    let layout = Layout::new(root);
    let text = std::fs::read_to_string(layout.report_json()).map_err(|_| {
        let reason = row
            .state_reason
            .clone()
            .unwrap_or_else(|| row.state.to_string());
        exit::with_code(
            exit::FAILED,
            anyhow::anyhow!(
                "experiment `{}` ended without a report: {reason}",
                exp.name()
            ),
        )
    })?;
    let report = serde_json::from_str(&text)
        .with_context(|| format!("{} is not a report", layout.report_json().display()))?;
    Ok(Some(report))
}

fn write_and_show(root: &Path, report: &CampaignReport, format: Format) -> Result<i32> {
    let json = optgate_report::campaign::render_json(report);
    let md = optgate_report::campaign_formats::render_markdown(report);
    for (name, text) in [("campaign-report.json", &json), ("campaign-report.md", &md)] {
        let p = root.join(name);
        std::fs::write(&p, text).with_context(|| format!("cannot write {}", p.display()))?;
    }
    out!("{}", super::report::render_campaign(report, format));
    errln!(
        "optgate: campaign report in {}",
        root.join("campaign-report.md").display()
    );
    Ok(exit::OK)
}
