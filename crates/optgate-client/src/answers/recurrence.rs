//! A stored recurrence as the protocol shows it (`status`, and `submit`'s reply).

use crate::protocol::{RecurrenceStatus, recurrence_name};

/// A stored recurrence as `status` (and `submit`'s reply) shows it.
pub fn recurrence_status(r: &optgate_store::RecurrenceRow) -> RecurrenceStatus {
    let at = |t: i64| {
        chrono::DateTime::from_timestamp(t, 0)
            .map(|d| d.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
            .unwrap_or_else(|| t.to_string())
    };
    RecurrenceStatus {
        id: recurrence_name(r.id),
        name: r.name.clone(),
        every: optgate_experiment::format_interval(std::time::Duration::from_secs(r.interval_secs)),
        interval_secs: r.interval_secs,
        state: r.state,
        anchor_unix: r.anchor_at,
        next_due_at: at(r.next_due_at),
        next_due_unix: r.next_due_at,
        executions: r.executions,
        last_experiment_id: r.last_experiment_id.clone(),
        notify: r.notify.clone(),
        // Written by this daemon; one it cannot read is shown as absent, not an error.
        last_notify: r
            .last_notify
            .as_deref()
            .and_then(|j| serde_json::from_str(j).ok()),
        detail: r.detail.clone(),
    }
}
