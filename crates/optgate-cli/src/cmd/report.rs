//! The report of an execution, built by `optgate_runner::report` (shared with the daemon)
//! and rendered by `optgate-report`.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};

use optgate_experiment::{Experiment, Plan};
use optgate_report::Report;
use optgate_runner::{Collected, Layout};

use crate::cli::Format;

pub fn build_run_report(
    exp: &Experiment,
    plan: &Plan,
    layout: &Layout,
    collected: &Collected,
    not_applicable: &BTreeMap<String, String>,
) -> Result<Report> {
    let mut report = optgate_runner::report::build_report(
        exp,
        plan,
        layout,
        collected,
        not_applicable,
        None,
        &super::probe::node_probe(),
    )
    .context("analysis failed")?;
    add_single_look_provenance(&mut report, exp, plan, layout);
    Ok(report)
}

/// The provenance fields the daemon records with every look, filled in for `optgate run`'s
/// one look, so that a report has the same fields whichever way it was made: the
/// execution's id (its directory's name), the look plan (one look, nothing added) and the
/// scheduler jobs (none: the runs ran in this process).
fn add_single_look_provenance(report: &mut Report, exp: &Experiment, plan: &Plan, layout: &Layout) {
    let blocks = plan.blocks.len();
    let decisions: Vec<serde_json::Value> = report
        .analysis
        .variants
        .iter()
        .map(|v| serde_json::json!({"variant": v.name, "decision": v.decision, "reason": v.reason}))
        .collect();
    let alpha = exp.file.compare.alpha;
    if let Some(serde_json::Value::Object(p)) = report.provenance.as_mut() {
        let id = layout
            .root
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        p.insert("experiment_id".into(), id.into());
        p.insert(
            "sequential".into(),
            serde_json::json!({
                "rule": "a single look at the experiment's alpha (optgate run adds no blocks)",
                "overall_alpha": alpha,
                "first_look_blocks": blocks,
                "max_blocks": blocks,
                "planned_looks": 1,
                "looks": [{"look": 1, "blocks": blocks, "nominal_alpha": alpha, "decisions": decisions}],
            }),
        );
        p.insert("jobs".into(), serde_json::json!([]));
    }
}

pub fn render(report: &Report, format: Format) -> Result<String> {
    Ok(match format {
        Format::Json => optgate_report::render_json(report),
        Format::Table => optgate_report::render_table_width(report, super::term::table_width()),
        Format::Markdown => optgate_report::render_markdown(report),
        Format::Csv => optgate_report::render_csv(report),
    })
}

pub fn plots(report: &Report, dir: &Path) -> Result<()> {
    let files = optgate_report::write_plots(report, dir)
        .with_context(|| format!("cannot write plots into {}", dir.display()))?;
    eprintln!(
        "optgate: wrote {} plot(s) to {}",
        files.len(),
        dir.display()
    );
    Ok(())
}

/// `optgate report ID`: the latest report of a daemon experiment (stored with its latest
/// look), rendered like `optgate run`'s.
pub fn report_experiment(id: &str, format: Format, plot: Option<&Path>) -> Result<i32> {
    use optgate_daemon::protocol::{ReportRequest, Request, Response};
    let paths = super::daemon::state_paths()?;
    let request = Request::Report(ReportRequest { id: id.to_string() });
    let (reply, source) = optgate_daemon::client::call_or_read(&paths, &request)
        .map_err(super::daemon::client_error)?;
    super::status::say_if_offline(source);
    let reply = match reply {
        Response::Report(r) => r,
        other => anyhow::bail!("the daemon answered {other:?} to a report request"),
    };
    let report: Report = serde_json::from_value(reply.report).with_context(|| {
        format!("the daemon's report of {id} is not a report this optgate reads")
    })?;
    if let Some(dir) = plot {
        plots(&report, dir)?;
    }
    print!("{}", render(&report, format)?);
    if !reply.state.is_terminal() {
        eprintln!(
            "optgate: experiment {id} is still {}; this is the report of its latest look",
            reply.state
        );
    }
    Ok(crate::exit::OK)
}
