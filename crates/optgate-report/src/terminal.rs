//! Text made safe for a terminal: every control character that is not layout (newline,
//! tab) is shown escaped, so input that reaches what optgate prints (a description, an
//! app's line quoted in a reason, a name) cannot move the cursor, clear the screen, set
//! the window title or open a hyperlink (ESC, CSI and OSC sequences, the C1 controls).

use std::borrow::Cow;

/// `text` with each control character other than `\n` and `\t` written as an escape: C0
/// controls and DEL as `\x1b`-style hex bytes, C1 controls (U+0080–U+009F, which some
/// terminals obey as CSI/OSC) as `\u{9b}`. Text without any is returned as it is.
pub fn for_terminal(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_hostile) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            c if !is_hostile(c) => out.push(c),
            c if (c as u32) < 0x80 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
        }
    }
    Cow::Owned(out)
}

/// A control character that is not layout.
fn is_hostile(c: char) -> bool {
    c != '\n' && c != '\t' && c.is_control()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_sequences_are_shown_not_obeyed() {
        assert_eq!(for_terminal("\u{1b}[2Jcleared"), "\\x1b[2Jcleared");
        let link = "\u{1b}]8;;http://evil.example/\u{7}click\u{1b}]8;;\u{7}";
        assert_eq!(
            for_terminal(link),
            "\\x1b]8;;http://evil.example/\\x07click\\x1b]8;;\\x07"
        );
        assert_eq!(for_terminal("a\rb\u{0}c\u{7f}"), "a\\x0db\\x00c\\x7f");
        assert_eq!(for_terminal("csi \u{9b}2J"), "csi \\u{9b}2J");
        assert!(!for_terminal(link).contains('\u{1b}'));
    }

    #[test]
    fn layout_and_plain_text_pass_unchanged() {
        let plain = "line one\n\tindented — 1.5× ± ü\n";
        assert!(matches!(for_terminal(plain), Cow::Borrowed(_)));
        assert_eq!(for_terminal(plain), plain);
    }
}
