//! The proposal written into the file's text: `variants:` (or, when the trace says I/O or
//! communication dominates, `stages:` in canonical order) and `checklist:` added — or
//! appended to when the file has them — each entry under a comment quoting its figure.
//! Also the text of the experiment that measures the baseline (`probe_text`).

use optgate_experiment::Verdict;
use optgate_experiment::checklist::{Area, dimension};

use crate::outcome::{ProposedVariant, ProposedVerdict};
use crate::text::{self, TextError, comment, quote};
use crate::{PROBE_RUNS, Proposal};

/// The name of the copy of the baseline in the measuring experiment (the engine compares
/// arms, so the baseline runs beside an identical arm).
pub const PROBE_COPY: &str = "baseline-again";

/// One variant as a block-list entry at `indent` spaces.
pub fn variant_yaml(v: &ProposedVariant, indent: usize) -> String {
    let pad = " ".repeat(indent);
    let mut s = format!("{pad}# measured: {}\n", comment(&v.figure));
    s += &format!("{pad}- name: {}\n", v.name);
    s += &format!("{pad}  dimension: {}\n", v.dimension);
    s += &format!("{pad}  description: {}\n", quote(&v.description));
    if !v.env.is_empty() {
        let env: Vec<String> = v
            .env
            .iter()
            .map(|(k, val)| format!("{k}: {}", quote(val)))
            .collect();
        s += &format!("{pad}  env: {{ {} }}\n", env.join(", "));
    }
    if let Some(n) = v.cpus_per_task {
        s += &format!("{pad}  launcher: {{ cpus_per_task: {n} }}\n");
    }
    if let Some(b) = &v.build {
        s += &format!("{pad}  build:\n{pad}    command: {}\n", quote(b));
    }
    if let Some(g) = &v.governor {
        s += &format!("{pad}  governor: {g}\n");
    }
    s
}

/// One verdict as a map entry at `indent` spaces.
pub fn verdict_yaml(v: &ProposedVerdict, indent: usize) -> String {
    let pad = " ".repeat(indent);
    let word = match v.verdict {
        Verdict::ApplicableNotMeasured => "applicable_not_measured",
        Verdict::NotApplicable => "not_applicable",
    };
    let mut s = String::new();
    if let Some(f) = &v.figure {
        s += &format!("{pad}# measured: {}\n", comment(f));
    }
    s += &format!(
        "{pad}{}: {{ verdict: {word}, reason: {} }}\n",
        v.dimension,
        quote(&v.reason)
    );
    s
}

/// `text` with `entries` (rendered at the key's own entry indentation) added to its
/// top-level `key`, which is created at the end when absent.
fn add_entries(
    text: &str,
    key: &str,
    header: &str,
    entries: &dyn Fn(usize) -> String,
) -> Result<String, TextError> {
    if entries(2).is_empty() {
        return Ok(text.to_string());
    }
    match text::entry_indent(text, key)? {
        Some((block, indent)) => Ok(text::insert_at(text, block.end, &entries(indent))),
        None => {
            let mut out = text.to_string();
            if !out.is_empty() && !out.ends_with('\n') {
                out.push('\n');
            }
            out += &format!("{header}{key}:\n{}", entries(2));
            Ok(out)
        }
    }
}

/// `text` (the experiment file) with the proposal added.
pub fn add_proposal(text: &str, p: &Proposal) -> Result<String, TextError> {
    let header = "# Proposed by `optgate propose` from the measured baseline:\n";
    let out = match p.campaign {
        Some((area, share)) => add_stages(text, p, area, share),
        None => add_entries(text, "variants", header, &|indent| {
            p.variants.iter().map(|v| variant_yaml(v, indent)).collect()
        })?,
    };
    add_entries(&out, "checklist", "", &|indent| {
        p.verdicts.iter().map(|v| verdict_yaml(v, indent)).collect()
    })
}

/// `text` with `stages:`, one per area that has a proposed variant, in canonical order.
fn add_stages(text: &str, p: &Proposal, dominant: Area, share: f64) -> String {
    let mut out = text.to_string();
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    out += &format!(
        "# Proposed by `optgate propose`: {dominant} is {:.1}% of the traced time, so the\n# proposals run as a campaign in canonical order (I/O → communication → memory → compute).\nstages:\n",
        100.0 * share
    );
    for area in Area::ALL {
        let in_area: Vec<&ProposedVariant> = p
            .variants
            .iter()
            .filter(|v| dimension(v.dimension).is_some_and(|d| d.area == area))
            .collect();
        if in_area.is_empty() {
            continue;
        }
        out += &format!("  - component: {area}\n    variants:\n");
        for v in in_area {
            out += &variant_yaml(v, 6);
        }
    }
    out
}

/// `text` with its top-level `replicates:` raised to `needed` — the smallest number whose
/// exact test can decide the file's variants with the proposed ones added — when it is
/// below that; unchanged when it is not, or the file leaves `replicates` to the loader.
pub fn with_enough_replicates(text: &str, given: u32, needed: u32) -> String {
    let Some(b) = text::blocks(text)
        .into_iter()
        .find(|b| b.key == "replicates")
    else {
        return text.to_string();
    };
    if given >= needed {
        return text.to_string();
    }
    let mut out = String::new();
    for (i, line) in text.lines().enumerate() {
        if i == b.start {
            out += &format!(
                "replicates: {needed}   # optgate propose: was {given}, too few to decide this many variants\n"
            );
        } else if !(b.start..b.end).contains(&i) {
            out += line;
            out.push('\n');
        }
    }
    out
}

/// The experiment that measures the baseline: `text` without its variants, checklist,
/// replicates and re-check, named `name`, running the baseline [`PROBE_RUNS`] times beside
/// an identical arm.
pub fn probe_text(text: &str, name: &str) -> String {
    let keep = text::remove_keys(
        text,
        &[
            "name",
            "variants",
            "stages",
            "checklist",
            "replicates",
            "max_replicates",
            "allow_few_replicates",
            "recheck",
            "aa_control",
        ],
    );
    format!(
        "{keep}name: {}\nreplicates: {PROBE_RUNS}\nmax_replicates: {PROBE_RUNS}\nallow_few_replicates: true\nvariants:\n  - name: {PROBE_COPY}\n    description: the baseline once more (optgate propose measures the baseline)\n",
        quote(name)
    )
}

#[cfg(test)]
mod tests {
    /// Too few replicates for the variants now in the file are raised, the rest of the text
    /// kept; enough, or none given, leave the text as it was.
    #[test]
    fn replicates_raised_only_when_too_few() {
        let text = "name: x\nreplicates: 5 # five\nseed: 1\n";
        assert_eq!(
            super::with_enough_replicates(text, 5, 6),
            "name: x\nreplicates: 6   # optgate propose: was 5, too few to decide this many variants\nseed: 1\n"
        );
        assert_eq!(super::with_enough_replicates(text, 5, 5), text);
        assert_eq!(
            super::with_enough_replicates("name: x\n", 5, 6),
            "name: x\n"
        );
    }

    use std::collections::BTreeMap;

    use super::*;
    use crate::outcome::ProposedVerdict;

    fn threads() -> ProposedVariant {
        ProposedVariant {
            name: "threads-2".into(),
            dimension: "l2_threading_model",
            description: "kept 1.0 of 2 \"allotted\" cores busy".into(),
            figure: "1.0 of 2 allotted cores busy per task".into(),
            env: BTreeMap::from([("OMP_NUM_THREADS".into(), "2".into())]),
            cpus_per_task: Some(2),
            build: None,
            governor: None,
        }
    }

    fn proposal() -> Proposal {
        Proposal {
            variants: vec![threads()],
            verdicts: vec![ProposedVerdict {
                dimension: "l2_autotuning",
                verdict: Verdict::ApplicableNotMeasured,
                reason: "by hand".into(),
                figure: None,
            }],
            ..Proposal::default()
        }
    }

    /// A baseline-only file gets both keys at its end, its own text unchanged before them.
    #[test]
    fn adds_both_keys_to_a_baseline_only_file() {
        let text = "name: x # mine\nbaseline:\n  description: b\n";
        let out = add_proposal(text, &proposal()).unwrap();
        assert!(out.starts_with(text), "{out}");
        assert!(out.contains(
            "variants:\n  # measured: 1.0 of 2 allotted cores busy per task\n  - name: threads-2\n    dimension: l2_threading_model\n    description: \"kept 1.0 of 2 \\\"allotted\\\" cores busy\"\n    env: { OMP_NUM_THREADS: \"2\" }\n    launcher: { cpus_per_task: 2 }\n"
        ), "{out}");
        assert!(out.ends_with(
            "checklist:\n  l2_autotuning: { verdict: applicable_not_measured, reason: \"by hand\" }\n"
        ), "{out}");
    }

    /// Existing lists are appended to at their own indentation, before the next key and
    /// after their last entry (comments between them stay with the next key); flow style
    /// is refused with its line.
    #[test]
    fn appends_to_existing_blocks() {
        let text = "variants:\n- name: a\n  env: { X: 1 }\n\n# the checks\nchecklist:\n    l1_vectorization: { verdict: not_applicable, reason: r }\nseed: 1\n";
        let out = add_proposal(text, &proposal()).unwrap();
        assert!(
            out.starts_with("variants:\n- name: a\n  env: { X: 1 }\n# measured: 1.0 of 2"),
            "{out}"
        );
        assert!(out.contains("\n\n# the checks\nchecklist:\n    l1_vectorization: { verdict: not_applicable, reason: r }\n    l2_autotuning: "), "{out}");
        assert!(out.ends_with("seed: 1\n"), "{out}");
        let flow = "variants: [{ name: a }]\n";
        assert_eq!(
            add_proposal(flow, &proposal()),
            Err(TextError::FlowStyle {
                key: "variants".into(),
                line: 1
            })
        );
    }

    /// The measuring experiment drops the file's variants, checklist and replicates.
    #[test]
    fn probe_text_keeps_only_the_baseline() {
        let text = "name: x\nreplicates: 9\nvariants:\n  - name: a\nchecklist:\n  k: v\nseed: 3\n";
        let out = probe_text(text, "x-propose");
        assert_eq!(
            out,
            format!(
                "seed: 3\nname: \"x-propose\"\nreplicates: {PROBE_RUNS}\nmax_replicates: {PROBE_RUNS}\nallow_few_replicates: true\nvariants:\n  - name: {PROBE_COPY}\n    description: the baseline once more (optgate propose measures the baseline)\n"
            )
        );
    }
}
