//! `optgate analyze`'s report goes through the one report builder: a samples file parsed,
//! then `build_report` of it — the analysis, the system resource the file measured, and
//! the typed provenance naming the file; bad settings a statistics error naming the file.

use optgate_evidence::report::{SamplesFile, Source, analyze_samples, build_report};
use optgate_report::{AnalyzeOptions, SamplesError, SamplesProvenance, parse_samples};
use optgate_stats::{Decision, Design};

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

/// A good file with two replicates is analysed (and says why it cannot decide); its
/// provenance is the typed samples provenance and nothing else, so `--format json` keeps
/// its documented keys. Catches a builder that drops the provenance or mixes in an
/// execution's (experiment, checklist, isolation are an execution's only).
#[test]
fn a_good_file_is_analysed_with_its_typed_provenance() {
    let r = analyze_samples(GOOD, "s.csv", &AnalyzeOptions::new("base")).unwrap();
    let v = &r.analysis.variants[0];
    assert_eq!(v.name, "fast");
    assert_eq!(v.decision, Decision::Inconclusive);
    assert!(
        v.reason.contains("only 2 complete replicates"),
        "{}",
        v.reason
    );
    assert_eq!(
        r.samples_provenance(),
        Some(SamplesProvenance {
            samples_file: "s.csv".into(),
            optgate_version: env!("CARGO_PKG_VERSION").into(),
        })
    );
    let p = r.provenance.as_ref().unwrap().as_object().unwrap();
    let keys: Vec<&str> = p.keys().map(String::as_str).collect();
    assert_eq!(keys, ["optgate_version", "samples_file"]);
    assert_eq!(r.decision_provenance(), None, "a samples file has no looks");
    assert!(r.experiment.is_none() && r.checklist.is_none() && r.isolation.is_none());
    assert_eq!(r.arms.len(), 2);
    assert_eq!(r.arms[0].name, "base");
}

/// `analyze_samples` is the parse and then `build_report`: the same report either way.
#[test]
fn analyze_samples_is_parse_then_build_report() {
    let opts = AnalyzeOptions::new("base");
    let samples = parse_samples(GOOD, "s.csv", "base", Design::Paired).unwrap();
    let built = build_report(
        &Source::SamplesFile(SamplesFile {
            origin: "s.csv",
            samples: &samples,
            config: opts.config(),
        }),
        None,
    )
    .unwrap();
    assert_eq!(analyze_samples(GOOD, "s.csv", &opts).unwrap(), built);
}

/// Resources in the file are what System Impact compares.
#[test]
fn a_file_with_resources_compares_them() {
    let text = "variant,replicate,epoch,seconds,cpu_s\n\
                base,1,1,10,4\nbase,2,1,10,4\nfast,1,1,9,2\nfast,2,1,9,2\n";
    let r = analyze_samples(text, "s.csv", &AnalyzeOptions::new("base")).unwrap();
    assert_eq!(
        r.system_resource,
        Some(optgate_report::SystemResource::CoreSeconds)
    );
}

/// Settings the statistics refuse are bad input naming the file (exit 2 in the CLI).
#[test]
fn bad_options_are_a_stats_error_naming_the_file() {
    let mut opts = AnalyzeOptions::new("base");
    opts.alpha = 0.7;
    match analyze_samples(GOOD, "s.csv", &opts) {
        Err(e @ SamplesError::Stats { .. }) => {
            assert!(e.to_string().starts_with("s.csv: "), "{e}")
        }
        other => panic!("{other:?}"),
    }
}
