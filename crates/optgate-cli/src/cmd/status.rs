//! `optgate status [ID] [--limit N | --all] [--watch] [--json]`: where the newest
//! experiments (or one) stand. The JSON is the daemon's `StatusReply`, a documented,
//! stable interface. `--watch` redraws until the experiments shown have ended (JSON: one
//! object per line per refresh).

use std::io::{IsTerminal, Write};
use std::time::Duration;

use anyhow::Result;

use optgate_daemon::client;
use optgate_daemon::protocol::{
    ExperimentStatus, JobRecordState, RecurrenceState, Request, Response, StatusReply,
    StatusRequest,
};

use super::daemon::{client_error, state_paths};
use crate::exit;

const WATCH_INTERVAL: Duration = Duration::from_secs(1);

/// How many experiments `optgate status` lists unless told (`--limit N`, `--all`): a
/// screenful, newest first, so the list costs the same with ten or ten thousand
/// experiments in the database; the rest are counted below the table.
pub const STATUS_PAGE: u32 = 50;

/// One status request (`limit`: the newest so many experiments, all with `None`).
pub fn fetch(id: Option<&str>, limit: Option<u32>) -> Result<StatusReply> {
    let paths = state_paths()?;
    let request = Request::Status(StatusRequest {
        id: id.map(str::to_string),
        limit,
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

pub fn status(id: Option<&str>, limit: Option<u32>, watch: bool, json: bool) -> Result<i32> {
    let tty = std::io::stdout().is_terminal();
    let mut last = String::new();
    loop {
        let reply = fetch(id, limit)?;
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
    if reply.experiments.is_empty()
        && reply.damaged.is_empty()
        && reply.run_executions.is_empty()
        && reply.recurrences.is_empty()
    {
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
        // `optgate run` executions, marked as such in their state.
        .chain(reply.run_executions.iter().map(run_row))
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
    if reply.more > 0 {
        out.push_str(&more_hint(reply.more));
    }
    out.push_str(&recurrences(reply));
    if detailed {
        out.push_str(&details(reply));
    }
    out
}

/// A row of the table for an `optgate run` execution: its state says `(optgate run)`.
fn run_row(e: &optgate_store::Execution) -> [String; 6] {
    let decisions = if e.variants.is_empty() {
        "-".to_string()
    } else {
        e.variants
            .iter()
            .map(|v| format!("{}: {}", v.variant, v.decision))
            .collect::<Vec<_>>()
            .join(", ")
    };
    [
        e.id.clone(),
        e.name.clone(),
        format!("{} (optgate run)", e.state),
        format!("{}/{}", e.runs_completed, e.runs_total),
        e.looks.to_string(),
        decisions,
    ]
}

/// The recurrences below the experiments: each with its interval, state, next due time,
/// executions and latest notify, then the reason it did not submit, if any.
fn recurrences(reply: &StatusReply) -> String {
    if reply.recurrences.is_empty() {
        return String::new();
    }
    let header = [
        "RECURRENCE",
        "NAME",
        "EVERY",
        "STATE",
        "NEXT DUE",
        "EXECUTIONS",
        "LAST NOTIFY",
    ];
    let rows: Vec<[String; 7]> = reply
        .recurrences
        .iter()
        .map(|r| {
            [
                r.id.clone(),
                r.name.clone(),
                r.every.clone(),
                r.state.to_string(),
                match r.state {
                    RecurrenceState::Active => r.next_due_at.clone(),
                    RecurrenceState::Cancelled => "-".to_string(),
                },
                r.executions.to_string(),
                r.last_notify.as_ref().map_or("-".to_string(), notify_text),
            ]
        })
        .collect();
    let mut widths = header.map(str::len);
    for r in &rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: &[String]| -> String {
        let cols: Vec<String> = cells
            .iter()
            .zip(widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        cols.join("  ").trim_end().to_string() + "\n"
    };
    let mut out = String::from("\n") + &line(&header.map(String::from));
    for (r, cells) in reply.recurrences.iter().zip(&rows) {
        out.push_str(&line(cells));
        if let Some(d) = &r.detail {
            out.push_str(&format!("  {}: {d}\n", r.id));
        }
    }
    out
}

/// A notify's end in one line: how it ended, for what, and its stderr's last line.
fn notify_text(n: &optgate_daemon::notify::NotifyOutcome) -> String {
    use optgate_daemon::notify::NotifyState;
    let how = match n.state {
        NotifyState::NoCommand => "flipped (no notify command)".to_string(),
        NotifyState::Started => "started (no end recorded yet)".to_string(),
        NotifyState::Exited => match (n.exit_code, n.signal) {
            (Some(c), _) => format!("exited {c}"),
            (None, Some(sig)) => format!("killed by signal {sig}"),
            _ => "exited".to_string(),
        },
        NotifyState::TimedOut => "timed out, killed".to_string(),
        NotifyState::NotStarted => format!(
            "could not start: {}",
            n.detail.as_deref().unwrap_or("unknown")
        ),
    };
    let stderr = n
        .stderr_tail
        .lines()
        .last()
        .map(|l| format!(" (stderr: {l})"))
        .unwrap_or_default();
    format!("{how}: {}{stderr}", n.reason)
}

/// The line below a page of the list that says how many older experiments it left out.
fn more_hint(more: u64) -> String {
    let them = if more == 1 {
        "experiment"
    } else {
        "experiments"
    };
    format!("… {more} more older {them}: `--all` shows every one, `--limit N` the newest N\n")
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
