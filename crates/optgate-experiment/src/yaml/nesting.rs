//! How deep a YAML text nests, found in one pass over its bytes without a YAML library: the
//! parsers behind [`super`] slow down with the square of the depth of flow collections
//! (100,000 `[` took a minute), so the depth is bounded before any of them sees the text.
//!
//! Flow collections (`[`, `{`) are counted outside quoted scalars, comments and block
//! scalars (`|`, `>`); block collections by the columns of their keys and `-` entries. In a
//! well-formed document the count never exceeds the true depth, so nothing a parser would
//! accept within the limit is refused here; the exact count stays with the event pass.

use super::Location;

/// Where `text` first nests deeper than `limit` levels, if it does. Linear in the text.
pub fn first_past(text: &str, limit: usize) -> Option<Location> {
    let mut scan = Scan {
        bytes: text.as_bytes(),
        i: 0,
        line: 1,
        line_begin: 0,
        limit,
        block: Vec::new(),
        flow: 0,
        node_start: true,
        token_col: 0,
        last_block_col: 0,
        block_scalar: None,
    };
    scan.run()
}

/// The flow-mapping indicators, named: a brace in a byte literal reads as an open block
/// to tools that count braces.
const OPEN_BRACE: u8 = 0x7b;
const CLOSE_BRACE: u8 = 0x7d;

#[derive(Clone, Copy, PartialEq)]
enum Quote {
    Single,
    Double,
}

struct Scan<'t> {
    bytes: &'t [u8],
    i: usize,
    /// 1-based line of `i`, and the offset its line begins at.
    line: usize,
    line_begin: usize,
    limit: usize,
    /// Columns of the open block collections, innermost last (strictly increasing).
    block: Vec<usize>,
    /// Open flow collections.
    flow: usize,
    /// Whether a node may start here (so `[`, `'`, `|` are indicators, not scalar text).
    node_start: bool,
    /// Column where the current block-context scalar (a key, if `:` follows) began.
    token_col: usize,
    /// Column of the innermost key or `-` entry on this line: a block scalar's text is
    /// indented more than it.
    last_block_col: usize,
    /// Inside a block scalar's text: the column its lines must be indented past.
    block_scalar: Option<usize>,
}

fn is_blank(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

impl Scan<'_> {
    fn at(&self, i: usize) -> u8 {
        self.bytes.get(i).copied().unwrap_or(b'\n')
    }

    fn col(&self) -> usize {
        self.i - self.line_begin
    }

    fn newline(&mut self) {
        self.i += 1;
        self.line += 1;
        self.line_begin = self.i;
    }

    fn skip_to_line_end(&mut self) {
        while self.i < self.bytes.len() && self.bytes[self.i] != b'\n' {
            self.i += 1;
        }
    }

    /// The depth now, checked against the limit; `col` is where the innermost level began.
    fn deeper(&self, col: usize) -> Option<Location> {
        (self.block.len() + self.flow > self.limit).then_some(Location {
            line: self.line,
            column: col + 1,
        })
    }

    /// A block collection with its entries at `col` (the same one when the innermost
    /// already is there).
    fn open_block(&mut self, col: usize) -> Option<Location> {
        if self.block.last().is_some_and(|&c| c >= col) {
            return None;
        }
        self.block.push(col);
        self.deeper(col)
    }

    fn run(&mut self) -> Option<Location> {
        while self.i < self.bytes.len() {
            let found = if self.flow > 0 {
                self.flow_token()
            } else if self.i == self.line_begin {
                self.line_start()
            } else {
                self.block_token()
            };
            if found.is_some() {
                return found;
            }
        }
        None
    }

    /// A line begun in block context: its indentation closes collections, or it is part of
    /// a block scalar, blank, a comment or a document marker.
    fn line_start(&mut self) -> Option<Location> {
        while self.at(self.i) == b' ' {
            self.i += 1;
        }
        let col = self.col();
        let b = self.at(self.i);
        if b == b'\n' || b == b'\r' {
            self.skip_to_line_end();
            self.newline();
            return None;
        }
        if let Some(threshold) = self.block_scalar {
            if col > threshold {
                self.skip_to_line_end();
                if self.i < self.bytes.len() {
                    self.newline();
                }
                return None;
            }
            self.block_scalar = None;
        }
        let marker =
            |s: &[u8]| self.bytes[self.i..].starts_with(s) && is_blank(self.at(self.i + 3));
        if col == 0 && (b == b'%' || marker(b"---") || marker(b"...")) {
            self.block.clear();
            self.i += if b == b'%' { 0 } else { 3 };
            if b == b'%' {
                self.skip_to_line_end();
            }
        }
        while self.block.last().is_some_and(|&c| c > col) {
            self.block.pop();
        }
        self.node_start = true;
        self.last_block_col = col;
        // A `:` that begins a line is the value of an explicit `? key`: its mapping is at
        // this column, not at the column of a scalar on an earlier line.
        self.token_col = col;
        if self.i == self.line_begin {
            // Nothing consumed (a key at column 0): step into the line's tokens.
            return self.block_token();
        }
        None
    }

    /// One token of a line in block context.
    fn block_token(&mut self) -> Option<Location> {
        let b = self.at(self.i);
        let col = self.col();
        match b {
            b'\n' => {
                self.newline();
                return None;
            }
            b' ' | b'\t' | b'\r' => self.i += 1,
            b'#' if self.i == self.line_begin || is_blank(self.at(self.i - 1)) => {
                self.skip_to_line_end()
            }
            b'-' | b'?' if self.node_start && is_blank(self.at(self.i + 1)) => {
                self.i += 1;
                self.last_block_col = col;
                return self.open_block(col);
            }
            b'[' | OPEN_BRACE if self.node_start => {
                self.token_col = col;
                self.i += 1;
                self.flow = 1;
                self.node_start = true;
                return self.deeper(col);
            }
            b'\'' | b'"' if self.node_start => {
                self.token_col = col;
                self.quoted(if b == b'"' {
                    Quote::Double
                } else {
                    Quote::Single
                });
            }
            b'|' | b'>' if self.node_start => {
                self.block_scalar = Some(self.last_block_col);
                self.skip_to_line_end();
            }
            b'&' | b'!' if self.node_start => self.skip_word(),
            b':' if is_blank(self.at(self.i + 1)) => {
                // The scalar before was a key: its mapping is at the key's column.
                self.i += 1;
                self.node_start = true;
                self.last_block_col = self.token_col;
                return self.open_block(self.token_col);
            }
            _ => {
                if self.node_start {
                    self.token_col = col;
                    self.node_start = false;
                }
                self.i += 1;
            }
        }
        None
    }

    /// One token inside flow collections.
    fn flow_token(&mut self) -> Option<Location> {
        let b = self.at(self.i);
        match b {
            b'\n' => {
                self.newline();
                return None;
            }
            b'[' | OPEN_BRACE => {
                let col = self.col();
                self.i += 1;
                self.flow += 1;
                self.node_start = true;
                return self.deeper(col);
            }
            b']' | CLOSE_BRACE => {
                self.i += 1;
                self.flow -= 1;
                self.node_start = false;
            }
            b',' => {
                self.i += 1;
                self.node_start = true;
            }
            // A value indicator: before a blank or a flow indicator, or right after a
            // quoted (JSON-like) key, as in `{"a":"b"}`.
            b':' | b'?'
                if is_blank(self.at(self.i + 1))
                    || b":,[]{}".contains(&self.at(self.i + 1))
                    || (b == b':' && matches!(self.at(self.i - 1), b'"' | b'\'')) =>
            {
                self.i += 1;
                self.node_start = true;
            }
            b'#' if is_blank(self.at(self.i - 1)) => self.skip_to_line_end(),
            b'\'' | b'"' if self.node_start => self.quoted(if b == b'"' {
                Quote::Double
            } else {
                Quote::Single
            }),
            b'&' | b'!' if self.node_start => self.skip_word(),
            b' ' | b'\t' | b'\r' => self.i += 1,
            _ => {
                self.i += 1;
                self.node_start = false;
            }
        }
        None
    }

    /// An anchor or tag: up to the next blank or flow indicator; a node still starts after.
    fn skip_word(&mut self) {
        while self.i < self.bytes.len() {
            let b = self.bytes[self.i];
            if is_blank(b) || (self.flow > 0 && b",[]{}".contains(&b)) {
                break;
            }
            self.i += 1;
        }
    }

    /// A quoted scalar from its opening quote to its closing one, across lines.
    fn quoted(&mut self, quote: Quote) {
        self.i += 1;
        while self.i < self.bytes.len() {
            match (self.bytes[self.i], quote) {
                (b'\n', _) => {
                    self.newline();
                    continue;
                }
                (b'\\', Quote::Double) => self.i += 1,
                (b'"', Quote::Double) => break,
                (b'\'', Quote::Single) if self.at(self.i + 1) == b'\'' => self.i += 1,
                (b'\'', Quote::Single) => break,
                _ => {}
            }
            self.i += 1;
        }
        self.i += 1;
        self.node_start = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn depth_past(text: &str, limit: usize) -> Option<(usize, usize)> {
        first_past(text, limit).map(|l| (l.line, l.column))
    }

    #[test]
    fn flow_nesting_is_counted_outside_quotes_and_comments() {
        assert_eq!(depth_past("[[[]]]", 3), None);
        assert_eq!(depth_past("[[[[]]]]", 3), Some((1, 4)));
        // Quoted brackets, commented ones and brackets inside plain block scalars are text.
        let text = "a: '[[[['\nb: \"[[[[\\\"[[\"\nc: x[[[[ # [[[[\nd: [it's, {k: '['}]\n";
        assert_eq!(depth_past(text, 3), None);
        assert_eq!(depth_past(text, 2), Some((4, 11)));
        assert_eq!(depth_past("a: [[[x]]]\n", 2), Some((1, 5)));
        // JSON-like keys take their value right after the `:`.
        assert_eq!(depth_past("{\"a\":\"[[[\", \"b\":'{{'}\n", 1), None);
        // A quote inside a plain scalar does not open a quoted scalar.
        assert_eq!(depth_past("a: [it's [[x]]]\n", 2), Some((1, 10)));
    }

    #[test]
    fn block_nesting_is_counted_by_columns() {
        let mut text = String::new();
        for level in 0..40 {
            text.push_str(&format!("{}k{level}:\n", "  ".repeat(level)));
        }
        // As the event pass reports it: the mapping on line 33 is the 33rd level.
        assert_eq!(depth_past(&text, 32), Some((33, 65)));
        assert_eq!(depth_past(&text, 40), None);
        // Compact entries nest on one line.
        assert_eq!(depth_past("- - - - x\n", 3), Some((1, 7)));
        assert_eq!(depth_past("- a: - x\n", 3), None);
        // Siblings and dedents do not add up.
        let text = "a:\n  b: 1\n  c:\n    d: 2\ne:\n  - f: 1\n  - g: [1, 2]\n";
        assert_eq!(depth_past(text, 4), None);
        assert_eq!(depth_past(text, 3), Some((7, 8)));
        assert_eq!(depth_past(text, 2), Some((4, 5)));
    }

    #[test]
    fn block_scalars_are_text() {
        let text = "a: |\n  [[[[[[\n  - - - - -\n\n  x: y: z\nb: >-\n  {{{{{{\n";
        assert_eq!(depth_past(text, 1), None);
        let text = "- k: |\n    [[[[\n  j: [[x]]\n";
        assert_eq!(depth_past(text, 3), Some((3, 7)));
    }
}
