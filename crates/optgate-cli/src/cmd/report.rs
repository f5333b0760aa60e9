//! Rendering a report (built by the engine's look, `optgate_evidence::report`) in the format
//! asked for, and its plots.

use std::path::Path;

use anyhow::{Context, Result};

use optgate_report::Report;
use optgate_report::campaign::CampaignReport;

use crate::choices::Format;

pub fn render(report: &Report, format: Format) -> Result<String> {
    Ok(match format {
        Format::Json => optgate_report::render_json(report),
        Format::Table => optgate_report::render_table_width(report, super::term::table_width()),
        Format::Markdown => optgate_report::render_markdown(report),
        Format::Csv => optgate_report::render_csv(report),
        Format::Html => {
            optgate_report::render_html(report).context("cannot draw the HTML report's plots")?
        }
        Format::Junit => optgate_report::render_junit(report),
    })
}

/// A campaign's report in the format asked for (the same formats as an experiment's).
pub fn render_campaign(report: &CampaignReport, format: Format) -> String {
    use optgate_report::campaign_formats as c;
    match format {
        Format::Json => optgate_report::campaign::render_json(report),
        Format::Table => c::render_table_width(report, super::term::table_width()),
        Format::Markdown => c::render_markdown(report),
        Format::Csv => c::render_csv(report),
        Format::Html => c::render_html(report),
        Format::Junit => c::render_junit(report),
    }
}

pub fn plots(report: &Report, dir: &Path) -> Result<()> {
    let files = optgate_report::write_plots(report, dir)
        .with_context(|| format!("cannot write plots into {}", dir.display()))?;
    errln!(
        "optgate: wrote {} plot(s) to {}",
        files.len(),
        dir.display()
    );
    Ok(())
}

/// `optgate report ID`: the latest report of a daemon experiment (stored with its latest
/// look), rendered like `optgate run`'s.
pub fn report_experiment(id: &str, format: Format, plot: Option<&Path>) -> Result<i32> {
    use optgate_client::protocol::{ReportRequest, Request, Response};
    let paths = super::daemon_client::state_paths()?;
    let request = Request::Report(ReportRequest { id: id.to_string() });
    let (reply, source) = optgate_client::client::call_or_read(&paths, &request)
        .map_err(super::daemon_client::client_error)?;
    super::status::say_if_offline(source);
    let reply = match reply {
        Response::Report(r) => r,
        Response::CampaignReport(r) => {
            out!("{}", render_campaign(&r.report, format));
            if r.state == optgate_store::CampaignState::Running {
                errln!("optgate: campaign {id} is still running; this is its report so far");
            }
            return Ok(crate::exit::OK);
        }
        other => anyhow::bail!("the daemon answered {other:?} to a report request"),
    };
    let report: Report = serde_json::from_value(reply.report).with_context(|| {
        format!("the daemon's report of {id} is not a report this optgate reads")
    })?;
    if let Some(dir) = plot {
        plots(&report, dir)?;
    }
    out!("{}", render(&report, format)?);
    if !reply.state.is_terminal() {
        errln!(
            "optgate: experiment {id} is still {}; this is the report of its latest look",
            reply.state
        );
    }
    Ok(crate::exit::OK)
}
