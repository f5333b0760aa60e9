//! What `submit` checks of an experiment text before any parser sees it: its size and its
//! nesting depth, found in one linear pass, so a hostile text (100,000 nested lists in
//! 200 KB) is refused in milliseconds instead of keeping a parser busy for minutes.
//!
//! [`refuse_before_parsing`] is the one entry point; the loader's own linear pre-scan
//! (`optgate_experiment::yaml`) can take its place without any other change here.

use optgate_experiment::yaml::{MAX_DEPTH, MAX_FILE_BYTES};

/// The nesting this scan's estimate may reach before the text is refused unparsed: twice
/// the loader's [`MAX_DEPTH`]. The estimate counts indentation levels, `- `/`? ` indicators
/// and open flow brackets, so it can run ahead of the true depth (a bracket in a block
/// scalar); the margin keeps every file the loader would accept from being refused here,
/// and the loader still applies the exact limit to what passes.
pub const MAX_SCANNED_DEPTH: usize = 2 * MAX_DEPTH;

/// Why `text` is refused before parsing, or `None` when the parser may have it.
pub fn refuse_before_parsing(text: &str) -> Option<String> {
    if text.len() > MAX_FILE_BYTES {
        return Some(format!(
            "the file is {} bytes; experiment files are limited to {MAX_FILE_BYTES} bytes",
            text.len()
        ));
    }
    deeper_than(text, MAX_SCANNED_DEPTH).map(|line| {
        format!(
            "line {line}: nested deeper than {MAX_SCANNED_DEPTH} levels (experiment files \
             may nest {MAX_DEPTH}); refused before parsing"
        )
    })
}

/// The state of the scan between lines.
#[derive(Default)]
struct Scan {
    /// Indentation of each open block level.
    indents: Vec<usize>,
    /// Open `[` and `{`.
    flow: usize,
    /// The quote a quoted scalar still open at the end of the last line began with.
    quote: Option<u8>,
}

/// The first (1-based) line at which the nesting estimate passes `limit`, if any. One pass
/// over the bytes; the indentation stack only grows by one entry per line.
pub fn deeper_than(text: &str, limit: usize) -> Option<usize> {
    let mut scan = Scan::default();
    for (n, line) in text.split('\n').enumerate() {
        if scan.line(line.as_bytes()) > limit {
            return Some(n + 1);
        }
    }
    None
}

impl Scan {
    /// Scans one line; returns the deepest estimate reached on it.
    fn line(&mut self, line: &[u8]) -> usize {
        let indent = line.iter().take_while(|b| **b == b' ').count();
        let content = &line[indent..];
        let blank = content.is_empty() || content[0] == b'#' || content == b"\r";
        if self.flow == 0 && self.quote.is_none() && !blank {
            while self.indents.last().is_some_and(|top| *top >= indent) {
                self.indents.pop();
            }
            self.indents.push(indent);
        }
        let block = self.indents.len();
        let mut deepest = block + self.flow;
        let (mut compact, mut value_start) = (0, true);
        let mut i = indent;
        while i < line.len() {
            let b = line[i];
            let next = line.get(i + 1).copied();
            if let Some(q) = self.quote {
                if b == b'\\' && q == b'"' {
                    i += 1;
                } else if b == q {
                    self.quote = None;
                    value_start = false;
                }
                i += 1;
                continue;
            }
            let spaced = matches!(next, None | Some(b' ' | b'\t' | b'\r'));
            let after_space = i == 0 || matches!(line[i - 1], b' ' | b'\t');
            match b {
                b'#' if after_space => break,
                b' ' | b'\t' | b'\r' => {}
                b'-' | b'?' if value_start && spaced => compact += 1,
                b':' if spaced || self.flow > 0 => value_start = true,
                b'\'' | b'"' if value_start => self.quote = Some(b),
                b'[' | b'{' if value_start || self.flow > 0 => {
                    self.flow += 1;
                    value_start = true;
                }
                b']' | b'}' if self.flow > 0 => {
                    self.flow -= 1;
                    value_start = false;
                }
                b',' if self.flow > 0 => value_start = true,
                _ => value_start = false,
            }
            deepest = deepest.max(block + compact + self.flow);
            i += 1;
        }
        deepest
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Planted bug caught: a scan that ignores flow brackets, `- ` indicators or
    /// indentation lets the matching text through to the parser.
    #[test]
    fn deep_texts_of_every_kind_are_refused_and_the_line_named() {
        let flow = "[".repeat(100_000);
        let mapping = format!("a: {}", "{b: ".repeat(100_000));
        let compact = format!("{}x\n", "- ".repeat(100_000));
        let indented: String = (0..100)
            .map(|i| format!("{}k{i}:\n", " ".repeat(i)))
            .collect();
        for text in [&flow, &mapping, &compact, &indented] {
            let why = refuse_before_parsing(text).expect("refused");
            assert!(why.contains("nested deeper than 64 levels"), "{why}");
        }
        let late = format!("name: x\nvariants:\n  - {}\n", "[".repeat(70));
        assert_eq!(deeper_than(&late, MAX_SCANNED_DEPTH), Some(3));
    }

    /// Planted bug caught: brackets inside quotes, comments or plain scalars counted as
    /// nesting would refuse ordinary files.
    #[test]
    fn brackets_that_open_nothing_do_not_count() {
        let text = format!(
            "name: x # {open}\nargs: ['{open}', \"{open}\"]\ncommand: echo a{open}\n\
             script: |\n  if [ -f x ]; then echo [[a]]; fi\n",
            open = "[".repeat(200)
        );
        assert_eq!(deeper_than(&text, MAX_SCANNED_DEPTH), None, "{text}");
    }

    /// Every experiment file in the repository passes (the estimate leaves them far below
    /// the limit); planted bug caught: a limit at or under the true depth of real files.
    #[test]
    fn the_repository_experiments_pass() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments");
        let mut seen = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            assert_eq!(refuse_before_parsing(&text), None, "{}", path.display());
            assert_eq!(deeper_than(&text, 12), None, "{}", path.display());
            seen += 1;
        }
        assert!(
            seen >= 3,
            "only {seen} experiment files in {}",
            dir.display()
        );
    }

    #[test]
    fn a_text_over_the_size_limit_is_refused_unscanned() {
        let text = "#".repeat(MAX_FILE_BYTES + 1);
        let why = refuse_before_parsing(&text).unwrap();
        assert!(why.contains("limited to 1048576 bytes"), "{why}");
    }
}
