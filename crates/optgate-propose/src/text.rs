//! The experiment file's text as top-level blocks (a key at column 0 and its indented
//! lines), so that propose adds to the user's file without re-writing it: comments,
//! order and layout stay as they were.

use thiserror::Error;

/// A problem adding to the file's text.
#[derive(Debug, Error, PartialEq)]
pub enum TextError {
    #[error(
        "line {line}: `{key}:` is written in flow style (`[…]` or `{{…}}`); write it as a block (one entry per line) so that propose can add to it"
    )]
    FlowStyle { key: String, line: usize },
}

/// One top-level key's lines: `start` is its key's line, `end` one past its last line that
/// is neither blank nor a comment (0-based).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    pub key: String,
    pub start: usize,
    pub end: usize,
}

/// The key a column-0 line starts, if it starts one.
fn key_of(line: &str) -> Option<&str> {
    let first = line.chars().next()?;
    if !(first.is_ascii_alphanumeric() || first == '_') {
        return None;
    }
    let (key, _) = line.split_once(':')?;
    key.chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_')
        .then_some(key)
}

fn is_content(line: &str) -> bool {
    let t = line.trim_start();
    !t.is_empty() && !t.starts_with('#')
}

/// The top-level blocks of `text`, in order.
pub fn blocks(text: &str) -> Vec<Block> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out: Vec<Block> = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if let Some(key) = key_of(line) {
            out.push(Block {
                key: key.to_string(),
                start: i,
                end: i + 1,
            });
        } else if is_content(line)
            && !line.starts_with("---")
            && let Some(b) = out.last_mut()
        {
            b.end = i + 1;
        }
    }
    out
}

/// `text` without the top-level blocks named in `keys`.
pub fn remove_keys(text: &str, keys: &[&str]) -> String {
    let drop: Vec<Block> = blocks(text)
        .into_iter()
        .filter(|b| keys.contains(&b.key.as_str()))
        .collect();
    let mut out = String::new();
    for (i, line) in text.lines().enumerate() {
        if !drop.iter().any(|b| (b.start..b.end).contains(&i)) {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// The indentation of `key`'s block entries, or None when `text` has no such key.
/// Errors when the key's value is on its own line (flow style or a scalar).
pub fn entry_indent(text: &str, key: &str) -> Result<Option<(Block, usize)>, TextError> {
    let Some(b) = blocks(text).into_iter().find(|b| b.key == key) else {
        return Ok(None);
    };
    let lines: Vec<&str> = text.lines().collect();
    let after = lines[b.start].split_once(':').map_or("", |p| p.1);
    let after = after.split(" #").next().unwrap_or("").trim();
    let entry = lines[b.start + 1..b.end].iter().find(|l| is_content(l));
    match (after.is_empty(), entry) {
        (true, Some(l)) => {
            let indent = l.len() - l.trim_start().len();
            Ok(Some((b, indent)))
        }
        _ => Err(TextError::FlowStyle {
            key: key.to_string(),
            line: b.start + 1,
        }),
    }
}

/// `text` with `lines` inserted before line `at` (0-based), ending with a newline.
pub fn insert_at(text: &str, at: usize, lines: &str) -> String {
    let mut out = String::new();
    for (i, line) in text.lines().enumerate() {
        if i == at {
            out.push_str(lines);
        }
        out.push_str(line);
        out.push('\n');
    }
    if at >= text.lines().count() {
        out.push_str(lines);
    }
    out
}

/// `s` as a double-quoted YAML scalar.
pub fn quote(s: &str) -> String {
    let mut out = String::from('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `s` made fit for a one-line YAML comment.
pub fn comment(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}
