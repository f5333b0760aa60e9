//! The recurrences part of `optgate status` (pure): each recurring re-check with its
//! interval, next due time, executions and how its last notify ended.

use optgate_client::protocol::{RecurrenceState, StatusReply};

/// The recurrences below the experiments: each with its interval, state, next due time,
/// executions and latest notify, then the reason it did not submit, if any.
pub(super) fn recurrences(reply: &StatusReply) -> String {
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
fn notify_text(n: &optgate_client::protocol::NotifyOutcome) -> String {
    use optgate_client::protocol::NotifyState;
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
