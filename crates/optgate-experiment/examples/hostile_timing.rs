//! Times the loader on hostile experiment texts (deep nesting, many flow mappings, many bad
//! entries, oversized files): `cargo run --release -p optgate-experiment --example
//! hostile_timing [case]`. The numbers quoted in docs/LIMITS.md come from it.

use std::path::Path;
use std::time::Instant;

use optgate_experiment::load_str;

const HEAD: &str = "name: t\napp: { command: [./app] }\nmetric: { pattern: 'epoch (?P<epoch>\\d+) took (?P<seconds>[0-9.]+) s' }\n";

/// A valid variants list that most cases end with, so that only the part under test is hostile.
const VARIANTS: &str =
    "variants:\n  - { name: v, dimension: l2_threading_model, env: { W: \"1\" } }\n";

/// About 500 KB of nested flow mappings inside one `description` sequence.
fn flow_maps() -> String {
    let mut text = format!("{HEAD}description: [");
    while text.len() < 500_000 {
        text.push_str("{a: {b: {c: [1, 2, {d: e}]}}}, ");
    }
    text.push_str("x]\n");
    text.push_str(VARIANTS);
    text
}

/// 500 absolute paths under `correctness.files`, each one an error to report.
fn bad_files() -> String {
    let mut text = format!("{HEAD}correctness:\n  files:\n");
    for _ in 0..500 {
        text.push_str("    - /abs\n");
    }
    text.push_str(VARIANTS);
    text
}

/// About 500 KB of variants, each with a mapping as its description.
fn many_descriptions() -> String {
    let mut text = HEAD.to_string();
    text.push_str("variants:\n");
    let mut i = 0;
    while text.len() < 500_000 {
        text.push_str(&format!(
            "  - {{ name: v{i}, description: {{ a: {{ b: [1, 2, 3] }} }} }}\n"
        ));
        i += 1;
    }
    text
}

fn cases() -> Vec<(&'static str, String)> {
    let deep_flow = |levels: usize| {
        format!(
            "{HEAD}description: {}x{}\n{VARIANTS}",
            "[".repeat(levels),
            "]".repeat(levels)
        )
    };
    vec![
        ("flow nesting 10,000 levels", deep_flow(10_000)),
        ("flow nesting 30,000 levels (`[` … `]`)", deep_flow(30_000)),
        ("flow nesting 100,000 levels", deep_flow(100_000)),
        (
            "nested `{\"a\": ` 30,000 levels (210 KB)",
            format!(
                "{HEAD}description: {}x{}\n{VARIANTS}",
                "{\"a\": ".repeat(30_000),
                "}".repeat(30_000)
            ),
        ),
        (
            "compact block nesting `- - -` 300,000 levels",
            format!("{HEAD}x:\n{}1\n", "- ".repeat(300_000)),
        ),
        ("500 KB of flow mappings in `description`", flow_maps()),
        (
            "nested `{a: ` 100,000 levels in `description` (500 KB)",
            format!(
                "{HEAD}description: {}x{}\n{VARIANTS}",
                "{a: ".repeat(100_000),
                "}".repeat(100_000)
            ),
        ),
        (
            "500 KB of variants with mapping descriptions",
            many_descriptions(),
        ),
        ("500 bad correctness.files", bad_files()),
        (
            "1 MiB: 900 KB description and 20 unknown keys (retries)",
            format!(
                "{HEAD}description: '{}'\n{}{VARIANTS}",
                "x".repeat(900_000),
                (0..20).map(|i| format!("typo{i}: 1\n")).collect::<String>()
            ),
        ),
        (
            "1 MiB: a 900 KB alternation as the metric pattern",
            format!(
                "name: t\napp: {{ command: [./app] }}\nmetric: {{ pattern: '(?P<epoch>\\d+) (?P<seconds>x)|{}' }}\n{VARIANTS}",
                (0..90_000)
                    .map(|i| format!("a{i:06}b|"))
                    .collect::<String>()
            ),
        ),
        (
            "8 MiB file",
            format!("{HEAD}description: '{}'\n", "x".repeat(8 << 20)),
        ),
    ]
}

/// With an argument, only the case of that number (from 0), so that one that crashes the
/// process is measured on its own.
fn main() {
    let only: Option<usize> = std::env::args().nth(1).and_then(|a| a.parse().ok());
    for (i, (name, text)) in cases().into_iter().enumerate() {
        if only.is_some_and(|n| n != i) {
            continue;
        }
        let start = Instant::now();
        let result = load_str(&text, Path::new("/tmp/hostile.yaml"));
        let elapsed = start.elapsed();
        let shown = match result {
            Ok(_) => "accepted".to_string(),
            Err(e) => {
                let s = e.to_string();
                format!(
                    "refused, {} bytes of message: {}",
                    s.len(),
                    s.lines()
                        .next()
                        .unwrap_or("")
                        .chars()
                        .take(100)
                        .collect::<String>()
                )
            }
        };
        println!(
            "{name} ({} bytes): {:.3} s, {shown}",
            text.len(),
            elapsed.as_secs_f64()
        );
    }
}
