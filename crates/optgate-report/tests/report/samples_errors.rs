//! Bad samples files: each problem is reported with the line numbers it comes from, and
//! all problems at once. Input in, expected message out. (The analysis of a good file, and
//! a statistics error, go through the report builder: `optgate-evidence`'s
//! `tests/samples_report.rs`.)

use optgate_report::{Problem, SamplesError, parse_samples};
use optgate_stats::Design;

fn problems(text: &str, baseline: &str, design: Design) -> Vec<String> {
    match parse_samples(text, "s.csv", baseline, design) {
        Err(SamplesError::Invalid { origin, problems }) => {
            assert_eq!(origin, "s.csv");
            problems.iter().map(Problem::to_string).collect()
        }
        Err(other) => panic!("unexpected error: {other}"),
        Ok(_) => panic!("accepted a bad file:\n{text}"),
    }
}

fn paired(text: &str) -> Vec<String> {
    problems(text, "base", Design::Paired)
}

/// Two arms × 2 replicates × 2 epochs, correct.
const GOOD: &str = "\
variant,replicate,epoch,seconds
base,1,1,10.0
base,1,2,5.0
base,2,1,10.5
base,2,2,5.1
fast,1,1,9.0
fast,1,2,4.0
fast,2,1,9.5
fast,2,2,4.1
";

#[test]
fn good_file_parses_into_its_arms() {
    let s = parse_samples(GOOD, "s.csv", "base", Design::Paired).unwrap();
    assert_eq!(s.baseline.name, "base");
    assert_eq!(s.baseline.runs.len(), 2);
    assert_eq!(s.variants.len(), 1);
    assert_eq!(s.variants[0].name, "fast");
    assert_eq!(s.variants[0].runs[1].epochs[&2], 4.1);
}

#[test]
fn columns_in_any_order_with_quotes_comments_and_crlf() {
    let text = "# exported by hand\r\nseconds,\"epoch\",variant,replicate\r\n10,1,base,1\r\n5,2,base,1\r\n\
                10.5,1,base,2\r\n5.1,2,base,2\r\n9,1,\"fast\",1\r\n4,2,fast,1\r\n9.5,1,fast,2\r\n4.1,2,fast,2\r\n";
    let s = parse_samples(text, "s.csv", "base", Design::Paired).unwrap();
    assert_eq!(s.variants[0].name, "fast");
    assert_eq!(s.baseline.runs[0].epochs.len(), 2);
    assert_eq!(s.variants[0].runs[1].epochs[&1], 9.5);
}

#[test]
fn unknown_baseline_names_the_variants_present() {
    assert_eq!(
        problems(GOOD, "baseline", Design::Paired),
        vec!["baseline 'baseline' is not a variant in the file (it has: base, fast)"]
    );
}

#[test]
fn variant_with_one_replicate() {
    let text = "variant,replicate,epoch,seconds\nbase,1,1,10\nbase,2,1,11\nlone,1,1,9\n";
    assert_eq!(
        problems(text, "base", Design::Independent),
        vec!["line 4: variant 'lone' has 1 replicate; at least 2 are needed (5 for a decision)"]
    );
}

#[test]
fn bad_seconds_and_numbers_are_all_reported() {
    let text = "variant,replicate,epoch,seconds\n\
                base,1,1,abc\n\
                base,1,2,-3\n\
                base,x,1,2\n\
                base,2,0,2\n\
                base,2,1,0\n";
    assert_eq!(
        paired(text),
        vec![
            "line 2: seconds 'abc' is not a positive number",
            "line 3: seconds '-3' is not a positive number",
            "line 4: replicate 'x' is not a whole number ≥ 0",
            "line 5: epoch '0' is not an epoch number (1, 2, ...)",
            "line 6: seconds '0' is not a positive number",
        ]
    );
}

#[test]
fn duplicate_rows() {
    let text = GOOD.to_string() + "fast,2,2,4.2\n";
    assert_eq!(
        paired(&text),
        vec!["line 10: duplicate of line 9 (variant 'fast', replicate 2, epoch 2)"]
    );
}

#[test]
fn missing_epochs() {
    let text = GOOD.replace("fast,2,2,4.1\n", "");
    assert_eq!(
        paired(&text),
        vec!["line 8: variant 'fast', replicate 2 lacks epoch 2 that other runs have"]
    );
}

#[test]
fn paired_replicates_that_do_not_line_up() {
    let text = GOOD.replace("fast,2,", "fast,3,");
    assert_eq!(
        paired(&text),
        vec![
            "lines 4–5: paired design, but replicate 2 is in 'base' and not in 'fast' (use \
             --design independent if the runs were not blocked)",
            "lines 8–9: paired design, but replicate 3 is in 'fast' and not in 'base' (use \
             --design independent if the runs were not blocked)",
        ]
    );
    // The same file is fine for an independent design.
    parse_samples(&text, "s.csv", "base", Design::Independent).unwrap();
}

#[test]
fn blocks_that_do_not_line_up() {
    let text = "variant,replicate,epoch,seconds,block\n\
                base,1,1,10,1\nbase,2,1,10,2\n\
                fast,1,1,9,1\nfast,2,1,9,1\n";
    assert_eq!(
        paired(text),
        vec!["lines 4–5: variant 'fast' has more than one replicate in block 1"]
    );
    let text = "variant,replicate,epoch,seconds,block\n\
                base,1,1,10,1\nbase,1,2,10,2\nbase,2,1,10,2\nbase,2,2,10,2\n\
                fast,1,1,9,1\nfast,1,2,9,1\nfast,2,1,9,2\nfast,2,2,9,2\n";
    assert_eq!(
        paired(text),
        vec!["lines 2–3: variant 'base', replicate 1: its rows do not all name the same block"]
    );
}

#[test]
fn header_problems() {
    assert_eq!(
        paired("variant,replicate,epoch,secs\nbase,1,1,2\n"),
        vec![
            "line 1: unknown column 'secs' (allowed: variant, replicate, block, epoch, seconds, cpu_s, max_rss_kib, energy_j)",
            "line 1: the header has no 'seconds' column",
        ]
    );
    assert_eq!(
        paired(""),
        vec![
            "the file is empty: a header line naming the columns variant,replicate,epoch,seconds is required"
        ]
    );
    assert_eq!(
        paired("variant,replicate,epoch,seconds\nbase,1,1\n"),
        vec!["line 2: 3 fields, the header has 4"]
    );
}

#[test]
fn error_message_lists_every_problem() {
    let text = "variant,replicate,epoch,seconds\nbase,1,1,abc\nbase,1,2,-1\n";
    let err = parse_samples(text, "runs.csv", "base", Design::Paired).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.starts_with("runs.csv: 2 problems in the samples file:"),
        "{msg}"
    );
    assert!(msg.contains("line 2:") && msg.contains("line 3:"), "{msg}");
}
