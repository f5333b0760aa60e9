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

    /// The one-character values a shell gives a meaning to, and the whitespace and empty
    /// values that change how many words a line has: each must arrive as exactly itself.
    const WHOLE_VALUES: &[&str] = &[
        "$",
        "~",
        "!",
        "*",
        "?",
        "[",
        "#",
        "&",
        "a b",
        " ",
        "line1\nline2",
        "\n",
        "",
    ];

    /// Values in which one of those characters does something when left bare — a lone `$`
    /// or `[` is literal to the shell, so only these show that `$`, `~`, `[`, `?` and `*`
    /// are quoted (the test runs with `$1` set and files `a` and `x` in its directory).
    const LEAK_PROBES: &[&str] = &[
        "$$", "$1", "$HOME", "a$1", "~/x", "~+", "a=~", "*a", "x?", "[a]", "#x", "a&b",
    ];

    /// The shells a generated script may meet: bash (every script's shebang) and the POSIX
    /// `/bin/sh` [`quote`] promises to be valid for.
    const SHELLS: &[&str] = &["bash", "sh"];

    /// Runs `script` in `shell` inside `dir` with `$1` = `POSITIONAL` and a known `$HOME`,
    /// and returns the NUL-separated words it printed.
    fn run_shell(shell: &str, script: &str, dir: &std::path::Path) -> Result<Vec<String>, String> {
        let out = Command::new(shell)
            .arg("-c")
            .arg(script)
            .arg("argv0")
            .arg("POSITIONAL")
            .current_dir(dir)
            .env("HOME", "/home/optgate-quote-test")
            .output()
            .map_err(|e| format!("{shell} did not start: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "{shell} failed ({}) on {script:?}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let text = String::from_utf8(out.stdout).map_err(|e| e.to_string())?;
        let mut v: Vec<String> = text.split('\0').map(String::from).collect();
        v.pop();
        Ok(v)
    }

    /// A directory whose files make bare globs visible: `*`, `?` and `[a]` all match.
    fn glob_bait() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for f in ["a", "x", "xy"] {
            std::fs::write(dir.path().join(f), "").unwrap();
        }
        dir
    }

    /// Runs `script_for(quoted value)` for every value in every shell and returns a line
    /// per value that did not come back as `want(value)`.
    fn mismatches(
        script_for: impl Fn(&str) -> String,
        want: impl Fn(&str) -> Vec<String>,
    ) -> Vec<String> {
        let dir = glob_bait();
        let mut bad = Vec::new();
        for shell in SHELLS {
            for v in WHOLE_VALUES.iter().chain(LEAK_PROBES) {
                let script = script_for(&quote(v));
                match run_shell(shell, &script, dir.path()) {
                    Ok(got) if got == want(v) => {}
                    Ok(got) => bad.push(format!(
                        "{shell}: {v:?} quoted as {} arrived as {got:?}",
                        quote(v)
                    )),
                    Err(e) => bad.push(e),
                }
            }
        }
        bad
    }

    #[test]
    fn each_special_value_arrives_whole_as_the_only_argument() {
        let bad = mismatches(|q| format!("printf '%s\\0' {q}"), |v| vec![v.to_string()]);
        assert!(bad.is_empty(), "{}", bad.join("\n"));
    }

    #[test]
    fn each_special_value_arrives_whole_between_other_arguments() {
        // The empty value must stay a word; `#` must not swallow the rest of the line.
        let bad = mismatches(
            |q| format!("printf '%s\\0' before {q} after"),
            |v| vec!["before".to_string(), v.to_string(), "after".to_string()],
        );
        assert!(bad.is_empty(), "{}", bad.join("\n"));
    }

    #[test]
    fn each_special_value_arrives_whole_as_an_exported_variable() {
        // The shape of the run scripts' `export NAME=VALUE` lines.
        let bad = mismatches(
            |q| format!("export V={q}\nprintf '%s\\0' \"$V\""),
            |v| vec![v.to_string()],
        );
        assert!(bad.is_empty(), "{}", bad.join("\n"));
    }

    #[test]
    fn no_shell_syntax_character_is_left_bare_even_alone() {
        // Some of these are literal to a shell when alone (a lone `$`, `!`, `[`); they are
        // quoted anyway, so the rule needs no case analysis of what follows them.
        for c in "$~!*?[]#&|;<>(){}'\"`\\ \t\n^%".chars() {
            let q = quote(&c.to_string());
            assert!(
                q.starts_with('\'') && q.ends_with('\''),
                "{c:?} was left bare: {q}"
            );
        }
        assert_eq!(quote(""), "''");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn any_string_round_trips(words in proptest::collection::vec("[^\u{0}]{0,12}", 1..4)) {
            prop_assert_eq!(through_bash(&words), words);
        }
    }
}
