//! The text `optgate status` prints (pure, over the daemon's `StatusReply`): the list of
//! experiments, campaigns, `optgate run` executions and recurrences, or one experiment with
//! its jobs and decisions.

use optgate_client::protocol::{ExperimentStatus, JobRecordState, StatusReply};

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
    out.push_str(&super::status_recurrences::recurrences(reply));
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
