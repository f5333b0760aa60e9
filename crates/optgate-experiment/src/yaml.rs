//! The only module that touches a YAML library. `serde_yaml` (what the users asked for,
//! unmaintained upstream) deserialises; `yaml-rust2`'s event stream gives the line and
//! column of every key and value so that semantic errors can point at the place. Swapping
//! in a maintained fork means changing this file only.

use std::collections::HashMap;

use serde::de::DeserializeOwned;

use crate::limits::quote_prefix;
use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::Marker;

/// Files larger than this are refused before parsing: an experiment file is a page or two,
/// and a huge input is either a mistake or an attack on the parser.
pub const MAX_FILE_BYTES: usize = 1024 * 1024;

/// Deepest nesting of mappings and sequences accepted. A real experiment file nests four or
/// five levels (`variants[0].env.KEY`); the bound keeps every later pass linear in the input.
pub const MAX_DEPTH: usize = 32;

/// Most nodes a document may have once its aliases are expanded. A real experiment file
/// has a few hundred; alias bombs ("billion laughs") are refused at this count, before any
/// library expands them.
pub const MAX_EXPANDED_NODES: u64 = 100_000;

/// A 1-based line and column in the source text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Location {
    pub line: usize,
    pub column: usize,
}

/// A failure of the YAML layer itself: syntax, structure or type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct YamlError {
    pub location: Option<Location>,
    pub message: String,
}

mod nesting;

/// The checks of a source text that need no YAML library, each linear in its length: its
/// size ([`MAX_FILE_BYTES`]), no NUL byte, and nesting within [`MAX_DEPTH`] (a pre-scan
/// that counts `[`, `{` and indentation outside quotes, comments and block scalars). A
/// text that passes is parsed in time linear in its size, so a caller holding a text it
/// has not parsed (the daemon, a submitted file) refuses the hostile ones in milliseconds.
pub fn check_text_limits(text: &str) -> Result<(), YamlError> {
    if text.len() > MAX_FILE_BYTES {
        return Err(YamlError {
            location: None,
            message: format!(
                "the file is {} bytes; experiment files are limited to {} bytes",
                text.len(),
                MAX_FILE_BYTES
            ),
        });
    }
    if let Some(at) = text.find('\0') {
        let before = &text[..at];
        let line = before.matches('\n').count() + 1;
        let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
        return Err(YamlError {
            location: Some(Location { line, column }),
            message: "a NUL byte: experiment files are text, and a shell drops NUL bytes"
                .to_string(),
        });
    }
    match nesting::first_past(text, MAX_DEPTH) {
        Some(location) => Err(YamlError {
            location: Some(location),
            message: depth_message(),
        }),
        None => Ok(()),
    }
}

/// Deserialises `text` into `T`. The text's limits are checked first
/// ([`check_text_limits`]), then one pass over its events ([`prescan`]) refuses what no
/// experiment file needs: NUL characters in values, aliases expanding past
/// [`MAX_EXPANDED_NODES`], duplicate keys. serde_yaml's own recursion and repetition limits
/// stay behind them as a second line.
pub fn from_str<T: DeserializeOwned>(text: &str) -> Result<T, YamlError> {
    check_text_limits(text)?;
    prescan(text)?;
    deserialize(text)
}

fn deserialize<T: DeserializeOwned>(text: &str) -> Result<T, YamlError> {
    serde_yaml::from_str(text).map_err(|e| {
        let location = e.location().map(|l| Location {
            line: l.line(),
            column: l.column(),
        });
        YamlError {
            location,
            message: tidy_serde_message(&e.to_string(), location),
        }
    })
}

/// The document of `text` as a generic JSON value (a campaign file is read this way, so
/// that whatever keys an experiment file has carry over to its stage experiments), after
/// the same limits and pre-scan as [`from_str`]. A mapping key that is not a string is an
/// error.
pub fn to_json_value(text: &str) -> Result<serde_json::Value, YamlError> {
    check_text_limits(text)?;
    prescan(text)?;
    let value: serde_yaml::Value = deserialize(text)?;
    serde_json::to_value(value).map_err(|e| YamlError {
        location: None,
        message: format!("the document cannot be read as plain data: {e}"),
    })
}

/// `value` written as YAML text (a campaign's generated stage experiments). A JSON value
/// always has a YAML form, so this cannot fail in practice; it would give an empty text.
pub fn to_text(value: &serde_json::Value) -> String {
    serde_yaml::to_string(value).unwrap_or_default()
}

/// One pass over the event stream, linear in the input, that refuses NUL characters in
/// values (`"a\0b"`: no argument list or shell can carry one), nesting deeper than
/// [`MAX_DEPTH`], aliases that expand past [`MAX_EXPANDED_NODES`] nodes and a key that
/// appears twice in one mapping (YAML forbids it; serde_yaml keeps the last). Syntax errors
/// are left to the deserialiser, which reports them with more context. Call it after
/// [`check_text_limits`], which bounds the parser's work.
pub fn prescan(text: &str) -> Result<(), YamlError> {
    let mut scan = Prescan::default();
    if let Err(e) = Parser::new_from_str(text).load(&mut scan, false)
        && scan.error.is_none()
        && e.info() == "recursion limit exceeded"
    {
        // The scanner looks ahead through flow collections and gives up past 255 levels
        // before the events reach this pass: the same refusal, at the scanner's place.
        scan.fail(*e.marker(), depth_message());
    }
    scan.error.map_or(Ok(()), Err)
}

fn depth_message() -> String {
    format!("nested deeper than {MAX_DEPTH} levels (the limit of experiment files)")
}

#[derive(Default)]
struct PrescanFrame {
    /// The anchor this node defines (0: none).
    anchor: usize,
    /// Nodes inside it so far, aliases counted at their expanded size.
    nodes: u64,
    /// For a mapping: the scalar keys seen, and whether the next node is a key.
    keys: Option<(std::collections::HashSet<String>, bool)>,
}

#[derive(Default)]
struct Prescan {
    stack: Vec<PrescanFrame>,
    /// Expanded node count of each anchor defined so far.
    anchors: HashMap<usize, u64>,
    total: u64,
    error: Option<YamlError>,
}

impl Prescan {
    fn fail(&mut self, mark: Marker, message: String) {
        if self.error.is_none() {
            self.error = Some(YamlError {
                location: Some(Location {
                    line: mark.line(),
                    column: mark.col() + 1,
                }),
                message,
            });
        }
    }

    /// Accounts a finished node of `nodes` expanded nodes (and the anchor it defines).
    fn finish_node(&mut self, anchor: usize, nodes: u64, mark: Marker) {
        if anchor != 0 {
            self.anchors.insert(anchor, nodes);
        }
        match self.stack.last_mut() {
            Some(parent) => parent.nodes = parent.nodes.saturating_add(nodes),
            None => self.total = self.total.saturating_add(nodes),
        }
        let expanded = self.total + self.stack.iter().map(|f| f.nodes).sum::<u64>();
        if expanded > MAX_EXPANDED_NODES {
            let message = if self.anchors.is_empty() {
                format!(
                    "the document has more than {MAX_EXPANDED_NODES} nodes (the size limit \
                     of experiment files)"
                )
            } else {
                format!(
                    "aliases expand this document past {MAX_EXPANDED_NODES} nodes (the \
                     repetition limit of experiment files)"
                )
            };
            self.fail(mark, message);
        }
    }

    /// Whether the node starting now is a mapping key; flips the mapping to expect a value.
    fn next_is_key(&mut self) -> bool {
        match self.stack.last_mut().and_then(|f| f.keys.as_mut()) {
            Some((_, expect_key)) => {
                let was = *expect_key;
                *expect_key = !was;
                was
            }
            None => false,
        }
    }
}

impl MarkedEventReceiver for Prescan {
    fn on_event(&mut self, ev: Event, mark: Marker) {
        if self.error.is_some() {
            return;
        }
        match ev {
            Event::Scalar(value, _, anchor, _) => {
                if value.contains('\0') {
                    self.fail(
                        mark,
                        "a NUL character (`\\0`) in a value: no shell or argument list can carry one"
                            .to_string(),
                    );
                    return;
                }
                if self.next_is_key() {
                    let (keys, _) = self.stack.last_mut().unwrap().keys.as_mut().unwrap();
                    if !keys.insert(value.clone()) {
                        let shown = quote_prefix(&value);
                        self.fail(mark, format!("duplicate key `{shown}` in this mapping"));
                        return;
                    }
                }
                self.finish_node(anchor, 1, mark);
            }
            Event::Alias(id) => {
                self.next_is_key();
                let nodes = self.anchors.get(&id).copied().unwrap_or(1);
                self.finish_node(0, nodes, mark);
            }
            Event::MappingStart(anchor, _) | Event::SequenceStart(anchor, _) => {
                self.next_is_key();
                if self.stack.len() >= MAX_DEPTH {
                    self.fail(mark, depth_message());
                    return;
                }
                let keys = matches!(ev, Event::MappingStart(..))
                    .then(|| (std::collections::HashSet::new(), true));
                self.stack.push(PrescanFrame {
                    anchor,
                    nodes: 1,
                    keys,
                });
            }
            Event::MappingEnd | Event::SequenceEnd => {
                if let Some(frame) = self.stack.pop() {
                    self.finish_node(frame.anchor, frame.nodes, mark);
                }
            }
            _ => {}
        }
    }
}

/// Most problems one deserialisation reports, so that a file with many typos is answered
/// in one go without an unbounded number of retries.
pub const MAX_DESERIALIZE_ERRORS: usize = 20;

/// Most deserialisations [`from_str_all`] tries in all: each reported problem takes one,
/// a missing key a few more (one per placeholder tried, [`placeholder`]).
const MAX_ATTEMPTS: usize = 4 * MAX_DESERIALIZE_ERRORS;

/// Most bytes [`from_str_all`]'s retries deserialise in all: a large file with many
/// problems gets fewer retries (at least one), so its answer still comes in well under a
/// second.
const MAX_RETRY_BYTES: usize = 8 * 1024 * 1024;

/// Like [`from_str`], but reports every unknown key, badly typed value and missing key at
/// once rather than the first only (serde stops at the first). After each error the
/// document (an already parsed copy) is mended past it — an unknown key or bad value
/// removed, a missing key filled with a placeholder — and deserialisation is tried again,
/// at most [`MAX_ATTEMPTS`] times (fewer for a large text, [`MAX_RETRY_BYTES`]), each linear in the input. Problems of what the mending
/// itself put there are never reported.
pub fn from_str_all<T: DeserializeOwned>(text: &str) -> Result<T, Vec<YamlError>> {
    // A limit refuses the text as a whole: nothing is parsed again to look for more.
    check_text_limits(text).map_err(|e| vec![e])?;
    prescan(text).map_err(|e| vec![e])?;
    let first = match deserialize::<T>(text) {
        Ok(v) => return Ok(v),
        Err(e) => e,
    };
    // A syntax error leaves nothing to retry on.
    let Ok(doc) = serde_yaml::from_str::<serde_yaml::Value>(text) else {
        return Err(vec![first]);
    };
    let mut search = ErrorSearch {
        doc,
        locator: Locator::index(text),
        mended: HashMap::new(),
    };
    let mut last = first.message.clone();
    let mut errors = vec![first];
    let attempts = MAX_ATTEMPTS.min(MAX_RETRY_BYTES / text.len().max(1)).max(1);
    for _ in 0..attempts {
        if errors.len() >= MAX_DESERIALIZE_ERRORS || !search.mend_past(&last) {
            break;
        }
        let Some(message) = search.next_error::<T>() else {
            break;
        };
        if !search.is_of_mending(&message) {
            // The same problem again: mending made no progress.
            if errors.iter().any(|x| x.message == message) {
                break;
            }
            let location = search.location_of(&message);
            errors.push(YamlError {
                location,
                message: message.clone(),
            });
        }
        last = message;
    }
    Err(errors)
}

/// What one serde message says is wrong, by the full path of the entry it is about.
#[derive(Debug, PartialEq)]
enum Problem {
    /// A key the type does not have: `a.b` for "a: unknown field `b`".
    Unknown(String),
    /// A required key that is not there: `a.b` for "a: missing field `b`".
    Missing(String),
    /// A value of the wrong type or content.
    Bad(String),
}

impl Problem {
    /// None for a message with no path to act on (a document that is not a mapping).
    fn of(message: &str) -> Option<Problem> {
        let path = error_path(message)?;
        let named = |marker: &str| {
            let rest = message.split(marker).nth(1)?;
            let key = rest.split('`').next()?;
            Some(join_path(&path, key))
        };
        if message.contains("missing field `") {
            return named("missing field `").map(Problem::Missing);
        }
        if message.contains("unknown field `") {
            return named("unknown field `").map(Problem::Unknown);
        }
        (!path.is_empty()).then_some(Problem::Bad(path))
    }

    fn path(&self) -> &str {
        match self {
            Problem::Unknown(p) | Problem::Missing(p) | Problem::Bad(p) => p,
        }
    }
}

fn join_path(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_string()
    } else {
        format!("{parent}.{key}")
    }
}

/// Whether `path` is `ancestor` or lies inside it (`a.b`, `a.b.c`, `a.b[0]` for `a.b`).
fn is_within(path: &str, ancestor: &str) -> bool {
    path.strip_prefix(ancestor)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[']))
}

/// The document being mended and what was changed in it.
struct ErrorSearch {
    doc: serde_yaml::Value,
    /// Locations are those of the original text (the mended one is never shown).
    locator: Locator,
    /// Each path removed (None) or filled with placeholder number `i` (Some(i)).
    mended: HashMap<String, Option<usize>>,
}

impl ErrorSearch {
    /// Changes the document so that deserialisation can go past the problem `message`
    /// names; false when it cannot be mended (no path, or no placeholder fits).
    fn mend_past(&mut self, message: &str) -> bool {
        let Some(problem) = Problem::of(message) else {
            return false;
        };
        let path = problem.path().to_string();
        let placeholder_number = match (&problem, self.mended.get(&path)) {
            (Problem::Unknown(_), _) => None,
            (Problem::Missing(_), _) => Some(0),
            // A placeholder of the wrong type: the next one.
            (Problem::Bad(_), Some(Some(i))) => Some(i + 1),
            // A bad value in a mapping is removed (its default applies, or it is missing
            // and filled); an element of a list is replaced, keeping the later elements'
            // positions (and paths).
            (Problem::Bad(_), _) if path.ends_with(']') => Some(0),
            (Problem::Bad(_), _) => None,
        };
        let done = match placeholder_number {
            None => set_path(&mut self.doc, &path, None),
            Some(i) => match placeholder(i, message) {
                Some(value) => set_path(&mut self.doc, &path, Some(value)),
                None => false,
            },
        };
        if done {
            self.mended.insert(path, placeholder_number);
        }
        done
    }

    /// Deserialises the mended document; its first error's message, None when it fits.
    fn next_error<T: DeserializeOwned>(&self) -> Option<String> {
        // Through text: serde_yaml names the path of an error (`app.count: …`) only when
        // it deserialises from text.
        let again = serde_yaml::to_string(&self.doc).ok()?;
        let e = serde_yaml::from_str::<T>(&again).err()?;
        let location = e.location().map(|l| Location {
            line: l.line(),
            column: l.column(),
        });
        Some(tidy_serde_message(&e.to_string(), location))
    }

    /// Whether `message` is about what mending changed (a placeholder of the wrong type,
    /// a required key whose bad value was removed): its problem is already reported.
    fn is_of_mending(&self, message: &str) -> bool {
        Problem::of(message)
            .is_some_and(|p| self.mended.keys().any(|mended| is_within(p.path(), mended)))
    }

    /// Where in the original text `message` points: the key of an unknown key, the value
    /// of a bad one, the key of the mapping that lacks a missing one.
    fn location_of(&self, message: &str) -> Option<Location> {
        let parent = error_path(message)?;
        match Problem::of(message)? {
            Problem::Unknown(key) => self.locator.key(&key),
            // As serde_yaml places it when it is the first problem: the document's start.
            Problem::Missing(_) if parent.is_empty() => Some(Location { line: 1, column: 1 }),
            Problem::Missing(_) => self.locator.key(&parent),
            Problem::Bad(_) => self.locator.value(&parent),
        }
    }
}

/// The `i`th value tried for a missing or badly typed entry, until one deserialises: the
/// empty value of each YAML type, then the first name an enum's message lists (`unknown
/// variant ``, expected one of `a`, `b`` → `a`).
fn placeholder(i: usize, message: &str) -> Option<serde_yaml::Value> {
    use serde_yaml::Value;
    let empty = [
        Value::String(String::new()),
        Value::Mapping(serde_yaml::Mapping::new()),
        Value::Sequence(Vec::new()),
        Value::Number(0.into()),
        Value::Bool(false),
    ];
    if let Some(value) = empty.get(i) {
        return Some(value.clone());
    }
    if i > empty.len() {
        return None;
    }
    let listed = message
        .split_once("expected one of `")
        .or(message.split_once("expected `"))?;
    let name = listed.1.split('`').next()?;
    Some(Value::String(name.to_string()))
}

/// The `a.b[2].c` path serde_yaml puts before its message (`a.b[2].c: invalid type …`),
/// the empty path for an error at the document's top level, None for a message without.
fn error_path(message: &str) -> Option<String> {
    const ROOT: [&str; 5] = [
        "unknown field",
        "missing field",
        "invalid type",
        "invalid value",
        "duplicate field",
    ];
    if ROOT.iter().any(|r| message.starts_with(r)) {
        return Some(String::new());
    }
    let (path, _) = message.split_once(": ")?;
    (!path.contains(' ')).then(|| path.to_string())
}

/// Sets the entry at `path` (`a.b[2].c`) of `doc` to `value`, or removes it (None; only
/// from a mapping). False when its parent is not there, or it is not there to remove.
fn set_path(doc: &mut serde_yaml::Value, path: &str, value: Option<serde_yaml::Value>) -> bool {
    let Some(parts) = path_parts(path) else {
        return false;
    };
    let Some((last, parents)) = parts.split_last() else {
        return false;
    };
    let mut node = doc;
    for part in parents {
        let next = match (part, node) {
            (PathPart::Key(k), serde_yaml::Value::Mapping(m)) => m.get_mut(k.as_str()),
            (PathPart::Index(i), serde_yaml::Value::Sequence(s)) => s.get_mut(*i),
            _ => None,
        };
        match next {
            Some(n) => node = n,
            None => return false,
        }
    }
    match (last, node, value) {
        (PathPart::Key(k), serde_yaml::Value::Mapping(m), None) => m.remove(k.as_str()).is_some(),
        (PathPart::Key(k), serde_yaml::Value::Mapping(m), Some(v)) => {
            m.insert(serde_yaml::Value::String(k.clone()), v);
            true
        }
        (PathPart::Index(i), serde_yaml::Value::Sequence(s), Some(v)) if *i < s.len() => {
            s[*i] = v;
            true
        }
        _ => false,
    }
}

/// `a.b[2].c` → `[Key(a), Key(b), Index(2), Key(c)]`; None for a malformed index.
fn path_parts(path: &str) -> Option<Vec<PathPart>> {
    let mut parts = Vec::new();
    for segment in path.split('.') {
        let (key, indices) = match segment.find('[') {
            Some(i) => (&segment[..i], &segment[i..]),
            None => (segment, ""),
        };
        if !key.is_empty() {
            parts.push(PathPart::Key(key.to_string()));
        }
        for idx in indices.split('[').filter(|s| !s.is_empty()) {
            parts.push(PathPart::Index(idx.trim_end_matches(']').parse().ok()?));
        }
    }
    Some(parts)
}

enum PathPart {
    Key(String),
    Index(usize),
}

/// serde_yaml puts " at line L column C" into its messages; the location is reported
/// separately, so drop that one mention (other places it names, like where a quoted
/// scalar started, stay).
fn tidy_serde_message(message: &str, location: Option<Location>) -> String {
    match location {
        Some(l) => message.replacen(&format!(" at line {} column {}", l.line, l.column), "", 1),
        None => message.to_string(),
    }
}

/// Where each key and value of a document sits, addressed by a path such as
/// `variants[1].env.OMP_NUM_THREADS`.
#[derive(Debug, Default, Clone)]
pub struct Locator {
    values: HashMap<String, Location>,
    keys: HashMap<String, Location>,
}

impl Locator {
    /// Indexes `text`. A text that does not scan yields an empty locator: by the time it is
    /// used, `from_str` has already accepted the text, so this does not happen in practice.
    pub fn index(text: &str) -> Locator {
        let mut builder = LocatorBuilder::default();
        let mut parser = Parser::new_from_str(text);
        if parser.load(&mut builder, false).is_err() {
            return Locator::default();
        }
        builder.locator
    }

    /// The place of the value at `path`, falling back to its nearest located ancestor.
    pub fn value(&self, path: &str) -> Option<Location> {
        let mut p = path.to_string();
        loop {
            if let Some(l) = self.values.get(&p) {
                return Some(*l);
            }
            p = parent_path(&p)?;
        }
    }

    /// Whether the document itself has a value at exactly `path` (no fallback): tells a key
    /// written in the file from one serde filled in with its default.
    pub fn has(&self, path: &str) -> bool {
        self.values.contains_key(path)
    }

    /// The place of the key that introduces `path` (for "unknown key" style messages).
    pub fn key(&self, path: &str) -> Option<Location> {
        self.keys.get(path).copied().or_else(|| self.value(path))
    }

    /// The path of the key or value written at `location` (the inverse of [`Locator::key`]
    /// and [`Locator::value`]); the deepest when several start there.
    pub fn path_at(&self, location: Location) -> Option<String> {
        self.keys
            .iter()
            .chain(self.values.iter())
            .filter(|(_, l)| **l == location)
            .map(|(p, _)| p.clone())
            .max_by_key(|p| p.len())
    }
}

fn parent_path(path: &str) -> Option<String> {
    if path.is_empty() {
        return None;
    }
    let cut = path.rfind(['.', '[']).unwrap_or(0);
    Some(path[..cut].to_string())
}

enum Frame {
    Mapping { path: String, key: Option<String> },
    Sequence { path: String, index: usize },
}

#[derive(Default)]
struct LocatorBuilder {
    stack: Vec<Frame>,
    locator: Locator,
}

impl LocatorBuilder {
    /// The path of the node that starts now, or None when the node is a mapping key.
    fn node_path(&mut self) -> Option<String> {
        match self.stack.last_mut() {
            None => Some(String::new()),
            Some(Frame::Sequence { path, index }) => {
                let p = format!("{path}[{index}]");
                *index += 1;
                Some(p)
            }
            Some(Frame::Mapping { key: None, .. }) => None,
            Some(Frame::Mapping { path, key }) => {
                let k = key.take().unwrap_or_default();
                Some(if path.is_empty() {
                    k
                } else {
                    format!("{path}.{k}")
                })
            }
        }
    }
}

impl MarkedEventReceiver for LocatorBuilder {
    fn on_event(&mut self, ev: Event, mark: Marker) {
        let location = Location {
            line: mark.line(),
            column: mark.col() + 1,
        };
        match ev {
            Event::Scalar(value, ..) => match self.node_path() {
                Some(path) => {
                    self.locator.values.insert(path, location);
                }
                None => {
                    if let Some(Frame::Mapping { path, key }) = self.stack.last_mut() {
                        let full = if path.is_empty() {
                            value.clone()
                        } else {
                            format!("{path}.{value}")
                        };
                        self.locator.keys.insert(full, location);
                        *key = Some(value);
                    }
                }
            },
            Event::Alias(_) => {
                if let Some(path) = self.node_path() {
                    self.locator.values.insert(path, location);
                } else if let Some(Frame::Mapping { key, .. }) = self.stack.last_mut() {
                    // A complex (aliased) key: give it a placeholder so the value still pairs.
                    *key = Some("<alias>".to_string());
                }
            }
            Event::MappingStart(..) | Event::SequenceStart(..) => {
                let is_mapping = matches!(ev, Event::MappingStart(..));
                let path = match self.node_path() {
                    Some(p) => p,
                    None => {
                        // A mapping or sequence used as a key: unusual; index it under a
                        // placeholder so the structure stays balanced.
                        if let Some(Frame::Mapping { key, .. }) = self.stack.last_mut() {
                            *key = Some("<complex>".to_string());
                        }
                        "<complex>".to_string()
                    }
                };
                self.locator.values.entry(path.clone()).or_insert(location);
                self.stack.push(if is_mapping {
                    Frame::Mapping { path, key: None }
                } else {
                    Frame::Sequence { path, index: 0 }
                });
            }
            Event::MappingEnd | Event::SequenceEnd => {
                self.stack.pop();
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    #[test]
    fn locates_nested_keys_and_values() {
        let text = "name: x\nvariants:\n  - name: a\n    env: { K: v }\n  - name: b\n";
        let loc = Locator::index(text);
        assert_eq!(loc.value("name"), Some(Location { line: 1, column: 7 }));
        assert_eq!(loc.key("variants"), Some(Location { line: 2, column: 1 }));
        assert_eq!(
            loc.value("variants[1].name"),
            Some(Location {
                line: 5,
                column: 11
            })
        );
        assert_eq!(
            loc.value("variants[0].env.K"),
            Some(Location {
                line: 4,
                column: 15
            })
        );
        // Unknown paths fall back to the nearest ancestor.
        assert_eq!(loc.value("variants[1].nope"), loc.value("variants[1]"));
    }

    #[test]
    fn deep_nesting_is_refused_at_the_depth_limit() {
        let deep = "[".repeat(100_000) + &"]".repeat(100_000);
        let err = from_str::<serde_yaml::Value>(&deep).unwrap_err();
        assert!(
            err.message.contains("deeper than 32 levels"),
            "{}",
            err.message
        );
        // Block nesting is caught at the first level too many.
        let mut block = String::new();
        for level in 0..40 {
            block.push_str(&format!("{}k{level}:\n", "  ".repeat(level)));
        }
        let err = from_str::<serde_yaml::Value>(&block).unwrap_err();
        assert!(
            err.message.contains("deeper than 32 levels"),
            "{}",
            err.message
        );
        assert_eq!(err.location.map(|l| l.line), Some(MAX_DEPTH + 1));
        // One level less is accepted.
        let ok = "[".repeat(MAX_DEPTH) + &"]".repeat(MAX_DEPTH);
        assert!(from_str::<serde_yaml::Value>(&ok).is_ok());
    }

    /// The deepest nesting the event stream of `text` reaches (None when it does not parse).
    fn event_depth(text: &str) -> Option<usize> {
        struct Depth(usize, usize);
        impl MarkedEventReceiver for Depth {
            fn on_event(&mut self, ev: Event, _: Marker) {
                match ev {
                    Event::MappingStart(..) | Event::SequenceStart(..) => {
                        self.0 += 1;
                        self.1 = self.1.max(self.0);
                    }
                    Event::MappingEnd | Event::SequenceEnd => self.0 -= 1,
                    _ => {}
                }
            }
        }
        let mut d = Depth(0, 0);
        Parser::new_from_str(text).load(&mut d, false).ok()?;
        Some(d.1)
    }

    #[test]
    fn the_text_pre_scan_never_counts_deeper_than_the_parser() {
        // Every experiment and fuzz seed of the repository, and some tricky texts: the
        // pre-scan refuses none of them at their own depth (a planted over-count, e.g.
        // brackets inside quotes or block scalars counted, fails here).
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let mut texts: Vec<String> = ["experiments", "fuzz/seeds/experiment_load"]
            .iter()
            .flat_map(|d| std::fs::read_dir(root.join(d)).unwrap())
            .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
            .collect();
        assert!(
            texts.len() >= 10,
            "the repository's experiments were not found"
        );
        // And the YAML examples of the reference.
        let doc = std::fs::read_to_string(root.join("docs/EXPERIMENT.md")).unwrap();
        texts.extend(
            doc.split("```yaml\n")
                .skip(1)
                .filter_map(|b| b.split("```").next().map(String::from)),
        );
        texts.extend(
            [
                "a: |\n  [[[[ {{{{\n  - - - -\nb: [x, '[[', \"{{\\\"\"]\n",
                "k: it's [not] a flow # [[[[\nj: >-\n  {{\n\n  ]]\n",
                "- - - [a, {b: [c]}]\n- ? complex\n  : value\n",
                "---\na: &x [1, [2]]\nb: *x\n...\n",
                "a:\n- b: 1\n  c: [1, {d: 2}]\n- e\n",
                "\"quoted: key\": {x: 'it''s [', y: \"]\"}\n",
                "a:\n  b:\n    ? explicit key\n    : x\n",
                "{\"json\":\"[[[\", \"k\":[\"{{\", {\"a\":'['}]}\n",
            ]
            .map(String::from),
        );
        // A NUL byte ends what the parser reads (its depth is of the text before it).
        for text in texts.iter().filter(|t| !t.contains('\0')) {
            let Some(depth) = event_depth(text) else {
                continue;
            };
            assert_eq!(nesting::first_past(text, depth), None, "{text}");
            // The hostile seeds are deeper than the limit or too large on
            // purpose: only a text within every limit must pass them.
            let within = depth <= MAX_DEPTH && text.len() <= MAX_FILE_BYTES;
            if within {
                assert!(check_text_limits(text).is_ok(), "{text}");
            }
        }
    }

    /// A random YAML text of nested block and flow collections, with brackets, quotes and
    /// `#` inside scalars, comments and block scalars where they are text.
    fn random_yaml(rng: &mut impl rand::Rng, depth: usize, indent: usize) -> String {
        const SCALARS: [&str; 8] = [
            "x[y",
            "it's",
            "'[['",
            "\"{\\\"[\"",
            "a#b",
            "'it''s ['",
            "\"]\"",
            "plain",
        ];
        let pad = " ".repeat(indent);
        let scalar = |rng: &mut dyn rand::RngCore| SCALARS[rng.next_u32() as usize % SCALARS.len()];
        let flow = |rng: &mut dyn rand::RngCore, d: usize| {
            let mut f = String::new();
            for _ in 0..d {
                f.push_str(if rand::Rng::random_bool(rng, 0.5) {
                    "["
                } else {
                    "{k: "
                });
            }
            f.push_str(scalar(rng));
            f
        };
        let close = |f: &str| {
            f.chars()
                .rev()
                .filter(|c| *c == '[' || *c == '{')
                .map(|c| if c == '[' { ']' } else { '}' })
                .collect::<String>()
        };
        let mut out = String::new();
        // One entry kind per collection: a sequence's entries all start with `-`.
        let sequence = rng.random_bool(0.5);
        for k in 0..1 + rng.random_range(0..3) {
            let entry = if !sequence {
                format!("{pad}k{k}:")
            } else {
                format!("{pad}- k{k}:")
            };
            let inner = if entry.contains('-') {
                indent + 2
            } else {
                indent
            };
            out.push_str(&entry);
            match rng.random_range(0..6) {
                0..=2 if depth > 0 => {
                    out.push('\n');
                    out.push_str(&random_yaml(rng, depth - 1, inner + 2));
                }
                3 => {
                    let levels = rng.random_range(0..4);
                    let f = flow(rng, levels);
                    out.push_str(&format!(" {f}{} # [[ '\n", close(&f)));
                }
                4 => out.push_str(&format!(" |\n{pad}    [[[ {{ '\n\n{pad}    - - x\n")),
                _ => out.push_str(&format!(" {}\n", scalar(rng))),
            }
        }
        out
    }

    #[test]
    fn the_text_pre_scan_never_counts_deeper_than_the_parser_on_random_texts() {
        use rand::SeedableRng;
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let (mut parsed, mut deepest) = (0, 0);
        for _ in 0..3000 {
            let text = random_yaml(&mut rng, 6, 0);
            let Some(depth) = event_depth(&text) else {
                continue;
            };
            parsed += 1;
            deepest = deepest.max(depth);
            assert_eq!(
                nesting::first_past(&text, depth),
                None,
                "depth {depth}:\n{text}"
            );
        }
        assert!(parsed > 1000, "only {parsed} random texts parsed");
        assert!(deepest >= 10, "the random texts nest only {deepest} levels");
    }

    #[test]
    fn the_text_pre_scan_refuses_deep_nesting_before_any_parser() {
        // Balanced, so a parser would read it all (quadratically): the pre-scan stops at
        // the 33rd level, in the text's own line and column.
        for (open, close) in [("[", "]"), ("{\"a\": ", "}"), ("{a: ", "}")] {
            let deep = format!(
                "description: {}x{}\n",
                open.repeat(30_000),
                close.repeat(30_000)
            );
            let err = check_text_limits(&deep).unwrap_err();
            assert!(
                err.message.contains("deeper than 32 levels"),
                "{}",
                err.message
            );
            assert_eq!(err.location.map(|l| l.line), Some(1));
        }
        let compact = format!("x:\n{}1\n", "- ".repeat(300_000));
        let err = check_text_limits(&compact).unwrap_err();
        // One level later than the parser: a sequence at its mapping's own column is not
        // counted (a count that may be low, never high).
        assert_eq!(
            err.location,
            Some(Location {
                line: 2,
                column: 65
            })
        );
        let indented: String = (0..40)
            .map(|i| format!("{}k{i}:\n", " ".repeat(i)))
            .collect();
        let err = check_text_limits(&indented).unwrap_err();
        assert_eq!(err.location.map(|l| l.line), Some(MAX_DEPTH + 1));
    }

    #[test]
    fn a_nul_character_in_any_value_is_refused() {
        for text in [
            "a: \"x\\0y\"\n",
            "a: [ok, \"x\\x00y\"]\n",
            "a: { k: \"\\u0000\" }\n",
        ] {
            let err = from_str::<serde_yaml::Value>(text).unwrap_err();
            assert!(
                err.message.contains("NUL character"),
                "{text}: {}",
                err.message
            );
            assert_eq!(err.location.map(|l| l.line), Some(1));
        }
    }

    #[test]
    fn a_long_duplicate_key_is_quoted_by_its_prefix() {
        let key = "k".repeat(70_000);
        let text = format!("? {key}\n: 1\n? {key}\n: 2\n");
        let err = from_str::<serde_yaml::Value>(&text).unwrap_err();
        assert!(err.message.len() < 200, "{}", err.message.len());
        assert!(err.message.contains("(70000 bytes)"), "{}", err.message);
    }

    #[test]
    fn duplicate_keys_and_nul_bytes_are_refused_where_they_are() {
        let err = from_str::<serde_yaml::Value>("a: 1\nb:\n  c: 1\n  c: 2\n").unwrap_err();
        assert_eq!(err.message, "duplicate key `c` in this mapping");
        assert_eq!(err.location, Some(Location { line: 4, column: 3 }));
        // The same key in two different mappings is fine.
        assert!(from_str::<serde_yaml::Value>("a: { c: 1 }\nb: { c: 1 }\n").is_ok());
        let err = from_str::<serde_yaml::Value>("a: 1\nb: x\0y\n").unwrap_err();
        assert!(err.message.contains("NUL"), "{}", err.message);
        assert_eq!(err.location, Some(Location { line: 2, column: 5 }));
    }

    #[test]
    fn alias_bombs_hit_the_repetition_limit() {
        let mut bomb = String::from("a: &a [x, x, x, x, x, x, x, x, x]\n");
        for i in 1..10u8 {
            let (p, c) = ((b'a' + i - 1) as char, (b'a' + i) as char);
            bomb.push_str(&format!(
                "{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
            ));
        }
        let err = from_str::<serde_yaml::Value>(&bomb).unwrap_err();
        assert!(err.message.contains("repetition limit"), "{}", err.message);
        // Caught at the alias that crosses the limit: 9^6 > 100,000 nodes, on line 6.
        assert_eq!(err.location.map(|l| l.line), Some(6));
        // A document that is simply large (no aliases) is told so in those words.
        let big = format!("[{}0]", "0,".repeat(MAX_EXPANDED_NODES as usize));
        let Err(err) = from_str::<serde_yaml::Value>(&big) else {
            panic!("a document of more than {MAX_EXPANDED_NODES} nodes was accepted");
        };
        assert!(
            err.message.starts_with("the document has more than"),
            "{}",
            err.message
        );
        // Aliases that stay under the limit are expanded as usual.
        let fine = "a: &a [x, y]\nb: [*a, *a]\n";
        let v: serde_yaml::Value = from_str(fine).unwrap();
        assert_eq!(v["b"][1][1], serde_yaml::Value::from("y"));
        // The locator never expands aliases, so indexing the same text is cheap.
        let loc = Locator::index(&bomb);
        assert!(loc.value("j").is_some());
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Inner {
        command: String,
        #[serde(default)]
        count: u32,
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Outer {
        name: String,
        app: Inner,
        #[serde(default)]
        items: Vec<Inner>,
    }

    #[test]
    fn every_unknown_key_and_bad_value_is_reported_at_once() {
        let text = "name: x\napp:\n  comand: a\n  command: b\n  count: many\nitems:\n  - command: c\n    typo: 1\nextra: 2\n";
        let errors = from_str_all::<Outer>(text).unwrap_err();
        let shown: Vec<(Option<usize>, &str)> = errors
            .iter()
            .map(|e| (e.location.map(|l| l.line), e.message.as_str()))
            .collect();
        assert_eq!(shown.len(), 4, "{shown:#?}");
        assert!(
            shown[0].1.starts_with("app: unknown field `comand`"),
            "{shown:#?}"
        );
        assert_eq!(shown[0].0, Some(3));
        let rest: Vec<_> = shown[1..]
            .iter()
            .map(|(l, m)| (*l, m.split(',').next().unwrap()))
            .collect();
        assert!(
            rest.contains(&(Some(5), "app.count: invalid type: string \"many\"")),
            "{rest:#?}"
        );
        assert!(
            rest.contains(&(Some(8), "items[0]: unknown field `typo`")),
            "{rest:#?}"
        );
        assert!(
            rest.contains(&(Some(9), "unknown field `extra`")),
            "{rest:#?}"
        );
        // A valid document comes back whole; a missing key stops the search.
        assert!(from_str_all::<Outer>("name: x\napp: { command: a }\n").is_ok());
        let errors = from_str_all::<Outer>("app: { command: a, x: 1 }\n").unwrap_err();
        assert_eq!(errors.len(), 2, "{errors:#?}");
        assert!(
            errors[1].message.contains("missing field `name`"),
            "{errors:#?}"
        );
    }

    #[test]
    fn bad_elements_of_one_list_are_each_reported_once() {
        let text = "name: x\napp: { command: a }\nitems:\n  - command: c\n    count: one\n  - command: d\n  - command: e\n    count: two\n";
        let errors = from_str_all::<Outer>(text).unwrap_err();
        let shown: Vec<(Option<usize>, String)> = errors
            .iter()
            .map(|e| {
                (
                    e.location.map(|l| l.line),
                    e.message.split(',').next().unwrap().to_string(),
                )
            })
            .collect();
        assert_eq!(
            shown,
            [
                (
                    Some(5),
                    "items[0].count: invalid type: string \"one\"".to_string()
                ),
                (
                    Some(8),
                    "items[2].count: invalid type: string \"two\"".to_string()
                ),
            ],
            "{errors:#?}"
        );
        // A whole element of the wrong type is reported once, never again for the
        // placeholder put in its stead, and does not hide a later bad element.
        let text = "name: x\napp: { command: a }\nitems: [oops, { command: c }, nope]\n";
        let errors = from_str_all::<Outer>(text).unwrap_err();
        let shown: Vec<&str> = errors
            .iter()
            .map(|e| e.message.split(',').next().unwrap())
            .collect();
        assert_eq!(
            shown,
            [
                "items[0]: invalid type: string \"oops\"",
                "items[2]: invalid type: string \"nope\""
            ],
            "{errors:#?}"
        );
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "lowercase")]
    #[allow(dead_code)]
    enum Kind {
        Local,
        Slurm,
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Required {
        name: String,
        app: Inner,
        count: u32,
        kind: Kind,
        items: Vec<Inner>,
        #[serde(default)]
        after: Vec<Inner>,
    }

    #[test]
    fn missing_keys_of_every_type_hide_nothing_after_them() {
        // A missing string, struct, number, enum and list: each reported once, and the
        // typo after them still found (a placeholder of each type is tried in turn).
        let text = "after:\n  - { command: a, tpyo: 1 }\n";
        let errors = from_str_all::<Required>(text).unwrap_err();
        let mut shown: Vec<&str> = errors
            .iter()
            .map(|e| e.message.split(',').next().unwrap())
            .collect();
        shown.sort_unstable();
        assert_eq!(
            shown,
            [
                "after[0]: unknown field `tpyo`",
                "missing field `app`",
                "missing field `count`",
                "missing field `items`",
                "missing field `kind`",
                "missing field `name`",
            ],
            "{errors:#?}"
        );
        // Nothing is reported about what was filled in for them (`app: {}` lacks
        // `command`), and each one has a place.
        assert!(errors.iter().all(|e| e.location.is_some()), "{errors:#?}");
        // A bad value of a required key is reported once, not again as missing.
        let text = "name: x\napp: { command: a }\ncount: many\nkind: pbs\nitems: []\nafter: [{ command: b, x: 1 }]\n";
        let errors = from_str_all::<Required>(text).unwrap_err();
        let mut shown: Vec<(Option<usize>, &str)> = errors
            .iter()
            .map(|e| {
                (
                    e.location.map(|l| l.line),
                    e.message.split(',').next().unwrap(),
                )
            })
            .collect();
        shown.sort_unstable();
        assert_eq!(
            shown,
            [
                (Some(3), "count: invalid type: string \"many\""),
                (Some(4), "kind: unknown variant `pbs`"),
                (Some(6), "after[0]: unknown field `x`"),
            ],
            "{errors:#?}"
        );
    }

    #[test]
    fn the_number_of_reported_problems_is_bounded() {
        let mut text = "name: x\napp: { command: a }\n".to_string();
        for i in 0..100 {
            text.push_str(&format!("typo{i}: 1\n"));
        }
        let errors = from_str_all::<Outer>(&text).unwrap_err();
        assert_eq!(errors.len(), MAX_DESERIALIZE_ERRORS);
    }

    #[test]
    fn a_large_text_gets_fewer_retries() {
        // 900 KB: each retry deserialises it all again, so at most MAX_RETRY_BYTES of them.
        let mut text = format!(
            "name: x\napp: {{ command: a }}\nitems: [{{ command: '{}' }}]\n",
            "y".repeat(900_000)
        );
        for i in 0..100 {
            text.push_str(&format!("typo{i}: 1\n"));
        }
        let errors = from_str_all::<Outer>(&text).unwrap_err();
        let retries = MAX_RETRY_BYTES / text.len();
        assert_eq!(errors.len(), 1 + retries, "{}", errors.len());
        assert!(errors.len() < MAX_DESERIALIZE_ERRORS);
    }

    #[test]
    fn refuses_huge_input() {
        let text = "a: ".to_string() + &"x".repeat(MAX_FILE_BYTES);
        let err = from_str::<serde_yaml::Value>(&text).unwrap_err();
        assert!(err.message.contains("limited to"), "{}", err.message);
    }
}
