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

/// Deserialises `text` into `T`. Aliases are expanded by serde_yaml under its own
/// repetition limit and nesting is capped by its recursion limit, so alias bombs and
/// deeply nested input end in an error rather than exhausting memory or stack.
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
    fn deep_nesting_hits_the_recursion_limit() {
        let deep = "[".repeat(100_000) + &"]".repeat(100_000);
        let err = from_str::<serde_yaml::Value>(&deep).unwrap_err();
        assert!(err.message.contains("recursion limit"), "{}", err.message);
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
        // The locator never expands aliases, so indexing the same text is cheap.
        let loc = Locator::index(&bomb);
        assert!(loc.value("j").is_some());
    }

    #[test]
    fn refuses_huge_input() {
        let text = "a: ".to_string() + &"x".repeat(MAX_FILE_BYTES);
        let err = from_str::<serde_yaml::Value>(&text).unwrap_err();
        assert!(err.message.contains("limited to"), "{}", err.message);
    }
}
