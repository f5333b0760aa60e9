//! What every report format must be whatever text the report holds, as checks shared by
//! the hostile-formats test (`tests/hostile_formats.rs`) and the `report_formats` fuzz
//! target (`fuzz/fuzz_targets/report_formats.rs` includes this file by path): the table
//! sends no control character to a terminal, Markdown carries no raw HTML and no `\r`,
//! no CSV cell starts a spreadsheet formula, the HTML page holds no active markup, and the
//! JUnit XML is well-formed.

/// The first characters a spreadsheet reads as a formula, or strips before doing so.
const FORMULA_STARTS: [char; 6] = ['=', '+', '-', '@', '\t', '\r'];

/// Markup that would run or load something if it came from input: the pages optgate
/// makes use none of it (self-contained, no script).
const ACTIVE_MARKUP: [&str; 10] = [
    "<script",
    "<img",
    "<iframe",
    "<object",
    "<embed",
    "<base",
    "<form",
    "<link",
    "<meta http",
    "javascript:",
];

/// Text shown on a terminal: no control character but newline and tab.
pub fn terminal_inert(what: &str, text: &str) -> Result<(), String> {
    match text
        .chars()
        .find(|&c| c.is_control() && c != '\n' && c != '\t')
    {
        Some(c) => Err(format!("{what}: a raw control character {c:?}")),
        None => Ok(()),
    }
}

/// Markdown: no `\r`, and no `<` that starts a tag, a comment or a declaration, outside
/// fenced blocks and the closing "Method" section.
pub fn markdown_inert(md: &str) -> Result<(), String> {
    // The "Method" section is optgate's own words (the statistics crate writes them; no
    // input reaches it), written as they are: it is not checked.
    let checked = md.split("\n## Method\n").next().unwrap_or(md);
    if let Some(at) = checked.find('\r') {
        let from = checked[..at].rfind('\n').map_or(0, |n| n + 1);
        return Err(format!(
            "markdown: a raw \\r in the line {:?}",
            excerpt(checked, from)
        ));
    }
    // Fenced blocks (the provenance's JSON) are shown as written, never read as HTML.
    let mut fenced = false;
    for line in checked.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
            continue;
        }
        let raw_tag = line.as_bytes().windows(2).position(|w| {
            w[0] == b'<' && (w[1].is_ascii_alphabetic() || matches!(w[1], b'/' | b'!' | b'?'))
        });
        if let (false, Some(at)) = (fenced, raw_tag) {
            return Err(format!("markdown: raw HTML: {:?}", excerpt(line, at)));
        }
    }
    Ok(())
}

/// CSV: every cell (RFC 4180) that starts like a formula is a number.
pub fn csv_inert(csv: &str) -> Result<(), String> {
    for cell in csv_cells(csv)? {
        let number = cell.parse::<f64>().is_ok() && cell.contains(|c: char| c.is_ascii_digit());
        if cell.starts_with(FORMULA_STARTS) && !number {
            return Err(format!(
                "csv: a cell starts a formula: {:?}",
                excerpt(&cell, 0)
            ));
        }
    }
    Ok(())
}

/// The HTML page: none of [`ACTIVE_MARKUP`], in any letter case.
pub fn html_inert(html: &str) -> Result<(), String> {
    let lower = html.to_ascii_lowercase();
    for m in ACTIVE_MARKUP {
        if let Some(at) = lower.find(m) {
            return Err(format!(
                "html: active markup {m:?}: {:?}",
                excerpt(html, at)
            ));
        }
    }
    Ok(())
}

/// JUnit: a well-formed XML document (an XML parser accepts it).
pub fn junit_well_formed(xml: &str) -> Result<(), String> {
    roxmltree::Document::parse(xml)
        .map(|_| ())
        .map_err(|e| format!("junit: not well-formed XML: {e}"))
}

/// The cells of an RFC 4180 text, quotes removed; an unclosed quote is an error.
fn csv_cells(csv: &str) -> Result<Vec<String>, String> {
    let mut cells = Vec::new();
    let mut cell = String::new();
    let mut chars = csv.chars().peekable();
    let mut quoted = false;
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                cell.push('"');
            }
            (true, '"') => quoted = false,
            (true, c) => cell.push(c),
            (false, '"') if cell.is_empty() => quoted = true,
            (false, ',' | '\n') => cells.push(std::mem::take(&mut cell)),
            (false, c) => cell.push(c),
        }
    }
    if quoted {
        return Err("csv: a quoted cell is never closed".into());
    }
    cells.push(cell);
    Ok(cells)
}

fn excerpt(text: &str, at: usize) -> String {
    let start = (0..=at.min(text.len()))
        .rev()
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0);
    text[start..].chars().take(60).collect()
}
