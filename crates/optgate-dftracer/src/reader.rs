//! Reading trace files: path expansion, gzip detection, chunked line splitting with
//! line numbers, and the parallel fold over files.
//!
//! A file is read in large chunks into one reused buffer and split in place, so no line
//! is copied; only the partial line at the end of a chunk is moved to the front. The
//! buffer never grows past [`MAX_LINE_BYTES`]: a longer line is skipped as it streams by.

use std::cell::Cell;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use rayon::prelude::*;

use crate::aggregate::{
    AggregateOptions, Diagnostics, FileAcc, FileSummary, TraceFormat, TraceSummary,
};
use crate::error::{Diagnostic, DiagnosticKind, TraceError};
use crate::event::RawEvent;
use crate::inflate::{Inflater, with_gzip};
use crate::limits::{GZIP_RATIO_FREE_BYTES, MAX_GZIP_RATIO, MAX_LINE_BYTES, MAX_TEXT_BYTES};

/// Bytes of decompressed text handled per read; large enough that per-read overhead
/// vanishes, small enough to stay in L2 on most machines.
const CHUNK: usize = 256 * 1024;

/// Summarises trace files and directories of trace files.
///
/// A directory stands for its `*.pfw` and `*.pfw.gz` files (not recursive), in name
/// order; a file is read whatever its name. The same file given twice is read once.
/// Files are read in parallel on rayon's global pool. Damaged content becomes
/// diagnostics; paths that cannot be listed or opened, that are not regular files or
/// directories, and files past [`MAX_TEXT_BYTES`] or [`MAX_GZIP_RATIO`] are errors.
pub fn summarize_paths(
    paths: &[PathBuf],
    opts: &AggregateOptions,
) -> Result<TraceSummary, TraceError> {
    let files = expand_paths(paths)?;
    let results: Vec<Result<(FileSummary, Vec<Diagnostic>), TraceError>> =
        files.par_iter().map(|p| summarize_file(p, opts)).collect();
    let mut summary = TraceSummary::default();
    for r in results {
        let (file, diags) = r?;
        summary.total.merge(&file.aggregate);
        summary.files.push(file);
        summary.diagnostics.extend(diags);
    }
    Ok(summary)
}

/// Summarises one trace from any reader (plain or gzip text; detected from the first
/// bytes). `name` is used for the file summary and diagnostics. Past [`MAX_TEXT_BYTES`]
/// or [`MAX_GZIP_RATIO`] the rest of the stream is not read; a diagnostic says so.
pub fn summarize_reader(name: &Path, reader: impl Read, opts: &AggregateOptions) -> TraceSummary {
    // zlib, whose text of a cut member is exact: a reader cannot be read again.
    let read = summarize_stream(name, reader, 0, opts, Inflater::Zlib);
    let (file, mut diagnostics) = (read.summary, read.diagnostics);
    if let Some(reason) = read.refused {
        diagnostics.push(Diagnostic {
            file: name.to_path_buf(),
            line: file.lines + 1,
            kind: DiagnosticKind::ReadError,
            message: format!("{reason}; the rest of the stream is not read"),
        });
    }
    TraceSummary {
        total: file.aggregate.clone(),
        files: vec![file],
        diagnostics,
    }
}

/// The trace files a list of paths stands for, in order, without repeats.
pub fn expand_paths(paths: &[PathBuf]) -> Result<Vec<PathBuf>, TraceError> {
    if paths.is_empty() {
        return Err(TraceError::NoPaths);
    }
    let mut out: Vec<PathBuf> = Vec::new();
    for p in paths {
        let meta = std::fs::metadata(p).map_err(|source| TraceError::Io {
            op: "stat",
            path: p.clone(),
            source,
        })?;
        if meta.is_dir() {
            let mut found = Vec::new();
            let rd = std::fs::read_dir(p).map_err(|source| TraceError::Io {
                op: "list directory",
                path: p.clone(),
                source,
            })?;
            for entry in rd {
                let entry = entry.map_err(|source| TraceError::Io {
                    op: "list directory",
                    path: p.clone(),
                    source,
                })?;
                let path = entry.path();
                let name = entry.file_name();
                let name = name.to_string_lossy();
                if (name.ends_with(".pfw") || name.ends_with(".pfw.gz")) && path.is_file() {
                    found.push(path);
                }
            }
            if found.is_empty() {
                return Err(TraceError::NoTraceFiles { path: p.clone() });
            }
            found.sort();
            out.extend(found);
        } else if meta.is_file() {
            out.push(p.clone());
        } else {
            return Err(TraceError::NotRegular {
                path: p.clone(),
                kind: optgate_probe::file_kind(std::os::unix::fs::MetadataExt::mode(&meta)),
            });
        }
    }
    // Keep the first occurrence: `dir dir/a.pfw.gz` must not count a.pfw.gz twice.
    let mut seen = std::collections::HashSet::new();
    out.retain(|p| seen.insert(p.clone()));
    Ok(out)
}

fn summarize_file(
    path: &Path,
    opts: &AggregateOptions,
) -> Result<(FileSummary, Vec<Diagnostic>), TraceError> {
    let f = File::open(path).map_err(|source| TraceError::Io {
        op: "open",
        path: path.to_path_buf(),
        source,
    })?;
    let file_bytes = f.metadata().map(|m| m.len()).unwrap_or(0);
    let mut read = summarize_stream(path, f, file_bytes, opts, Inflater::Fast);
    if read.cut_gzip && read.refused.is_none() {
        // igzip may stop a byte short of zlib in a cut member (src/inflate.rs): read the
        // (rare) cut file again with zlib, so its counts are zlib's to the byte.
        let f = File::open(path).map_err(|source| TraceError::Io {
            op: "open",
            path: path.to_path_buf(),
            source,
        })?;
        read = summarize_stream(path, f, file_bytes, opts, Inflater::Zlib);
    }
    match read.refused {
        Some(reason) => Err(TraceError::TooLarge {
            path: path.to_path_buf(),
            reason,
        }),
        None => Ok((read.summary, read.diagnostics)),
    }
}

/// Counts the bytes read through it (the compressed size consumed so far).
struct Counting<R> {
    inner: R,
    count: Rc<Cell<u64>>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count.set(self.count.get() + n as u64);
        Ok(n)
    }
}

/// How much text a file may yield: [`MAX_TEXT_BYTES`], and for gzip at most
/// [`MAX_GZIP_RATIO`] times the compressed bytes read, past [`GZIP_RATIO_FREE_BYTES`].
struct TextLimit {
    gzip: bool,
    compressed: Rc<Cell<u64>>,
}

impl TextLimit {
    /// Why `text` bytes are too many, if they are.
    fn exceeded(&self, text: u64) -> Option<String> {
        if text > MAX_TEXT_BYTES {
            return Some(format!(
                "more than {} GiB of text (the limit of one trace file)",
                MAX_TEXT_BYTES >> 30
            ));
        }
        let compressed = self.compressed.get().max(1);
        if self.gzip
            && text > GZIP_RATIO_FREE_BYTES
            && text > compressed.saturating_mul(MAX_GZIP_RATIO)
        {
            return Some(format!(
                "the gzip stream expands more than {MAX_GZIP_RATIO} times ({text} bytes of text \
                 from {compressed} compressed bytes): not a trace"
            ));
        }
        None
    }
}

/// What reading one stream gave.
struct StreamRead {
    summary: FileSummary,
    diagnostics: Vec<Diagnostic>,
    /// Why it was cut short by a limit, if it was.
    refused: Option<String>,
    /// The gzip stream ended inside a member (a cut file).
    cut_gzip: bool,
}

/// Reads one stream, gzip inflated by `inflater`.
fn summarize_stream<R: Read>(
    path: &Path,
    raw: R,
    file_bytes: u64,
    opts: &AggregateOptions,
    inflater: Inflater,
) -> StreamRead {
    let compressed = Rc::new(Cell::new(0u64));
    let mut input = BufReader::with_capacity(
        CHUNK,
        Counting {
            inner: raw,
            count: Rc::clone(&compressed),
        },
    );
    let mut diags = Diagnostics::new(path);
    // gzip is recognised by its magic bytes, not the file name: renamed and
    // uncompressed-but-`.gz` files both occur in the wild.
    let is_gzip = match input.fill_buf() {
        Ok(head) => head.starts_with(&[0x1f, 0x8b]),
        Err(_) => false,
    };
    let mut state = LineState {
        acc: FileAcc::new(opts),
        seen_content: false,
    };
    let limit = TextLimit {
        gzip: is_gzip,
        compressed,
    };
    let read = if is_gzip {
        with_gzip(input, inflater, |text| {
            fold_lines(text, &mut state, &mut diags, &limit)
        })
    } else {
        fold_lines(input, &mut state, &mut diags, &limit)
    };
    let bracketed = state.acc.bracketed;
    let mut format = state.acc.format;
    if format == TraceFormat::Unknown && bracketed {
        format = TraceFormat::Bracketed2024;
    }
    let (metadata_records, other_records, skipped_events) = (
        state.acc.metadata_records,
        state.acc.other_records,
        state.acc.skipped_events,
    );
    if let Some(line) = state.acc.first_other_line {
        push_not_summed(&mut diags, line, other_records);
    }
    let (aggregate, time_unit, epoch_markers, epochless) = state.acc.finish();
    if epochless > 0 {
        push_epochless(&mut diags, read.lines, epochless);
    }
    let (diagnostics, list) = diags.finish(read.lines);
    let summary = FileSummary {
        path: path.to_path_buf(),
        format,
        time_unit,
        file_bytes,
        text_bytes: read.bytes,
        lines: read.lines,
        metadata_records,
        other_records,
        skipped_events,
        epoch_markers,
        diagnostics,
        aggregate,
    };
    StreamRead {
        summary,
        diagnostics: list,
        refused: read.refused,
        cut_gzip: is_gzip && read.cut,
    }
}

/// Says that `other_records` records, the first on `line`, were neither complete
/// events nor metadata and so are not summed.
fn push_not_summed(diags: &mut Diagnostics, line: u64, other_records: u64) {
    diags.push(
        line,
        DiagnosticKind::NotSummed,
        format!(
            "{other_records} records are neither complete events (ph X/1) nor metadata \
             (e.g. counters or aggregated records); their durations are not summed"
        ),
    );
}

/// Says that `epochless` events fell past [`crate::limits::MAX_EPOCHS`] and count in
/// no epoch.
fn push_epochless(diags: &mut Diagnostics, line: u64, epochless: u64) {
    diags.push(
        line,
        DiagnosticKind::TooMany,
        format!(
            "more than {} distinct epochs; {epochless} events of later new epochs count in \
             the totals but in no epoch",
            crate::limits::MAX_EPOCHS
        ),
    );
}

struct ReadStats {
    lines: u64,
    bytes: u64,
    /// Why reading stopped at a limit, if it did.
    refused: Option<String>,
    /// Reading ended early at the end of the input (a truncated gzip member).
    cut: bool,
}

struct LineState<'o> {
    acc: FileAcc<'o>,
    seen_content: bool,
}

impl LineState<'_> {
    /// Handles one line without its `\n`. `last` marks a final line with no newline,
    /// where a parse failure means the writer was cut off (a torn line).
    fn line(&mut self, raw: &[u8], no: u64, last: bool, diags: &mut Diagnostics) {
        let mut line = raw.trim_ascii();
        // The bracketed generations open with `[` (alone or glued to the first event)
        // and may close with `]`; Chrome-style writers may end objects with `,`.
        if let Some(rest) = line.strip_prefix(b"[") {
            if !self.seen_content {
                self.acc.bracketed = true;
            }
            line = rest.trim_ascii_start();
        }
        while let Some(rest) = line.strip_suffix(b"]").or_else(|| line.strip_suffix(b",")) {
            line = rest.trim_ascii_end();
        }
        if line.is_empty() {
            return;
        }
        self.seen_content = true;
        let mut ev = RawEvent::default();
        let parsed = crate::scan::scan_into(line, &mut ev).map_err(|e| (e.eof, e.to_string()));
        match parsed {
            Ok(()) => self.acc.event(&ev, no, diags),
            Err((true, msg)) if last => diags.push(
                no,
                DiagnosticKind::TornLine,
                format!("last line is incomplete (writer cut off?): {msg}; ignored"),
            ),
            Err((eof, msg)) => diags.push(
                no,
                DiagnosticKind::NotJson,
                if eof {
                    format!("incomplete JSON object: {msg}; line ignored")
                } else {
                    format!("not a JSON object: {msg}; line ignored")
                },
            ),
        }
    }
}

/// Reads `r` to the end (or to a read error, or to `limit`), feeding each line to
/// `state`. A line longer than [`MAX_LINE_BYTES`] is skipped as it streams by (a
/// [`DiagnosticKind::LongLine`] of its line): the buffer never grows past the limit.
fn fold_lines(
    mut r: impl Read,
    state: &mut LineState<'_>,
    diags: &mut Diagnostics,
    limit: &TextLimit,
) -> ReadStats {
    let mut buf = vec![0u8; CHUNK];
    let mut filled = 0usize;
    let mut stats = ReadStats {
        lines: 0,
        bytes: 0,
        refused: None,
        cut: false,
    };
    let mut failure: Option<io::Error> = None;
    // While skipping a long line: its number and its bytes so far.
    let mut skipping: Option<(u64, u64)> = None;
    loop {
        make_room(&mut buf, &mut filled, &mut stats, &mut skipping);
        let n = match r.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                failure = Some(e);
                break;
            }
        };
        let scan_from = filled;
        filled += n;
        stats.bytes += n as u64;
        if let Some(reason) = limit.exceeded(stats.bytes) {
            stats.refused = Some(reason);
            return stats;
        }
        let mut start = 0usize;
        let mut search = scan_from;
        if let Some((no, bytes)) = skipping {
            match find_newline(&buf[scan_from..filled]) {
                None => {
                    skipping = Some((no, bytes + n as u64));
                    filled = 0;
                    continue;
                }
                Some(off) => {
                    push_long_line(diags, no, bytes + off as u64);
                    skipping = None;
                    start = scan_from + off + 1;
                    search = start;
                }
            }
        }
        start = fold_complete_lines(&buf[..filled], start, search, state, &mut stats, diags);
        buf.copy_within(start..filled, 0);
        filled -= start;
    }
    if let Some((no, bytes)) = skipping {
        push_long_line(diags, no, bytes + filled as u64);
    } else if filled > 0 {
        stats.lines += 1;
        state.line(&buf[..filled], stats.lines, true, diags);
    }
    if let Some(e) = failure {
        stats.cut = e.kind() == io::ErrorKind::UnexpectedEof;
        push_read_failure(diags, stats.lines, &e);
    }
    stats
}

/// Makes room in a full buffer: grows it up to the line limit (and its newline), or,
/// past it, drops the start of the over-long line and begins skipping the rest.
fn make_room(
    buf: &mut Vec<u8>,
    filled: &mut usize,
    stats: &mut ReadStats,
    skipping: &mut Option<(u64, u64)>,
) {
    if *filled != buf.len() {
        return;
    }
    if buf.len() <= MAX_LINE_BYTES {
        // A line longer than the buffer: grow rather than split it, up to the
        // limit (and its newline).
        buf.resize((buf.len() * 2).min(MAX_LINE_BYTES + 1), 0);
    } else {
        // The buffer holds the start of one line past the limit: drop it and skip
        // the rest of the line as it arrives.
        stats.lines += 1;
        *skipping = Some((stats.lines, *filled as u64));
        *filled = 0;
    }
}

/// Feeds each complete line of `buf` from `start` to `state`, looking for newlines
/// from `search`; returns where the unfinished rest begins.
fn fold_complete_lines(
    buf: &[u8],
    mut start: usize,
    mut search: usize,
    state: &mut LineState<'_>,
    stats: &mut ReadStats,
    diags: &mut Diagnostics,
) -> usize {
    while let Some(off) = find_newline(&buf[search..]) {
        let end = search + off;
        stats.lines += 1;
        state.line(&buf[start..end], stats.lines, false, diags);
        start = end + 1;
        search = start;
    }
    start
}

/// Says that line `no`, of `bytes` bytes, was over [`MAX_LINE_BYTES`] and skipped.
fn push_long_line(diags: &mut Diagnostics, no: u64, bytes: u64) {
    diags.push(
        no,
        DiagnosticKind::LongLine,
        format!(
            "line of {bytes} bytes, longer than the {MAX_LINE_BYTES} a line may have (no \
             trace event is that long); skipped"
        ),
    );
}

/// Says why reading stopped early, after `lines` counted lines.
fn push_read_failure(diags: &mut Diagnostics, lines: u64, e: &io::Error) {
    let what = if e.kind() == io::ErrorKind::UnexpectedEof {
        "compressed stream ends early (truncated gzip?)".to_string()
    } else {
        format!("read failed: {e}")
    };
    diags.push(
        lines + 1,
        DiagnosticKind::ReadError,
        format!("{what}; the {lines} lines before this point are counted"),
    );
}

/// Position of the first `\n`: memchr's SIMD search (16-32 bytes per step); lines are
/// ~150-300 bytes, and a byte loop here was a visible share of the per-line cost.
#[inline]
fn find_newline(hay: &[u8]) -> Option<usize> {
    memchr::memchr(b'\n', hay)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newline_search_matches_a_plain_scan() {
        let mut data: Vec<u8> = (0..200u8).map(|i| i.wrapping_mul(37) | 0x80).collect();
        for pos in [0usize, 1, 7, 8, 9, 63, 64, 150, 199] {
            let mut d = data.clone();
            d[pos] = b'\n';
            for start in 0..d.len() {
                assert_eq!(
                    find_newline(&d[start..]),
                    d[start..].iter().position(|&b| b == b'\n'),
                    "newline at {pos}, search from {start}"
                );
            }
        }
        // Bytes 0x0b and 0x8a are the classic false-positive neighbours of 0x0a.
        data.fill(0x0b);
        assert_eq!(find_newline(&data), None);
        data.fill(0x8a);
        assert_eq!(find_newline(&data), None);
        data[100] = b'\n';
        data[101] = 0x0b;
        assert_eq!(find_newline(&data), Some(100));
    }
}
