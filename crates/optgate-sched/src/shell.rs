//! Shell quoting: every value that reaches a generated script goes through [`quote`], so
//! the shell sees it as one literal word whatever it contains (`$`, backticks, quotes,
//! newlines, `;`).

/// Quotes `s` as a single POSIX shell word. Single quotes suspend every expansion; a
/// single quote inside is written as `'\''` (close, escaped quote, reopen).
pub fn quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes().all(|c| {
            c.is_ascii_alphanumeric()
                || matches!(
                    c,
                    b'_' | b'-' | b'.' | b'/' | b'=' | b':' | b',' | b'+' | b'@'
                )
        })
    {
        // Plain words stay readable in scripts; none of these characters is special.
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    for ch in s.chars() {
        if ch == '\'' {
            out.push_str("'\\''");
        } else {
            out.push(ch);
        }
    }
    out.push('\'');
    out
}

/// Quotes each word and joins them with spaces.
pub fn join<I, S>(words: I) -> String
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    words
        .into_iter()
        .map(|w| quote(w.as_ref()))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::process::Command;

    /// Runs `printf '%s\0' <quoted words>` in bash and returns what bash passed on.
    fn through_bash(words: &[String]) -> Vec<String> {
        let script = format!("printf '%s\\0' {}", join(words));
        let out = Command::new("bash")
            .arg("-c")
            .arg(&script)
            .output()
            .unwrap();
        assert!(out.status.success(), "bash failed on {script:?}");
        let text = String::from_utf8(out.stdout).unwrap();
        let mut v: Vec<String> = text.split('\0').map(String::from).collect();
        v.pop();
        v
    }

    #[test]
    fn hostile_values_arrive_literally() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("pwned");
        let words = vec![
            format!("$(touch {})", marker.display()),
            format!("`touch {}`", marker.display()),
            format!("a; touch {}", marker.display()),
            "it's \"quoted\"".to_string(),
            "line1\nline2".to_string(),
            "$HOME ${PATH} $((1+1)) * ? ~ &".to_string(),
            String::new(),
        ];
        assert_eq!(through_bash(&words), words);
        assert!(!marker.exists(), "a quoted value was executed by the shell");
    }

    #[test]
    fn plain_words_are_left_readable() {
        assert_eq!(quote("OMP_NUM_THREADS=6"), "OMP_NUM_THREADS=6");
        assert_eq!(quote("a b"), "'a b'");
        assert_eq!(quote("it's"), "'it'\\''s'");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn any_string_round_trips(words in proptest::collection::vec("[^\u{0}]{0,12}", 1..4)) {
            prop_assert_eq!(through_bash(&words), words);
        }
    }
}
