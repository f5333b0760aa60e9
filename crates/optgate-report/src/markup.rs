//! Escaping text for the formats a report is written in: HTML and XML ([`escape`]: the HTML
//! report, the JUnit XML), Markdown ([`markdown_text`]) and CSV ([`csv_cell`]). Every value a
//! report shows from input passes through the one of its format.

/// `text` safe as HTML or XML element content and as a quoted attribute value: `&`, `<`,
/// `>`, `"` and `'` become character references, and the characters XML 1.0 does not
/// allow at all (C0 controls other than tab, newline and carriage return; U+FFFE, U+FFFF)
/// become U+FFFD, so a hostile value can neither open markup nor make the file unreadable.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

/// `text` as Markdown that shows it and nothing more: `<` and `>` become character
/// references (no raw HTML from input), so does a `&` that would start one (`&lt;` in
/// input shows as written; a lone `&`, as in "frequency & power", stays as it is), `|` is
/// escaped (a table cell cannot end early), and line breaks (`\n`, `\r`) become spaces
/// (no heading, list or row can start inside it).
pub fn markdown_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for (i, c) in text.char_indices() {
        match c {
            '&' if starts_reference(&text[i + 1..]) => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '|' => out.push_str("\\|"),
            '\n' | '\r' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// Whether `rest` (what follows a `&`) makes it a character reference: `name;`, `#123;`
/// or `#x1F;`.
fn starts_reference(rest: &str) -> bool {
    let body = rest.split(';').next().unwrap_or("");
    rest.len() > body.len()
        && !body.is_empty()
        && body
            .chars()
            .enumerate()
            .all(|(k, c)| c.is_ascii_alphanumeric() || (k == 0 && c == '#'))
}

/// The first characters that make a spreadsheet read a cell as a formula (`=`, `+`, `-`,
/// `@`) or that some strip before doing so (tab, carriage return).
const FORMULA_STARTS: [char; 6] = ['=', '+', '-', '@', '\t', '\r'];

/// One CSV cell for a reader that may be a spreadsheet: a cell that starts like a formula
/// and is not a number gets a leading `'` (so `=cmd|' /C calc'!A0` stays text while
/// `-4.0` stays a number), then RFC 4180 quoting when it holds `,`, `"`, `\n` or `\r`.
pub fn csv_cell(text: &str) -> String {
    let is_number = text.parse::<f64>().is_ok() && text.contains(|c: char| c.is_ascii_digit());
    let text = if text.starts_with(FORMULA_STARTS) && !is_number {
        format!("'{text}")
    } else {
        text.to_string()
    };
    csv_quoted(&text)
}

/// RFC 4180 quoting alone (a file optgate reads back, such as `samples.csv`): the cell in
/// double quotes, its quotes doubled, when it holds `,`, `"`, `\n` or `\r`.
pub fn csv_quoted(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
}

/// An `id` attribute value made of ASCII letters, digits and `-` only, prefixed so that
/// it starts with a letter: `id("plot", 3)` is `plot-3`.
pub fn id(prefix: &str, n: usize) -> String {
    let clean: String = prefix
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    format!("id-{clean}-{n}")
}

/// `svg` (one SVG document) as an image for assistive technology: `role="img"`, labelled
/// by a `<title>` (the first child) holding `title`. Anything before `<svg` (an XML
/// declaration) is dropped.
pub fn inline_svg(svg: &str, label: &str, title: &str) -> String {
    let Some(start) = svg.find("<svg") else {
        return String::new();
    };
    let svg = &svg[start..];
    let Some(end) = svg.find('>') else {
        return String::new();
    };
    let (open, rest) = svg.split_at(end);
    format!(
        "{open} role=\"img\" aria-labelledby=\"{label}\"><title id=\"{label}\">{}</title>{}",
        escape(title),
        rest[1..].trim_end()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_characters_become_references() {
        assert_eq!(
            escape(r#"<script>alert("x" & 'y')</script>"#),
            "&lt;script&gt;alert(&quot;x&quot; &amp; &#39;y&#39;)&lt;/script&gt;"
        );
        assert_eq!(escape("plain text, 1.5× ± ü"), "plain text, 1.5× ± ü");
        // Already-escaped text is escaped again: what was written is what is shown.
        assert_eq!(escape("&lt;"), "&amp;lt;");
    }

    #[test]
    fn characters_xml_forbids_are_replaced() {
        assert_eq!(
            escape("a\u{0}b\u{1b}c\u{FFFE}"),
            "a\u{FFFD}b\u{FFFD}c\u{FFFD}"
        );
        assert_eq!(escape("tab\tnl\ncr\r"), "tab\tnl\ncr\r");
    }

    #[test]
    fn markdown_shows_markup_as_text() {
        assert_eq!(
            markdown_text("a|b\r\n# h <img src=x> & y"),
            "a\\|b  # h &lt;img src=x&gt; & y"
        );
        assert_eq!(
            markdown_text("&lt;script&#62;&#x3c; &amp &;"),
            "&amp;lt;script&amp;#62;&amp;#x3c; &amp &;"
        );
        assert_eq!(markdown_text("plain 1.5× → ok"), "plain 1.5× → ok");
    }

    #[test]
    fn csv_cells_cannot_start_a_formula() {
        assert_eq!(csv_cell("=cmd|' /C calc'!A0"), "'=cmd|' /C calc'!A0");
        assert_eq!(csv_cell("@SUM(A1:A2)"), "'@SUM(A1:A2)");
        assert_eq!(csv_cell("+1+1"), "'+1+1");
        assert_eq!(csv_cell("-x"), "'-x");
        assert_eq!(csv_cell("\t=1"), "'\t=1");
        assert_eq!(csv_cell("\r=1"), "\"'\r=1\"");
        assert_eq!(csv_cell("=1,2"), "\"'=1,2\"");
        // Numbers stay numbers; other text is only quoted.
        assert_eq!(csv_cell("-4.0"), "-4.0");
        assert_eq!(csv_cell("+1.5e3"), "+1.5e3");
        assert_eq!(csv_cell("-inf"), "'-inf");
        assert_eq!(csv_cell("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_quoted("=1"), "=1");
    }

    #[test]
    fn ids_are_plain() {
        assert_eq!(id("plot", 3), "id-plot-3");
        assert_eq!(id("a b<\"", 0), "id-a-b---0");
    }
}
