//! Summed counts and durations: the public result types, and the per-file accumulator
//! that turns parsed lines into them (time unit, epoch assignment, diagnostics).
//!
//! Durations are summed in the file's own ticks and converted to seconds once at the
//! end, because the `CM` time-unit record may come after the first events.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::{Diagnostic, DiagnosticKind};
use crate::event::{NumField, Number, Phase, RawEvent, num_field, str_field};
use crate::limits::{
    MAX_CATEGORIES, MAX_EPOCHS, MAX_KEY_BYTES, MAX_MESSAGE_BYTES, MAX_NAMES, MAX_PAIRS,
    OTHER_CATEGORIES, OTHER_NAMES, key, prefix, quoted,
};

/// What to aggregate and how.
#[derive(Debug, Clone, Default)]
pub struct AggregateOptions {
    /// Name of the events whose intervals define epochs (e.g. `"epoch"`). When set,
    /// an event whose `ts` falls in a file's k-th marker interval (ordered by start)
    /// belongs to epoch k (1-based), or to the marker's own `args.epoch` when it has
    /// one; events outside every marker interval keep their `args.epoch`. Marker events
    /// are not counted in any epoch (they would count their epoch's length twice).
    /// When `None`, epochs come from `args.epoch` only.
    pub epoch_marker: Option<String>,
    /// Only events of this category are counted (markers are still honoured).
    pub category: Option<String>,
}

/// Count and summed duration of a group of events.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Stat {
    pub count: u64,
    pub dur_s: f64,
}

impl Stat {
    fn add(&mut self, other: &Stat) {
        self.count += other.count;
        self.dur_s += other.dur_s;
    }
}

/// One epoch: all its events, and split by category.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct EpochStat {
    pub count: u64,
    pub dur_s: f64,
    pub by_category: BTreeMap<String, Stat>,
}

/// Counts and durations of the counted (complete) events of a file or a run.
///
/// An event without a category or name is filed under the empty string. Durations are
/// summed as traced: nested regions (an epoch around its steps) each count in full, so
/// compare sums within one category, not across nesting levels.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Aggregate {
    /// Number of counted events.
    pub events: u64,
    /// Sum of their `dur`, in seconds.
    pub dur_s: f64,
    pub by_category: BTreeMap<String, Stat>,
    pub by_name: BTreeMap<String, Stat>,
    /// Only events that belong to an epoch appear here.
    pub by_epoch: BTreeMap<u32, EpochStat>,
}

/// Adds `v` under `k`, or under `other` when `k` is new and `map` already holds `cap` keys.
fn add_capped(map: &mut BTreeMap<String, Stat>, k: &str, v: &Stat, cap: usize, other: &str) {
    if let Some(mine) = map.get_mut(k) {
        mine.add(v);
    } else if map.len() < cap {
        map.insert(k.to_string(), *v);
    } else {
        map.entry(other.to_string()).or_default().add(v);
    }
}

impl Aggregate {
    /// Adds another aggregate into this one (e.g. one rank's file into the run total).
    /// The sum keeps the limits of one file: at most [`MAX_CATEGORIES`] categories and
    /// [`MAX_NAMES`] names (the rest under [`OTHER_CATEGORIES`], [`OTHER_NAMES`]) and
    /// [`MAX_EPOCHS`] epochs (further epochs' events count in the totals only).
    pub fn merge(&mut self, other: &Aggregate) {
        self.events += other.events;
        self.dur_s += other.dur_s;
        for (k, v) in &other.by_category {
            add_capped(
                &mut self.by_category,
                k,
                v,
                MAX_CATEGORIES,
                OTHER_CATEGORIES,
            );
        }
        for (k, v) in &other.by_name {
            add_capped(&mut self.by_name, k, v, MAX_NAMES, OTHER_NAMES);
        }
        for (e, v) in &other.by_epoch {
            if !self.by_epoch.contains_key(e) && self.by_epoch.len() >= MAX_EPOCHS {
                continue;
            }
            let mine = self.by_epoch.entry(*e).or_default();
            mine.count += v.count;
            mine.dur_s += v.dur_s;
            for (k, s) in &v.by_category {
                add_capped(
                    &mut mine.by_category,
                    k,
                    s,
                    MAX_CATEGORIES,
                    OTHER_CATEGORIES,
                );
            }
        }
    }
}

/// The unit of `ts` and `dur` in a file, from its `CM` `time_metric` record.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TimeUnit {
    Nanoseconds,
    /// DFTracer's default when the trace does not say.
    #[default]
    Microseconds,
    Milliseconds,
    Seconds,
}

impl TimeUnit {
    /// Reads DFTracer's spelling (`US`, `NS`, `MS`, `S`) and a few obvious variants.
    pub fn parse(s: &str) -> Option<TimeUnit> {
        match s.trim().to_ascii_lowercase().as_str() {
            "ns" | "nsec" | "nano" | "nanosecond" | "nanoseconds" => Some(TimeUnit::Nanoseconds),
            "us" | "µs" | "usec" | "micro" | "microsecond" | "microseconds" => {
                Some(TimeUnit::Microseconds)
            }
            "ms" | "msec" | "milli" | "millisecond" | "milliseconds" => {
                Some(TimeUnit::Milliseconds)
            }
            "s" | "sec" | "second" | "seconds" => Some(TimeUnit::Seconds),
            _ => None,
        }
    }

    pub fn seconds_per_tick(self) -> f64 {
        match self {
            TimeUnit::Nanoseconds => 1e-9,
            TimeUnit::Microseconds => 1e-6,
            TimeUnit::Milliseconds => 1e-3,
            TimeUnit::Seconds => 1.0,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            TimeUnit::Nanoseconds => "ns",
            TimeUnit::Microseconds => "us",
            TimeUnit::Milliseconds => "ms",
            TimeUnit::Seconds => "s",
        }
    }
}

/// Which DFTracer generation a file looks like.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub enum TraceFormat {
    /// Leading `[`, every value a string (`dlio_profiler` era).
    #[serde(rename = "2023")]
    Bracketed2023,
    /// Leading `[`, numbers as numbers, `ph` `"X"`/`"M"` (DFTracer 1.x).
    #[serde(rename = "2024")]
    Bracketed2024,
    /// Newline-delimited JSON, integer `ph` (DFTracer 2.x).
    #[serde(rename = "2.x")]
    Ndjson,
    /// No event seen to tell.
    #[default]
    #[serde(rename = "unknown")]
    Unknown,
}

impl TraceFormat {
    pub fn as_str(self) -> &'static str {
        match self {
            TraceFormat::Bracketed2023 => "2023",
            TraceFormat::Bracketed2024 => "2024",
            TraceFormat::Ndjson => "2.x",
            TraceFormat::Unknown => "unknown",
        }
    }
}

/// The result for one trace file.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct FileSummary {
    pub path: PathBuf,
    pub format: TraceFormat,
    pub time_unit: TimeUnit,
    /// Bytes of the file on disk (compressed size for `.gz`).
    pub file_bytes: u64,
    /// Bytes of JSON text read (after decompression).
    pub text_bytes: u64,
    pub lines: u64,
    /// Metadata records (`ph` `"M"` / `4`): hashes, thread names, time unit.
    pub metadata_records: u64,
    /// Valid records that are neither complete events nor metadata (counters, ...).
    pub other_records: u64,
    /// Complete events left out for a missing or unusable `dur`.
    pub skipped_events: u64,
    /// Epoch-marker events seen (when a marker name was given).
    pub epoch_markers: u64,
    /// Diagnostics raised for this file (including suppressed ones).
    pub diagnostics: u64,
    pub aggregate: Aggregate,
}

/// Results for all files of a run and their sum.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct TraceSummary {
    pub files: Vec<FileSummary>,
    pub total: Aggregate,
    pub diagnostics: Vec<Diagnostic>,
}

/// Per epoch, the summed duration in seconds of one category (or of all categories)
/// over every file of the run: the per-epoch metric an experiment compares.
///
/// Epochs where the category has no events are absent rather than zero, so a missing
/// epoch is visible to the caller.
pub fn epoch_seconds(summary: &TraceSummary, category: Option<&str>) -> BTreeMap<u32, f64> {
    summary
        .total
        .by_epoch
        .iter()
        .filter_map(|(e, st)| match category {
            None => Some((*e, st.dur_s)),
            Some(c) => st.by_category.get(c).map(|s| (*e, s.dur_s)),
        })
        .collect()
}

// ---------------------------------------------------------------------------------
// Accumulation
// ---------------------------------------------------------------------------------

/// The FxHash mixing step (rustc's hasher): category and name keys are short and
/// trusted, so SipHash's DoS resistance buys nothing and costs a visible share of the
/// per-event time.
#[derive(Default)]
pub(crate) struct FxHasher(u64);

impl FxHasher {
    #[inline]
    fn add(&mut self, w: u64) {
        self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes(c.try_into().expect("8-byte chunk")));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(w));
        }
    }

    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }

    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

/// Count and duration in the file's ticks.
#[derive(Debug, Clone, Copy, Default)]
struct Raw {
    count: u64,
    dur: f64,
}

impl Raw {
    #[inline]
    fn add(&mut self, dur: f64) {
        self.count += 1;
        self.dur += dur;
    }

    fn seconds(self, k: f64) -> Stat {
        Stat {
            count: self.count,
            dur_s: self.dur * k,
        }
    }
}

#[derive(Default)]
struct EpochRaw {
    total: Raw,
    /// Keyed by category index: only the categories this epoch has (a vector indexed by
    /// the index would cost every epoch as much as the file's last category).
    by_cat: FastMap<u32, Raw>,
}

impl EpochRaw {
    fn add(&mut self, cat: u32, dur: f64) {
        self.total.add(dur);
        self.by_cat.entry(cat).or_default().add(dur);
    }
}

struct Marker {
    start: i64,
    end: i64,
    epoch: Option<u32>,
}

/// An event waiting for the file's epoch markers to be known.
struct Pending {
    ts: Option<i64>,
    dur: f64,
    cat: u32,
    arg_epoch: Option<u32>,
}

/// At most this many diagnostics are kept per file; the rest are counted only, so a
/// file of garbage cannot flood memory or the report.
const MAX_DIAGNOSTICS_PER_FILE: usize = 50;

pub(crate) struct Diagnostics {
    file: PathBuf,
    list: Vec<Diagnostic>,
    total: u64,
}

impl Diagnostics {
    pub fn new(file: &Path) -> Self {
        Diagnostics {
            file: file.to_path_buf(),
            list: Vec::new(),
            total: 0,
        }
    }

    pub fn push(&mut self, line: u64, kind: DiagnosticKind, message: impl Into<String>) {
        self.total += 1;
        if self.list.len() < MAX_DIAGNOSTICS_PER_FILE {
            let message = message.into();
            self.list.push(Diagnostic {
                file: self.file.clone(),
                line,
                kind,
                message: prefix(&message, MAX_MESSAGE_BYTES).into_owned(),
            });
        }
    }

    pub fn finish(mut self, last_line: u64) -> (u64, Vec<Diagnostic>) {
        let hidden = self.total - self.list.len() as u64;
        if hidden > 0 {
            self.list.push(Diagnostic {
                file: self.file.clone(),
                line: last_line,
                kind: DiagnosticKind::Suppressed,
                message: format!(
                    "{hidden} more diagnostics in this file not shown (first {MAX_DIAGNOSTICS_PER_FILE} kept)"
                ),
            });
        }
        (self.total, self.list)
    }
}

/// A (category, name) pair as read, with its category's and name's indices.
struct Pair {
    cat: Box<str>,
    name: Box<str>,
    ids: (u32, u32),
}

/// Folds the events of one file.
pub(crate) struct FileAcc<'o> {
    opts: &'o AggregateOptions,
    cat_index: FastMap<Box<str>, u32>,
    cat_names: Vec<Box<str>>,
    cat_raw: Vec<Raw>,
    name_index: FastMap<Box<str>, u32>,
    name_keys: Vec<Box<str>>,
    name_raw: Vec<Raw>,
    /// An event's category and name as read, joined by a 0xFF byte (never in UTF-8),
    /// to their indices: one lookup per event instead of two. At most [`MAX_PAIRS`]
    /// pairs of at most [`crate::limits::MAX_KEY_BYTES`] bytes each are kept; other
    /// events take the two lookups.
    pairs: FastMap<Box<[u8]>, u32>,
    /// The pairs `pairs` indexes: category, name, and their indices.
    pair_list: Vec<Pair>,
    /// The two pairs met last (places in `pair_list`), tried before hashing: DFTracer
    /// writes runs and alternations of a few pairs (`lseek64`, `read`, ...).
    recent: [usize; 2],
    pair_key: Vec<u8>,
    epoch_index: FastMap<u32, u32>,
    epochs: Vec<(u32, EpochRaw)>,
    /// The epoch the last event went to and its place in `epochs`.
    last_epoch: Option<(u32, u32)>,
    markers: Vec<Marker>,
    pending: Vec<Pending>,
    unit: TimeUnit,
    unit_line: Option<u64>,
    pub format: TraceFormat,
    pub bracketed: bool,
    pub metadata_records: u64,
    pub other_records: u64,
    /// Where the first such record is, to point the diagnostic at it.
    pub first_other_line: Option<u64>,
    pub skipped_events: u64,
    /// Events counted in no epoch because the file has [`MAX_EPOCHS`] epochs already.
    pub epochless_events: u64,
    other_category: Option<u32>,
}

impl<'o> FileAcc<'o> {
    pub fn new(opts: &'o AggregateOptions) -> Self {
        FileAcc {
            opts,
            cat_index: FastMap::default(),
            cat_names: Vec::new(),
            cat_raw: Vec::new(),
            name_index: FastMap::default(),
            name_keys: Vec::new(),
            name_raw: Vec::new(),
            pairs: FastMap::default(),
            pair_list: Vec::new(),
            recent: [usize::MAX; 2],
            pair_key: Vec::new(),
            epoch_index: FastMap::default(),
            epochs: Vec::new(),
            last_epoch: None,
            markers: Vec::new(),
            pending: Vec::new(),
            unit: TimeUnit::default(),
            unit_line: None,
            format: TraceFormat::Unknown,
            bracketed: false,
            metadata_records: 0,
            other_records: 0,
            first_other_line: None,
            skipped_events: 0,
            epochless_events: 0,
            other_category: None,
        }
    }

    fn new_cat(&mut self, cat: &str) -> u32 {
        // At most MAX_CATEGORIES + 1 entries (the overflow bucket), so this fits.
        let i = self.cat_names.len() as u32;
        self.cat_index.insert(cat.into(), i);
        self.cat_names.push(cat.into());
        self.cat_raw.push(Raw::default());
        i
    }

    fn cat_id(&mut self, cat: &str, line: u64, diags: &mut Diagnostics) -> u32 {
        let cat = key(cat);
        if let Some(&i) = self.cat_index.get(cat.as_ref()) {
            return i;
        }
        if self.cat_names.len() < MAX_CATEGORIES {
            return self.new_cat(&cat);
        }
        if let Some(i) = self.other_category {
            return i;
        }
        diags.push(
            line,
            DiagnosticKind::TooMany,
            format!(
                "more than {MAX_CATEGORIES} distinct categories; events of {} and later new \
                 categories are counted under {OTHER_CATEGORIES:?}",
                quoted(&cat)
            ),
        );
        let i = match self.cat_index.get(OTHER_CATEGORIES) {
            Some(&i) => i,
            None => self.new_cat(OTHER_CATEGORIES),
        };
        self.other_category = Some(i);
        i
    }

    fn add_epoch(&mut self, e: u32, cat: u32, dur: f64) {
        let at = match self.last_epoch {
            Some((last, at)) if last == e => at,
            _ => match self.epoch_index.get(&e) {
                Some(&at) => at,
                None if self.epochs.len() < MAX_EPOCHS => {
                    // At most MAX_EPOCHS entries, so the index fits.
                    let at = self.epochs.len() as u32;
                    self.epoch_index.insert(e, at);
                    self.epochs.push((e, EpochRaw::default()));
                    at
                }
                None => {
                    self.epochless_events += 1;
                    return;
                }
            },
        };
        self.last_epoch = Some((e, at));
        self.epochs[at as usize].1.add(cat, dur);
    }

    fn metadata(&mut self, ev: &RawEvent<'_>, line: u64, diags: &mut Diagnostics) {
        self.metadata_records += 1;
        let is_cm = str_field(&ev.name).as_deref() == Some("CM")
            && str_field(&ev.arg_name).as_deref() == Some("time_metric");
        if !is_cm {
            return;
        }
        let value = str_field(&ev.arg_value);
        match value.as_deref().and_then(TimeUnit::parse) {
            Some(u) => {
                if self.unit_line.is_some() && u != self.unit {
                    diags.push(
                        line,
                        DiagnosticKind::UnknownTimeUnit,
                        format!(
                            "second time_metric {} differs from the first ({}); using the later one",
                            u.as_str(),
                            self.unit.as_str()
                        ),
                    );
                }
                self.unit = u;
                self.unit_line = Some(line);
            }
            None => diags.push(
                line,
                DiagnosticKind::UnknownTimeUnit,
                format!(
                    "unknown time_metric {}; assuming microseconds",
                    quoted(value.as_deref().unwrap_or("(not a string)"))
                ),
            ),
        }
    }

    /// Folds one parsed line.
    pub fn event(&mut self, ev: &RawEvent<'_>, line: u64, diags: &mut Diagnostics) {
        match ev.phase() {
            Phase::Metadata => return self.metadata(ev, line, diags),
            Phase::Other => {
                self.other_records += 1;
                self.first_other_line.get_or_insert(line);
                return;
            }
            Phase::Complete | Phase::Missing => {}
        }
        self.detect_format(ev);
        let name = str_field(&ev.name).unwrap_or(Cow::Borrowed(""));
        let Some(dur) = self.event_dur(ev, &name, line, diags) else {
            return;
        };
        let ts = event_ts(ev, &name, line, diags);
        let arg_epoch = event_arg_epoch(ev, &name, line, diags);

        let is_marker = self.opts.epoch_marker.as_deref() == Some(name.as_ref());
        if is_marker {
            self.record_marker(ts, dur, arg_epoch, line, diags);
        }

        let cat = str_field(&ev.cat).unwrap_or(Cow::Borrowed(""));
        if self
            .opts
            .category
            .as_deref()
            .is_some_and(|only| only != cat.as_ref())
        {
            return;
        }
        let (cat, name) = self.ids(&cat, &name, line, diags);
        self.cat_raw[cat as usize].add(dur);
        self.name_raw[name as usize].add(dur);

        if self.opts.epoch_marker.is_some() {
            // Markers usually close after the events they contain (a complete event is
            // written when it ends), so the decision waits for the end of the file.
            if !is_marker {
                self.pending.push(Pending {
                    ts,
                    dur,
                    cat,
                    arg_epoch,
                });
            }
        } else if let Some(e) = arg_epoch {
            self.add_epoch(e, cat, dur);
        }
    }

    /// Decides the trace format from the first complete event, if not yet known.
    fn detect_format(&mut self, ev: &RawEvent<'_>) {
        if self.format == TraceFormat::Unknown {
            self.format = match (self.bracketed, &ev.dur) {
                (true, Some(crate::event::Val::Str(_))) => TraceFormat::Bracketed2023,
                (true, _) => TraceFormat::Bracketed2024,
                (false, _) => TraceFormat::Ndjson,
            };
        }
    }

    /// The event's duration, or `None` (counted as skipped, with a diagnostic) when it
    /// is negative, absent or not a number.
    fn event_dur(
        &mut self,
        ev: &RawEvent<'_>,
        name: &str,
        line: u64,
        diags: &mut Diagnostics,
    ) -> Option<f64> {
        let (kind, message) = match num_field(&ev.dur) {
            NumField::Value(d) if d.as_f64() >= 0.0 => return Some(d.as_f64()),
            NumField::Value(d) => (
                DiagnosticKind::BadValue,
                format!(
                    "event {} has negative dur {}; not counted",
                    quoted(name),
                    d.as_f64()
                ),
            ),
            NumField::Absent => (
                DiagnosticKind::MissingDur,
                format!("event {} has no dur; not counted", quoted(name)),
            ),
            NumField::Bad => (
                DiagnosticKind::BadValue,
                format!(
                    "event {} has a dur that is not a number; not counted",
                    quoted(name)
                ),
            ),
        };
        self.skipped_events += 1;
        diags.push(line, kind, message);
        None
    }

    /// Records an epoch marker's span; a marker without `ts` is ignored with a diagnostic.
    fn record_marker(
        &mut self,
        ts: Option<i64>,
        dur: f64,
        arg_epoch: Option<u32>,
        line: u64,
        diags: &mut Diagnostics,
    ) {
        match ts {
            Some(start) => self.markers.push(Marker {
                start,
                // `ts` may be anything up to i64::MAX (a float past it saturates).
                end: start.saturating_add(dur.round() as i64),
                epoch: arg_epoch,
            }),
            None => diags.push(
                line,
                DiagnosticKind::BadValue,
                "epoch marker without ts; ignored".to_string(),
            ),
        }
    }

    /// The indices of an event's category and name, through the pair cache.
    fn ids(&mut self, cat: &str, name: &str, line: u64, diags: &mut Diagnostics) -> (u32, u32) {
        for (k, &at) in self.recent.iter().enumerate() {
            if let Some(p) = self.pair_list.get(at)
                && p.cat.as_ref() == cat
                && p.name.as_ref() == name
            {
                let ids = p.ids;
                self.recent = [at, self.recent[1 - k]];
                return ids;
            }
        }
        let cacheable = cat.len() <= MAX_KEY_BYTES && name.len() <= MAX_KEY_BYTES;
        if cacheable {
            self.pair_key.clear();
            self.pair_key.extend_from_slice(cat.as_bytes());
            self.pair_key.push(0xff);
            self.pair_key.extend_from_slice(name.as_bytes());
            if let Some(&at) = self.pairs.get(self.pair_key.as_slice()) {
                self.recent = [at as usize, self.recent[0]];
                return self.pair_list[at as usize].ids;
            }
        }
        // A pair resolves the same way every time (an index, once given, is kept), so
        // caching the answer changes nothing, diagnostics included: each is said once.
        let ids = (
            self.cat_id(cat, line, diags),
            self.name_id(name, line, diags),
        );
        if cacheable && self.pairs.len() < MAX_PAIRS {
            // At most MAX_PAIRS entries, so the place fits.
            let at = self.pair_list.len();
            self.pairs
                .insert(self.pair_key.as_slice().into(), at as u32);
            self.pair_list.push(Pair {
                cat: cat.into(),
                name: name.into(),
                ids,
            });
            self.recent = [at, self.recent[0]];
        }
        ids
    }

    fn new_name(&mut self, name: &str) -> u32 {
        // At most MAX_NAMES + 1 entries (the overflow bucket), so this fits.
        let i = self.name_keys.len() as u32;
        self.name_index.insert(name.into(), i);
        self.name_keys.push(name.into());
        self.name_raw.push(Raw::default());
        i
    }

    /// The index of the event name's total; past [`MAX_NAMES`] distinct names, new
    /// names go under [`OTHER_NAMES`] (said once).
    fn name_id(&mut self, name: &str, line: u64, diags: &mut Diagnostics) -> u32 {
        let name = key(name);
        if let Some(&i) = self.name_index.get(name.as_ref()) {
            return i;
        }
        if self.name_index.len() < MAX_NAMES {
            return self.new_name(&name);
        }
        if let Some(&i) = self.name_index.get(OTHER_NAMES) {
            return i;
        }
        diags.push(
            line,
            DiagnosticKind::TooMany,
            format!(
                "more than {MAX_NAMES} distinct event names; events of {} and later \
                 new names are counted under {OTHER_NAMES:?}",
                quoted(&name)
            ),
        );
        self.new_name(OTHER_NAMES)
    }

    /// Resolves epochs and converts ticks to seconds. Returns the aggregate, the time
    /// unit, the number of epoch markers and of events left in no epoch for
    /// [`MAX_EPOCHS`].
    pub fn finish(mut self) -> (Aggregate, TimeUnit, u64, u64) {
        self.markers.sort_by_key(|m| m.start);
        let marker_epochs: Vec<u32> = self
            .markers
            .iter()
            .enumerate()
            .map(|(k, m)| m.epoch.unwrap_or(u32::try_from(k + 1).unwrap_or(u32::MAX)))
            .collect();
        for p in std::mem::take(&mut self.pending) {
            let by_marker = p.ts.and_then(|ts| {
                // Epochs are sequential, so the last marker starting at or before `ts`
                // is the only candidate.
                let k = self.markers.partition_point(|m| m.start <= ts);
                let m = self.markers.get(k.checked_sub(1)?)?;
                (ts < m.end || ts == m.start).then(|| marker_epochs[k - 1])
            });
            if let Some(e) = by_marker.or(p.arg_epoch) {
                self.add_epoch(e, p.cat, p.dur);
            }
        }

        let k = self.unit.seconds_per_tick();
        let mut agg = Aggregate::default();
        for (i, raw) in self.cat_raw.iter().enumerate() {
            agg.events += raw.count;
            agg.dur_s += raw.dur * k;
            agg.by_category
                .insert(self.cat_names[i].to_string(), raw.seconds(k));
        }
        agg.by_name = self
            .name_keys
            .into_iter()
            .zip(&self.name_raw)
            .map(|(n, r)| (n.into_string(), r.seconds(k)))
            .collect();
        for (e, er) in self.epochs {
            let by_category = er
                .by_cat
                .iter()
                .map(|(&i, r)| (self.cat_names[i as usize].to_string(), r.seconds(k)))
                .collect();
            let s = er.total.seconds(k);
            agg.by_epoch.insert(
                e,
                EpochStat {
                    count: s.count,
                    dur_s: s.dur_s,
                    by_category,
                },
            );
        }
        (
            agg,
            self.unit,
            self.markers.len() as u64,
            self.epochless_events,
        )
    }
}

/// The event's `ts`, or `None` when absent or (with a diagnostic) not a number.
fn event_ts(ev: &RawEvent<'_>, name: &str, line: u64, diags: &mut Diagnostics) -> Option<i64> {
    match num_field(&ev.ts) {
        NumField::Value(t) => Some(t.as_i64()),
        NumField::Absent => None,
        NumField::Bad => {
            diags.push(
                line,
                DiagnosticKind::BadValue,
                format!("event {} has a ts that is not a number", quoted(name)),
            );
            None
        }
    }
}

/// The event's `args.epoch` as a `u32`, or `None` when absent or (with a diagnostic)
/// not a non-negative integer that fits.
fn event_arg_epoch(
    ev: &RawEvent<'_>,
    name: &str,
    line: u64,
    diags: &mut Diagnostics,
) -> Option<u32> {
    match num_field(&ev.epoch) {
        NumField::Absent => None,
        NumField::Value(Number::Int(e)) if (0..=i64::from(u32::MAX)).contains(&e) => Some(e as u32),
        NumField::Value(Number::Float(f))
            if f >= 0.0 && f.fract() == 0.0 && f <= f64::from(u32::MAX) =>
        {
            Some(f as u32)
        }
        _ => {
            diags.push(
                line,
                DiagnosticKind::BadValue,
                format!(
                    "event {} has an args.epoch that is not a non-negative integer",
                    quoted(name)
                ),
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_units_parse_dftracer_spellings() {
        assert_eq!(TimeUnit::parse("US"), Some(TimeUnit::Microseconds));
        assert_eq!(TimeUnit::parse("NS"), Some(TimeUnit::Nanoseconds));
        assert_eq!(TimeUnit::parse("ms"), Some(TimeUnit::Milliseconds));
        assert_eq!(TimeUnit::parse("S"), Some(TimeUnit::Seconds));
        assert_eq!(TimeUnit::parse("fortnights"), None);
    }

    #[test]
    fn merge_adds_everything() {
        let mut a = Aggregate::default();
        let mut b = Aggregate {
            events: 2,
            dur_s: 3.0,
            ..Default::default()
        };
        b.by_category.insert(
            "compute".into(),
            Stat {
                count: 2,
                dur_s: 3.0,
            },
        );
        b.by_name.insert(
            "forward".into(),
            Stat {
                count: 2,
                dur_s: 3.0,
            },
        );
        let mut es = EpochStat {
            count: 2,
            dur_s: 3.0,
            ..Default::default()
        };
        es.by_category.insert(
            "compute".into(),
            Stat {
                count: 2,
                dur_s: 3.0,
            },
        );
        b.by_epoch.insert(1, es);
        a.merge(&b);
        a.merge(&b);
        assert_eq!(a.events, 4);
        assert_eq!(
            a.by_category["compute"],
            Stat {
                count: 4,
                dur_s: 6.0
            }
        );
        assert_eq!(a.by_name["forward"].count, 4);
        assert_eq!(
            a.by_epoch[&1].by_category["compute"],
            Stat {
                count: 4,
                dur_s: 6.0
            }
        );
    }

    #[test]
    fn epoch_seconds_picks_category_or_all() {
        let mut s = TraceSummary::default();
        let mut es = EpochStat {
            count: 3,
            dur_s: 5.0,
            ..Default::default()
        };
        es.by_category.insert(
            "compute".into(),
            Stat {
                count: 2,
                dur_s: 4.0,
            },
        );
        s.total.by_epoch.insert(1, es);
        s.total.by_epoch.insert(
            2,
            EpochStat {
                count: 1,
                dur_s: 1.0,
                ..Default::default()
            },
        );
        assert_eq!(
            epoch_seconds(&s, None),
            BTreeMap::from([(1, 5.0), (2, 1.0)])
        );
        assert_eq!(
            epoch_seconds(&s, Some("compute")),
            BTreeMap::from([(1, 4.0)])
        );
    }
}
