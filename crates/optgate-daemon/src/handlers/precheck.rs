//! What `submit` checks of an experiment text before any parser sees it: its size, NUL
//! bytes and nesting depth, all found by the loader's one linear pre-scan
//! (`optgate_experiment::yaml::check_text_limits`), so a hostile text (100,000 nested lists
//! in 200 KB) is refused in milliseconds on the async side instead of taking a parse slot.

/// Why `text` is refused before parsing, or `None` when the parser may have it.
pub fn refuse_before_parsing(text: &str) -> Option<String> {
    let refused = optgate_experiment::yaml::check_text_limits(text).err()?;
    Some(match refused.location {
        Some(at) => format!(
            "line {}, column {}: {}; refused before parsing",
            at.line, at.column, refused.message
        ),
        None => format!("{}; refused before parsing", refused.message),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use optgate_experiment::yaml::{MAX_DEPTH, MAX_FILE_BYTES};

    /// Planted bug caught: a pre-check that skips the depth scan (or this wrapper returning
    /// `None`) lets each of these texts through to the parser.
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
            assert!(
                why.contains(&format!("nested deeper than {MAX_DEPTH} levels")),
                "{why}"
            );
            assert!(why.starts_with("line "), "{why}");
        }
        let late = format!("name: x\nvariants:\n  - {}\n", "[".repeat(70));
        let why = refuse_before_parsing(&late).expect("refused");
        assert!(why.starts_with("line 3,"), "{why}");
    }

    /// Planted bug caught: brackets inside quotes, comments or block scalars counted as
    /// nesting would refuse ordinary files.
    #[test]
    fn brackets_that_open_nothing_do_not_count() {
        let text = format!(
            "name: x # {open}\nargs: ['{open}', \"{open}\"]\ncommand: echo a{open}\n\
             script: |\n  if [ -f x ]; then echo [[a]]; fi\n",
            open = "[".repeat(200)
        );
        assert_eq!(refuse_before_parsing(&text), None, "{text}");
    }

    /// Every experiment file in the repository passes; planted bug caught: a limit at or
    /// under the true depth of real files.
    #[test]
    fn the_repository_experiments_pass() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments");
        let mut seen = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            assert_eq!(refuse_before_parsing(&text), None, "{}", path.display());
            seen += 1;
        }
        assert!(
            seen >= 3,
            "only {seen} experiment files in {}",
            dir.display()
        );
    }

    #[test]
    fn a_text_over_the_size_limit_or_with_a_nul_is_refused() {
        let text = "#".repeat(MAX_FILE_BYTES + 1);
        let why = refuse_before_parsing(&text).unwrap();
        assert!(why.contains("limited to 1048576 bytes"), "{why}");
        let why = refuse_before_parsing("name: a\0b\n").unwrap();
        assert!(why.starts_with("line 1, column 8: a NUL byte"), "{why}");
    }
}
