//! The only module that touches a YAML library. `serde_yaml` (what the users asked for,
//! unmaintained upstream) deserialises; `yaml-rust2`'s event stream gives the line and
//! column of every key and value so that semantic errors can point at the place. Swapping
//! in a maintained fork means changing this file only.

use std::collections::HashMap;

use serde::de::DeserializeOwned;
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

/// Deserialises `text` into `T`. A linear pre-scan ([`prescan`]) first refuses what no
/// experiment file needs and what would make a parser slow or large: NUL bytes, nesting
/// past [`MAX_DEPTH`], aliases expanding past [`MAX_EXPANDED_NODES`], duplicate keys.
/// serde_yaml's own recursion and repetition limits stay behind it as a second line.
pub fn from_str<T: DeserializeOwned>(text: &str) -> Result<T, YamlError> {
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
    prescan(text)?;
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

/// One pass over the event stream, linear in the input, that refuses NUL bytes, nesting
/// deeper than [`MAX_DEPTH`], aliases that expand past [`MAX_EXPANDED_NODES`] nodes and a
/// key that appears twice in one mapping (YAML forbids it; serde_yaml keeps the last).
/// Syntax errors are left to the deserialiser, which reports them with more context.
pub fn prescan(text: &str) -> Result<(), YamlError> {
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
                if self.next_is_key() {
                    let (keys, _) = self.stack.last_mut().unwrap().keys.as_mut().unwrap();
                    if !keys.insert(value.clone()) {
                        let shown: String = value.chars().take(40).collect();
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

/// Like [`from_str`], but reports every unknown key and badly typed value at once rather
/// than the first only (serde stops at the first). After each error the offending entry is
/// removed from an already parsed copy of the document and deserialisation is tried
/// again, at most [`MAX_DESERIALIZE_ERRORS`] times; each attempt is linear in the input.
pub fn from_str_all<T: DeserializeOwned>(text: &str) -> Result<T, Vec<YamlError>> {
    let first = match from_str::<T>(text) {
        Ok(v) => return Ok(v),
        Err(e) => e,
    };
    let mut errors = vec![first];
    // A syntax error (or a limit) leaves nothing to retry on.
    let Ok(mut doc) = serde_yaml::from_str::<serde_yaml::Value>(text) else {
        return Err(errors);
    };
    let locator = Locator::index(text);
    while errors.len() < MAX_DESERIALIZE_ERRORS {
        let last = &errors[errors.len() - 1].message;
        let Some(path) = offending_path(last) else {
            break;
        };
        if !remove_path(&mut doc, &path) {
            break;
        }
        // Through text again: serde_yaml names the path of an error (`app.count: …`) only
        // when it deserialises from text. Locations come from the original text's locator.
        let Ok(again) = serde_yaml::to_string(&doc) else {
            break;
        };
        match serde_yaml::from_str::<T>(&again) {
            Ok(_) => break,
            Err(e) => {
                let message = tidy_serde_message(
                    &e.to_string(),
                    e.location().map(|l| Location {
                        line: l.line(),
                        column: l.column(),
                    }),
                );
                // Removing a required entry that had a bad value makes it "missing": that
                // is the same problem again, already reported.
                let removed = path.rsplit('.').next().unwrap_or(&path);
                if message.contains(&format!("missing field `{removed}`")) {
                    break;
                }
                let location = error_path(&message).and_then(|p| {
                    if message.contains("unknown field `") {
                        locator.key(&offending_path(&message).unwrap_or(p))
                    } else {
                        locator.value(&p)
                    }
                });
                // The entry just blanked is still wrong (an element that must be a mapping
                // cannot be null either): its problem is already reported.
                if errors.iter().any(|x| x.message == message)
                    || error_path(&message).as_deref() == Some(path.as_str())
                {
                    break;
                }
                errors.push(YamlError { location, message });
            }
        }
    }
    Err(errors)
}

/// The `a.b[2].c` path serde_yaml puts before its message (`a.b[2].c: invalid type …`),
/// None for an error at the document's top level.
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

/// The entry to drop so that deserialisation can go on past `message`: the unknown key
/// itself, or the badly typed value. None when dropping cannot help (a missing key).
fn offending_path(message: &str) -> Option<String> {
    let path = error_path(message)?;
    if message.contains("missing field") {
        return None;
    }
    if let Some(rest) = message.split("unknown field `").nth(1) {
        let key = rest.split('`').next()?;
        return Some(if path.is_empty() {
            key.to_string()
        } else {
            format!("{path}.{key}")
        });
    }
    (!path.is_empty()).then_some(path)
}

/// Removes the entry at `path` (`a.b[2].c`) from `doc`; false when it is not there.
fn remove_path(doc: &mut serde_yaml::Value, path: &str) -> bool {
    let mut parts: Vec<PathPart> = Vec::new();
    for segment in path.split('.') {
        let (key, indices) = match segment.find('[') {
            Some(i) => (&segment[..i], &segment[i..]),
            None => (segment, ""),
        };
        if !key.is_empty() {
            parts.push(PathPart::Key(key.to_string()));
        }
        for idx in indices.split('[').filter(|s| !s.is_empty()) {
            match idx.trim_end_matches(']').parse() {
                Ok(i) => parts.push(PathPart::Index(i)),
                Err(_) => return false,
            }
        }
    }
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
    match (last, node) {
        (PathPart::Key(k), serde_yaml::Value::Mapping(m)) => m.remove(k.as_str()).is_some(),
        // Keep the positions of later elements (and their paths): blank it instead.
        (PathPart::Index(i), serde_yaml::Value::Sequence(s)) if *i < s.len() => {
            s[*i] = serde_yaml::Value::Null;
            true
        }
        _ => false,
    }
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
        // A whole element of the wrong type is reported once, never again as "null" after
        // it was blanked.
        let text = "name: x\napp: { command: a }\nitems: [oops, { command: c }, nope]\n";
        let errors = from_str_all::<Outer>(text).unwrap_err();
        assert_eq!(errors.len(), 1, "{errors:#?}");
        assert!(
            errors[0]
                .message
                .starts_with("items[0]: invalid type: string \"oops\"")
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
    fn refuses_huge_input() {
        let text = "a: ".to_string() + &"x".repeat(MAX_FILE_BYTES);
        let err = from_str::<serde_yaml::Value>(&text).unwrap_err();
        assert!(err.message.contains("limited to"), "{}", err.message);
    }
}
