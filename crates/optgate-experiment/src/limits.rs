//! The limits of an experiment file, beyond the YAML layer's own (size, depth, aliases):
//! each is a value a real experiment never comes near, refused at `optgate validate` with
//! the offending key's `file:line:column`, so that no later stage (plan, run, the daemon)
//! ever multiplies, allocates or waits by an unchecked number from the file.
//! `docs/LIMITS.md` lists every limit of optgate.

use std::time::Duration;

/// The longest `app.time_limit` and `scheduler.time_limit`: 30 days. No batch queue grants
/// more, and bounding it keeps every sum and product of time limits (an allocation sized
/// for a block's runs, a run's deadline from now) far from overflowing a `Duration`.
pub const MAX_TIME_LIMIT: Duration = Duration::from_secs(30 * 24 * 3600);

/// The shortest re-check interval (`recheck.every`, `optgate submit --every`): 1 second.
/// A recurrence never overlaps itself (the next execution is submitted only once the
/// latest has ended), so a short interval costs back-to-back executions, never a pile-up;
/// a second is the resolution of the daemon's due times. Tests use a few seconds.
pub const MIN_RECHECK_INTERVAL: Duration = Duration::from_secs(1);

/// The longest re-check interval: 366 days. Longer is a re-check nobody waits for; the
/// bound keeps every due time (seconds since 1970 plus multiples of it) far from overflow.
pub const MAX_RECHECK_INTERVAL: Duration = Duration::from_secs(366 * 24 * 3600);

/// The most words of `recheck.notify`: 64, each at most [`MAX_NOTIFY_ARG_BYTES`]. The
/// command is an argument vector passed as it is; more is a script's job.
pub const MAX_NOTIFY_ARGS: usize = 64;

/// The longest word of `recheck.notify`: 4096 bytes (Linux's `PATH_MAX`).
pub const MAX_NOTIFY_ARG_BYTES: usize = 4096;

/// The most `replicates` and `max_replicates`: 1000 runs per arm. Exact rank tests decide
/// with a few dozen; beyond this a number is a typo, and it sizes the plan, the daemon's
/// look schedule and the number of jobs submitted.
pub const MAX_REPLICATES: u32 = 1000;

/// `max_replicates` when the file gives none is this many times `replicates`: every
/// experiment adapts (the staged rule looks first at `replicates` blocks and adds blocks
/// while a variant is open). 6: `benches/decision-cost` found a budget of 30 blocks for
/// `replicates: 5` the cheapest staged design with fixed n = 20's power (98 % at a 5 %
/// speed-up with 3 % noise, 0.56× its node-hours); budget 20 has 91 %, 40 costs more.
pub const DEFAULT_BUDGET_FACTOR: u32 = 6;

/// The largest default `max_replicates`: 60 blocks. Past it an effect the exact test has
/// not seen in 60 pairs is far below any worthwhile one at realistic noise, and the default
/// never plans more runs than a user asked for knowingly; a file may give more.
pub const DEFAULT_BUDGET_CAP: u32 = 60;

/// The budget (`max_replicates`) of a file that gives none: [`DEFAULT_BUDGET_FACTOR`] ×
/// `replicates`, at most [`DEFAULT_BUDGET_CAP`], [`MAX_REPLICATES`] and [`MAX_RUNS`] over
/// `arms`, never below `replicates` (so a default is never refused by the limits).
pub fn default_max_replicates(replicates: u32, arms: u64) -> u32 {
    let by_runs = u32::try_from(MAX_RUNS / arms.max(1)).unwrap_or(u32::MAX);
    replicates
        .saturating_mul(DEFAULT_BUDGET_FACTOR)
        .min(DEFAULT_BUDGET_CAP)
        .min(MAX_REPLICATES)
        .min(by_runs)
        .max(replicates)
}

/// The most `variants`: 64 proposals in one experiment. Each variant is an arm of every
/// block (a block runs them back to back), a column of the report and a test in Holm's
/// correction; more is a different experiment.
pub const MAX_VARIANTS: usize = 64;

/// The most `stages` in a campaign: 8. Each stage is a whole experiment run after the one
/// before (the canonical order has four components; two stages of one component are
/// allowed), so a longer chain is hours of machine time and a report no one reads.
pub const MAX_STAGES: usize = 8;

/// The most runs one experiment may plan: `max_replicates` (else `replicates`) × arms.
/// Each run is a directory with its scripts, its output and its manifest, and a job or a
/// share of one; 10,000 runs is months of a queue.
pub const MAX_RUNS: u64 = 10_000;

/// The most entries of `metrics:`: 16, a primary and 15 guardrails. Each is read from
/// every run's output by its own pattern at every look, and each guardrail is an interval
/// and a possible veto (its false-veto chance adds up over them: docs/STATISTICS.md).
pub const MAX_METRICS: usize = 16;

/// The longest `unit` of a metric: 32 bytes (`GB/s`, `Gflop/s`, `samples/s`); it is shown
/// in every report cell of the metric.
pub const MAX_UNIT_BYTES: usize = 32;

/// The most `inputs` entries: 256 paths whose page cache optgate manages. A folder counts
/// as one entry; its files are bounded by [`MAX_INPUT_FILES`].
pub const MAX_INPUTS: usize = 256;

/// The most files the page-cache handling visits under all `inputs` together before each
/// run: 100,000. Past it the rest are left alone and the manifest says so.
pub const MAX_INPUT_FILES: usize = 100_000;

/// The most `nodes` of a launch (scheduler or launcher): 200,000. The largest machine
/// built (Fugaku) has 158,976 nodes; more is a typo.
pub const MAX_NODES: u32 = 200_000;

/// The most `tasks_per_node`: 4096, several times the hardware threads of any node sold.
pub const MAX_TASKS_PER_NODE: u32 = 4096;

/// The most `cpus_per_task`: 4096, as many CPUs as the largest shared-memory node has.
pub const MAX_CPUS_PER_TASK: u32 = 4096;

/// The most `gpus_per_task`: 64 (nodes carry 4 to 8).
pub const MAX_GPUS_PER_TASK: u32 = 64;

/// The most tasks of one launch, `nodes` × `tasks_per_node`: 10,000,000 (Fugaku's nodes
/// with one task per core are 7.6 million). The product is computed with checked
/// arithmetic: `65536 × 65536` is refused, never wrapped to `srun -n 0`.
pub const MAX_TASKS: u64 = 10_000_000;

/// The most CPUs one node is asked for, `tasks_per_node` × `cpus_per_task`: 4096.
pub const MAX_CPUS_PER_NODE: u64 = 4096;

/// At most this many bytes of an offending value are quoted in a message.
pub const QUOTE_PREFIX: usize = 40;

/// `s` as a message quotes it: escaped, and cut to [`QUOTE_PREFIX`] bytes (on a character
/// boundary) with `…` and the full length when longer.
pub fn quote_prefix(s: &str) -> String {
    if s.len() <= QUOTE_PREFIX {
        return s.escape_debug().to_string();
    }
    let mut end = QUOTE_PREFIX;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", s[..end].escape_debug(), s.len())
}

/// A value as [`quote_prefix`] shows it, between backticks: the one way every check of
/// the loader quotes what it refuses.
pub fn quoted(s: &str) -> String {
    format!("`{}`", quote_prefix(s))
}

/// `message` with every span between backticks or double quotes longer than
/// [`QUOTE_PREFIX`] cut to that prefix and `…` (its length after it): for messages that
/// quote a value whole (serde's `unknown field `…``, `invalid type: string "…"`).
pub fn shorten_quoted(message: &str) -> String {
    let mut out = String::with_capacity(message.len().min(4 * QUOTE_PREFIX));
    let mut rest = message;
    while let Some(open) = rest.find(['`', '"']) {
        let mark = rest.as_bytes()[open] as char;
        out.push_str(&rest[..=open]);
        rest = &rest[open + 1..];
        let Some(close) = rest.find(mark) else { break };
        let inner = &rest[..close];
        if inner.len() <= QUOTE_PREFIX {
            out.push_str(inner);
        } else {
            out.push_str(&cut_to_prefix(inner));
        }
        out.push(mark);
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    cut_message(&out)
}

/// `s` cut to [`QUOTE_PREFIX`] bytes on a character boundary, with `…` and the full
/// length when longer (not escaped: for text already escaped or known to be printable).
fn cut_to_prefix(s: &str) -> String {
    let mut end = QUOTE_PREFIX;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", &s[..end], s.len())
}

/// The longest message a diagnostic carries, and the longest YAML path it shows: a safety
/// net under the per-value prefixes, so that no diagnostic is more than a line or two.
pub const MAX_MESSAGE_BYTES: usize = 1024;
pub const MAX_PATH_SHOWN: usize = 128;

/// `s` cut to [`MAX_MESSAGE_BYTES`] (on a character boundary) with `…` when longer.
pub fn cut_message(s: &str) -> String {
    cut_at(s, MAX_MESSAGE_BYTES)
}

/// `s` cut to `max` bytes on a character boundary, with `…` when longer.
pub fn cut_at(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// The most diagnostics printed for one experiment file (errors first); the rest are
/// counted in one line "… and N more".
pub const MAX_DIAGNOSTICS_SHOWN: usize = 20;

#[cfg(test)]
mod tests {
    use super::*;

    /// The default budget: 6 × `replicates`, at most 60 blocks, never below `replicates`,
    /// and never more runs than `MAX_RUNS` (so a default is never refused).
    #[test]
    fn the_default_budget_adapts_within_the_limits() {
        assert_eq!(default_max_replicates(5, 2), 30);
        assert_eq!(default_max_replicates(7, 4), 42);
        assert_eq!(default_max_replicates(10, 2), DEFAULT_BUDGET_CAP);
        assert_eq!(default_max_replicates(100, 2), 100);
        // 65 arms: 10,000 / 65 = 153 blocks would be allowed; the cap is lower.
        assert_eq!(default_max_replicates(20, 65), 60);
        // 200 replicates × 60 arms is over MAX_RUNS already: the budget stays replicates.
        assert_eq!(default_max_replicates(200, 60), 200);
        assert_eq!(default_max_replicates(40, 200), 50);
    }
}
