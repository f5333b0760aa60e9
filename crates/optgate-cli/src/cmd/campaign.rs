//! `optgate run CAMPAIGN.yaml`: each stage's generated experiment executed in turn through
//! the same foreground engine as any experiment (`run::execute`, one root per stage under
//! the campaign's root), each stage's winner carried into the next stage's baseline, then
//! the confirmation; the campaign report is written beside them (`campaign-report.json`,
//! `campaign-report.md`) and shown. `--out` of an interrupted campaign resumes it: a
//! finished stage's root answers at once with its recorded end, so no stage runs twice.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use optgate_experiment::Experiment;
use optgate_experiment::campaign::{self, Campaign, Chain, NextStep};
use optgate_report::Report;
use optgate_report::campaign::CampaignReport;
use optgate_runner::Layout;

use crate::cli::Format;
use crate::exit;

/// The campaign at `path`, its warnings shown; an invalid one is the experiment loader's
/// invalid-input error.
pub fn load(path: &Path) -> Result<Campaign> {
    match campaign::load(path) {
        Ok(c) => {
            for w in &c.warnings {
                eprintln!("{w}");
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

/// Whether the file at `path` is a campaign (a `stages:` key); an unreadable file is not
/// (the experiment loader then says why).
pub fn is_campaign_file(path: &Path) -> bool {
    let limit = optgate_experiment::yaml::MAX_FILE_BYTES as u64;
    optgate_experiment::read::read_regular_text(path, limit)
        .is_ok_and(|t| campaign::is_campaign_text(&t))
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
    println!(
        "{}: valid: campaign `{}`, {} stage(s)",
        path.display(),
        c.name,
        c.stages.len()
    );
    if c.reordered {
        println!(
            "  stages reordered into the canonical order I/O → communication → memory → compute:"
        );
    }
    for (k, s) in c.stages.iter().enumerate() {
        let n = s
            .keys
            .get("variants")
            .and_then(|v| v.as_array())
            .map_or(0, Vec::len);
        println!(
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
    println!(
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
        eprintln!(
            "optgate: stages run in the canonical order: {}",
            order.join(" → ")
        );
    }
    let first = stage_experiment(&c, &c.stage_text(0, &Chain::default()))?;
    if first.kind != optgate_experiment::SchedulerKind::Local && !here {
        return Err(exit::with_code(
            exit::INVALID_INPUT,
            anyhow::anyhow!(
                "{} is a `scheduler: {}` campaign: submit it with `optgate submit`, or pass --here",
                path.display(),
                first.kind
            ),
        ));
    }
    let root = match out {
        Some(o) => std::path::absolute(&o).unwrap_or(o),
        None => first
            .workdir
            .join("optgate-runs")
            .join(&c.name)
            .join(chrono::Local::now().format("%Y%m%d-%H%M%S").to_string()),
    };
    let mut steps: Vec<(String, Report)> = Vec::new();
    loop {
        let lists: Vec<&[optgate_stats::VariantAnalysis]> = steps
            .iter()
            .take(c.stages.len())
            .map(|(_, r)| r.analysis.variants.as_slice())
            .collect();
        let replayed = campaign::replay(&c, &lists);
        if let Some(o) = replayed
            .outcomes
            .last()
            .filter(|_| steps.len() <= c.stages.len())
        {
            let k = steps.len() - 1;
            eprintln!(
                "optgate: stage {} ({}): {}",
                k + 1,
                c.stages[k].component,
                o.reason
            );
        }
        let text = match campaign::next_step(&c, &replayed, steps.len()) {
            NextStep::Stage(_, text) | NextStep::Confirmation(text) => text,
            NextStep::NoCombination(why) => {
                eprintln!("optgate: {why}");
                break;
            }
            NextStep::Finished => break,
        };
        let k = steps.len();
        let exp = stage_experiment(&c, &text)?;
        let step_root = root.join(campaign::step_dir(&c, k));
        match c.stages.get(k) {
            Some(s) => eprintln!(
                "optgate: campaign `{}` stage {}/{} ({}): baseline = {}",
                c.name,
                k + 1,
                c.stages.len(),
                s.component,
                replayed.chain.describe()
            ),
            None => eprintln!(
                "optgate: campaign `{}` confirmation: {} against the original baseline",
                c.name,
                replayed.chain.describe()
            ),
        }
        let Some(report) = execute(&exp, path, &step_root, quiet)? else {
            return Ok(exit::INTERRUPTED);
        };
        // Named by its folder under the campaign's root (the daemon names it by its id).
        steps.push((campaign::step_dir(&c, k), report));
    }
    let report = optgate_report::campaign::assemble(&c, &steps);
    write_and_show(&root, &report, format)
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
    let md = optgate_report::campaign::render_markdown(report);
    for (name, text) in [("campaign-report.json", &json), ("campaign-report.md", &md)] {
        let p = root.join(name);
        std::fs::write(&p, text).with_context(|| format!("cannot write {}", p.display()))?;
    }
    print!("{}", if format == Format::Json { json } else { md });
    eprintln!(
        "optgate: campaign report in {}",
        root.join("campaign-report.md").display()
    );
    Ok(exit::OK)
}
