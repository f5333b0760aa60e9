//! Escaping text for HTML and XML (the HTML report, the JUnit XML): every value a report
//! shows passes through [`escape`] before it is written between tags or in an attribute.

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
    fn ids_are_plain() {
        assert_eq!(id("plot", 3), "id-plot-3");
        assert_eq!(id("a b<\"", 0), "id-a-b---0");
    }
}
