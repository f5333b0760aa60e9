//! The limits of trace reading (see `docs/LIMITS.md`). A trace is written by a program,
//! possibly killed half-way, possibly not a trace at all: none of these may make a
//! summary panic or use memory out of proportion to the summary itself. Memory is bounded
//! by these numbers, never by a number read from a trace (an epoch, a category's position).

/// The longest line read: 1 MiB. A DFTracer event is a few hundred bytes; a longer line is
/// skipped (never buffered whole) and reported as a diagnostic of its line.
pub const MAX_LINE_BYTES: usize = 1024 * 1024;

/// The most decompressed text per byte of a `.gz` file: 200. JSON traces compress about
/// tenfold; a gzip bomb (zeros, one repeated line) expands a thousandfold. Checked only
/// past [`GZIP_RATIO_FREE_BYTES`] of text, so small files are never refused for it.
pub const MAX_GZIP_RATIO: u64 = 200;

/// Text every `.gz` file may expand to before [`MAX_GZIP_RATIO`] applies: 64 MiB.
pub const GZIP_RATIO_FREE_BYTES: u64 = 64 * 1024 * 1024;

/// The most text read from one file, compressed or not: 64 GiB (minutes of reading).
pub const MAX_TEXT_BYTES: u64 = 64 * 1024 * 1024 * 1024;

/// The most distinct categories in a file or a summary: 1000 (DFTracer writes a few
/// dozen). Events of further categories are counted under [`OTHER_CATEGORIES`].
pub const MAX_CATEGORIES: usize = 1000;

/// The most distinct event names in a file or a summary: 10,000 (function names; a few
/// hundred in practice). Events of further names are counted under [`OTHER_NAMES`].
pub const MAX_NAMES: usize = 10_000;

/// The most distinct epochs in a file or a summary: 100,000. Events of further epochs
/// still count in the totals but in no epoch.
pub const MAX_EPOCHS: usize = 100_000;

/// The longest name or category kept: 256 bytes. A longer one is kept as its first bytes
/// followed by `…` (so two names that long with the same start are counted together).
pub const MAX_KEY_BYTES: usize = 256;

/// The most (category, name) pairs a file's summary remembers the indices of: 4096
/// (DFTracer writes a few hundred). Only for speed: events of further pairs, or of a
/// category or name longer than [`MAX_KEY_BYTES`], are counted the same, by two look-ups.
/// Bounds that cache to about 4 MiB per file being read (each pair is kept twice).
pub const MAX_PAIRS: usize = 4096;

/// Where events of categories past [`MAX_CATEGORIES`] are counted.
pub const OTHER_CATEGORIES: &str = "(other categories)";

/// Where events of names past [`MAX_NAMES`] are counted.
pub const OTHER_NAMES: &str = "(other names)";

/// The longest diagnostic message kept: 300 bytes (a parser's message may quote input).
pub const MAX_MESSAGE_BYTES: usize = 300;

/// `s` cut to at most `max` bytes on a character boundary, with `…` when cut.
pub(crate) fn prefix(s: &str, max: usize) -> std::borrow::Cow<'_, str> {
    if s.len() <= max {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    std::borrow::Cow::Owned(format!("{}…", &s[..end]))
}

/// A name or category as kept in a summary: at most [`MAX_KEY_BYTES`] (and `…`).
pub(crate) fn key(s: &str) -> std::borrow::Cow<'_, str> {
    prefix(s, MAX_KEY_BYTES)
}

/// A name as a message quotes it: the first 40 bytes, escaped.
pub(crate) fn quoted(s: &str) -> String {
    format!("{:?}", prefix(s, 40))
}
