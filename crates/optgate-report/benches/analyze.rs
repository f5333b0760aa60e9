//! Benchmark of the size: 20 variants × 30 replicates × 100 epochs (plus the
//! baseline), paired. Measures the statistics alone, the samples parser and the table
//! rendering. (The whole `optgate analyze` path — parse, then the one report builder in
//! `optgate-evidence` — is measured through the binary in `benches/analyze`.)

use std::collections::BTreeMap;
use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use optgate_report::{AnalyzeOptions, Report, parse_samples, render_table};
use optgate_stats::{AnalysisConfig, ArmData, RunSamples, analyze};

const VARIANTS: usize = 20;
const REPLICATES: u32 = 30;
const EPOCHS: u32 = 100;

/// Deterministic noise in [-1, 1].
fn wobble(i: u64) -> f64 {
    // SplitMix64's finaliser: neighbouring inputs give unrelated outputs (a plain LCG step
    // would make the differences between arms constant and hide the noise).
    let mut z = i.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    ((z >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
}

fn arms() -> (ArmData, Vec<ArmData>) {
    let mut i = 0u64;
    let mut arm = |name: String, speedup: f64| {
        let runs = (1..=REPLICATES)
            .map(|r| {
                let epochs: BTreeMap<u32, f64> = (1..=EPOCHS)
                    .map(|e| {
                        i += 1;
                        let level = if e == 1 { 20.0 } else { 10.0 / speedup };
                        (e, level * (1.0 + 0.02 * wobble(i)))
                    })
                    .collect();
                RunSamples {
                    replicate: r,
                    block: Some(r),
                    epochs,
                }
            })
            .collect();
        ArmData {
            name,
            runs,
            ..ArmData::default()
        }
    };
    let base = arm("base".into(), 1.0);
    let variants = (0..VARIANTS)
        .map(|v| arm(format!("v{v:02}"), 1.0 + 0.005 * v as f64))
        .collect();
    (base, variants)
}

fn csv_text(base: &ArmData, variants: &[ArmData]) -> String {
    let mut out = String::from("variant,block,replicate,epoch,seconds\n");
    for arm in std::iter::once(base).chain(variants) {
        for run in &arm.runs {
            for (e, s) in &run.epochs {
                out.push_str(&format!(
                    "{},{},{},{e},{s}\n",
                    arm.name,
                    run.block.unwrap_or(run.replicate),
                    run.replicate
                ));
            }
        }
    }
    out
}

fn bench(c: &mut Criterion) {
    let (base, variants) = arms();
    let cfg = AnalysisConfig::default();
    c.bench_function("analyze 20 variants x 30 replicates x 100 epochs", |b| {
        b.iter(|| analyze(black_box(&base), black_box(&variants), &cfg).unwrap())
    });
    let text = csv_text(&base, &variants);
    let opts = AnalyzeOptions::new("base");
    // `optgate analyze` is this parse, then `optgate_evidence::report::build_report` (the
    // analysis above and `Report::new`).
    c.bench_function("parse_samples, same size", |b| {
        b.iter(|| parse_samples(black_box(&text), "bench.csv", "base", opts.design).unwrap())
    });
    let report = Report::new(
        analyze(&base, &variants, &opts.config()).unwrap(),
        &base,
        &variants,
    );
    c.bench_function("render_table, same size", |b| {
        b.iter(|| render_table(black_box(&report)))
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = bench
}
criterion_main!(benches);
