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

/// The most `replicates` and `max_replicates`: 1000 runs per arm. Exact rank tests decide
/// with a few dozen; beyond this a number is a typo, and it sizes the plan, the daemon's
/// look schedule and the number of jobs submitted.
pub const MAX_REPLICATES: u32 = 1000;

/// The most `variants`: 64 proposals in one experiment. Each variant is an arm of every
/// block (a block runs them back to back), a column of the report and a test in Holm's
/// correction; more is a different experiment.
pub const MAX_VARIANTS: usize = 64;

/// The most runs one experiment may plan: `max_replicates` (else `replicates`) × arms.
/// Each run is a directory with its scripts, its output and its manifest, and a job or a
/// share of one; 10,000 runs is months of a queue.
pub const MAX_RUNS: u64 = 10_000;

/// The most `inputs` entries: 256 paths whose page cache optgate manages. A folder counts
/// as one entry; its files are bounded by [`MAX_INPUT_FILES`].
pub const MAX_INPUTS: usize = 256;

/// The most files the page-cache handling visits under all `inputs` together before each
/// run: 100,000. Past it the rest are left alone and the manifest says so.
pub const MAX_INPUT_FILES: usize = 100_000;

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
