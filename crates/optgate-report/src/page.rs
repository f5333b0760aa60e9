//! The frame every HTML page of optgate shares: the doctype, the title, the inline styles
//! and the colour palette (no file or network reference).

use std::fmt::Write as _;

use crate::markup::escape;

/// The page's colours as (CSS class, text colour, background), every pair at a WCAG AA
/// contrast of at least 4.5:1 (checked by this module's test). The body is the first.
pub const PALETTE: [(&str, &str, &str); 6] = [
    ("body", "#1b1b1b", "#ffffff"),
    ("accept", "#0b5c2e", "#e3f3e8"),
    ("reject", "#8a1616", "#fbe8e8"),
    ("inconclusive", "#5a4200", "#fff2cc"),
    ("not_applicable", "#383838", "#e8e8e8"),
    ("failed", "#6b1a5a", "#f6e6f2"),
];

const STYLE: &str = "\
body{font-family:sans-serif;line-height:1.45;margin:1.5rem auto;max-width:75rem;padding:0 1rem}
table{border-collapse:collapse;margin:0.5rem 0 1rem}
caption{text-align:left;font-weight:bold;padding:0.3rem 0}
th,td{border:1px solid #767676;padding:0.25rem 0.5rem;text-align:left;vertical-align:top}
thead th{background:#f0f0f0;color:#1b1b1b}
figure{margin:1rem 0}
figure svg{max-width:100%;height:auto;border:1px solid #767676}
.decision{padding:0.05rem 0.35rem;border-radius:0.2rem;font-weight:bold}
dt{font-weight:bold}
dd{margin:0 0 0.3rem 1.5rem}
";

/// Doctype, `<html lang>`, the title and the inline styles, up to the opening `<main>`.
pub fn page_head(title: &str) -> String {
    let mut css = String::from(STYLE);
    let (_, fg, bg) = PALETTE[0];
    let _ = writeln!(css, "body{{color:{fg};background:{bg}}}");
    for (class, fg, bg) in &PALETTE[1..] {
        let _ = writeln!(css, ".{class}{{color:{fg};background:{bg}}}");
    }
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title>\n<style>\n{css}</style>\n</head>\n<body>\n<main>\n",
        escape(title)
    )
}
