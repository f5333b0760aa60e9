//! `optgate analyze` at the documented maxima: a samples file of 1,000,000 rows, 2 arms × 5
//! replicates × 100,000 epochs (`samples_csv::MAX_ROWS`), parsed, analysed and reported
//! (`optgate_evidence::report::analyze_samples`, what the command runs), with and without a trend in the steady window;
//! and the trend checks that made it quadratic in epochs, old (pairwise, kept in this
//! crate) against new, on the same series in the same run.

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, SamplingMode, criterion_group, criterion_main};
use optgate_analyze_scale::{
    left_out_scan, left_out_search, samples_csv, series, window_trend_counted,
    window_trend_pairwise,
};
use optgate_evidence::report::analyze_samples;
use optgate_report::AnalyzeOptions;

/// Epochs per run: 10k, 30k and the limit, 100k (at 2 × 5 runs: 1,000,000 rows).
const EPOCHS: [u32; 3] = [10_000, 30_000, 100_000];
/// The pairwise baseline is O(n²): 5·10⁹ pairs at 100k epochs is ~10 s an iteration, so it
/// is measured up to 30k, where the growth is already plain.
const PAIRWISE_EPOCHS: [u32; 2] = [10_000, 30_000];
const TREND_ALPHA: f64 = 0.05;

fn whole_analysis(c: &mut Criterion) {
    let mut g = c.benchmark_group("analyze_samples, 2 arms x 5 replicates");
    // Flat: every sample the same few iterations (linear sampling would run 55 of a
    // 2-second iteration).
    g.sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .measurement_time(Duration::from_secs(20));
    let opts = AnalyzeOptions::new("baseline");
    for epochs in EPOCHS {
        for (label, drift) in [("steady", 0.0), ("trend", 0.03)] {
            let text = samples_csv(epochs, drift);
            g.bench_with_input(BenchmarkId::new(label, epochs), &text, |b, text| {
                b.iter(|| analyze_samples(black_box(text), "bench.csv", &opts).unwrap())
            });
        }
    }
    g.finish();
}

fn trend_checks(c: &mut Criterion) {
    let mut g = c.benchmark_group("steady-window trend check of one arm");
    g.sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .measurement_time(Duration::from_secs(10));
    for epochs in EPOCHS {
        let steady = series(epochs as usize, 0.0);
        g.bench_with_input(BenchmarkId::new("counted", epochs), &steady, |b, s| {
            b.iter(|| window_trend_counted(black_box(s), TREND_ALPHA))
        });
        if PAIRWISE_EPOCHS.contains(&epochs) {
            g.bench_with_input(
                BenchmarkId::new("pairwise (before)", epochs),
                &steady,
                |b, s| b.iter(|| window_trend_pairwise(black_box(s), TREND_ALPHA)),
            );
        }
    }
    g.finish();
    let mut g = c.benchmark_group("steady epochs left out");
    g.sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .measurement_time(Duration::from_secs(10));
    for epochs in PAIRWISE_EPOCHS {
        let wanted: Vec<u32> = (2..=epochs).collect();
        g.bench_with_input(BenchmarkId::new("search", epochs), &wanted, |b, w| {
            b.iter(|| left_out_search(black_box(w), w))
        });
        g.bench_with_input(
            BenchmarkId::new("scan (before)", epochs),
            &wanted,
            |b, w| b.iter(|| left_out_scan(black_box(w), w)),
        );
    }
    g.finish();
}

criterion_group!(benches, whole_analysis, trend_checks);
criterion_main!(benches);
