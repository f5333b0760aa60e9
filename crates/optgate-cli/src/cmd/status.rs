//! `optgate status [ID] [--watch] [--json]`: where every experiment (or one) stands. The
//! JSON is the daemon's `StatusReply`, a documented, stable interface. `--watch` redraws
//! until the experiments shown have ended (JSON: one object per line per refresh).

use std::io::{IsTerminal, Write};
use std::time::Duration;

use anyhow::Result;

use optgate_daemon::client;
use optgate_daemon::protocol::{
    ExperimentStatus, JobRecordState, Request, Response, StatusReply, StatusRequest,
};

use super::daemon::{client_error, state_paths};
use crate::exit;

const WATCH_INTERVAL: Duration = Duration::from_secs(1);

/// One status request.
pub fn fetch(id: Option<&str>) -> Result<StatusReply> {
    let paths = state_paths()?;
    let request = Request::Status(StatusRequest {
        id: id.map(str::to_string),
    });
    let (reply, source) = client::call_or_read(&paths, &request).map_err(client_error)?;
    say_if_offline(source);
    match reply {
        Response::Status(s) => Ok(s),
        other => Err(anyhow::anyhow!(
            "the daemon answered {other:?} to a status request"
        )),
    }
}

/// One line on stderr when the answer comes from a stopped daemon's database.
pub fn say_if_offline(source: client::Source) {
    if source == client::Source::Database {
        eprintln!(
            "optgate: the daemon is not running; this is its database as it left it \
             (start it with `optgate daemon` to go on)"
        );
    }
}

pub fn status(id: Option<&str>, watch: bool, json: bool) -> Result<i32> {
    let tty = std::io::stdout().is_terminal();
    let mut last = String::new();
    loop {
        let reply = fetch(id)?;
        let text = if json {
            if watch {
                serde_json::to_string(&reply)? + "\n"
            } else {
                serde_json::to_string_pretty(&reply)? + "\n"
            }
        } else {
            render(&reply, id.is_some())
        };
        let mut out = std::io::stdout().lock();
        if !watch {
            out.write_all(text.as_bytes())?;
            return Ok(exit::OK);
        }
        if text != last {
            if tty && !json {
                // Redraw in place: clear the screen, cursor home.
                out.write_all(b"\x1b[2J\x1b[H")?;
            }
            out.write_all(text.as_bytes())?;
            out.flush()?;
            last = text;
        }
        drop(out);
        // pid 0: the answer came from a stopped daemon's database; nothing will change it.
        let campaigns_ended = reply
            .campaigns
            .iter()
            .all(|c| c.state != optgate_store::CampaignState::Running);
        if reply.daemon.pid == 0
            || (campaigns_ended && reply.experiments.iter().all(|e| e.state.is_terminal()))
        {
            return Ok(exit::OK);
        }
        std::thread::sleep(WATCH_INTERVAL);
    }
}

/// `completed/total`, then what else happened to the rest: a cancelled experiment reads
/// "7/48 (41 cancelled)", not "48/48" (failed and cancelled runs are done, not measured).
fn runs_text(e: &ExperimentStatus) -> String {
    let r = &e.runs;
    let mut s = format!("{}/{}", r.completed, r.total);
    let others: Vec<String> = [
        (r.failed, "failed"),
        (r.cancelled, "cancelled"),
        (r.queued, "queued"),
    ]
    .iter()
    .filter(|(n, _)| *n > 0)
    .map(|(n, what)| format!("{n} {what}"))
    .collect();
    if !others.is_empty() {
        s.push_str(&format!(" ({})", others.join(", ")));
    }
    s
}

fn decisions_text(e: &ExperimentStatus) -> String {
    if e.decisions.is_empty() {
        return "-".to_string();
    }
    e.decisions
        .iter()
        .map(|d| format!("{}: {}", d.variant, d.decision))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The table `optgate status` prints (and the details of one experiment).
pub fn render(reply: &StatusReply, detailed: bool) -> String {
    let mut campaigns = String::new();
    for c in &reply.campaigns {
        campaigns.push_str(&format!(
            "campaign {} `{}`: {} — {}{}\n",
            c.id,
            c.name,
            c.state,
            c.current.as_deref().unwrap_or("no step yet"),
            c.reason
                .as_deref()
                .map(|r| format!(" ({r})"))
                .unwrap_or_default()
        ));
    }
    if !campaigns.is_empty() {
        campaigns.push('\n');
    }
    campaigns + &render_experiments(reply, detailed)
}

fn render_experiments(reply: &StatusReply, detailed: bool) -> String {
    if reply.experiments.is_empty() && reply.damaged.is_empty() {
        return "no experiments; submit one with `optgate submit EXP.yaml`\n".to_string();
    }
    let dash = || "-".to_string();
    let rows: Vec<[String; 6]> = reply
        .experiments
        .iter()
        .map(|e| {
            [
                e.id.clone(),
                e.name.clone(),
                e.state.to_string(),
                runs_text(e),
                format!("{}/{}", e.looks, e.planned_looks),
                decisions_text(e),
            ]
        })
        // A row the database cannot read is shown as damaged; why follows the table.
        .chain(reply.damaged.iter().map(|d| {
            [
                d.id.clone(),
                d.name.clone(),
                "damaged".to_string(),
                dash(),
                dash(),
                dash(),
            ]
        }))
        .collect();
    let header = ["ID", "NAME", "STATE", "RUNS", "LOOKS", "DECISIONS"];
    let mut widths = header.map(str::len);
    for r in &rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: &[String]| -> String {
        let mut s = String::new();
        for (i, (c, w)) in cells.iter().zip(widths).enumerate() {
            if i + 1 == cells.len() {
                s.push_str(c);
            } else {
                s.push_str(&format!("{c:<w$}  "));
            }
        }
        s.trim_end().to_string() + "\n"
    };
    let mut out = line(&header.map(String::from));
    for r in &rows {
        out.push_str(&line(r));
    }
    for d in &reply.damaged {
        out.push_str(&format!("damaged: {}: {}\n", d.id, d.problem));
    }
    if detailed {
        out.push_str(&details(reply));
    }
    out
}

/// What `optgate status ID` shows below the table: the reason, the files, the blocks, the
/// decisions and the jobs of each experiment.
fn details(reply: &StatusReply) -> String {
    let mut out = String::new();
    for e in &reply.experiments {
        out.push('\n');
        if let Some(r) = &e.reason {
            out.push_str(&format!("reason:  {r}\n"));
        }
        out.push_str(&format!("file:    {}\n", e.experiment_file));
        out.push_str(&format!("runs in: {}\n", e.root));
        out.push_str(&format!(
            "blocks:  {} of at most {} ({} queued, {} pending runs)\n",
            e.blocks, e.max_blocks, e.runs.queued, e.runs.pending
        ));
        for d in &e.decisions {
            out.push_str(&format!("  {}: {} — {}\n", d.variant, d.decision, d.reason));
        }
        if let Some(jobs) = &e.jobs {
            for j in jobs {
                out.push_str(&format!(
                    "  job {} (block {}, attempt {}): {}{}{}{}\n",
                    j.name,
                    j.block,
                    j.attempt,
                    j.state,
                    // A submitted job says what the scheduler says of it.
                    match (&j.scheduler_state, j.state) {
                        (Some(s), JobRecordState::Submitted) => format!(" ({s})"),
                        _ => String::new(),
                    },
                    j.scheduler_job_id
                        .as_ref()
                        .map(|i| format!(", id {i}"))
                        .unwrap_or_default(),
                    j.detail
                        .as_ref()
                        .map(|d| format!(" — {d}"))
                        .unwrap_or_default()
                ));
            }
        }
    }
    out
}
