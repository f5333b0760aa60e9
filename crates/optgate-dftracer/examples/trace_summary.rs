//! Summarises DFTracer traces and reports how fast: the Rust side of the benchmark in
//! `benches/dftracer/run.sh`, and a quick manual check of `render_table`.
//!
//! Usage: trace_summary [--threads N] [--marker NAME] [--category CAT]
//!                      [--table|--json|--counts] PATH...
//!
//! Prints one line of timing to stderr (`bytes=… seconds=… mb_per_s=…`); stdout gets
//! the table, the full JSON, or (`--counts`, default) the run totals as compact JSON,
//! which the benchmark compares with the Python aggregation.

use std::path::PathBuf;
use std::time::Instant;

use optgate_dftracer::{AggregateOptions, render_table, summarize_paths};

fn main() {
    let mut opts = AggregateOptions::default();
    let mut threads: Option<usize> = None;
    let mut mode = "counts";
    let mut paths: Vec<PathBuf> = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = |name: &str| {
            args.next()
                .unwrap_or_else(|| panic!("{name} needs a value"))
        };
        match a.as_str() {
            "--threads" => threads = Some(value("--threads").parse().expect("--threads N")),
            "--marker" => opts.epoch_marker = Some(value("--marker")),
            "--category" => opts.category = Some(value("--category")),
            "--table" => mode = "table",
            "--json" => mode = "json",
            "--counts" => mode = "counts",
            _ => paths.push(PathBuf::from(a)),
        }
    }
    if let Some(n) = threads {
        rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .build_global()
            .expect("set up the thread pool");
    }

    let t0 = Instant::now();
    let summary = match summarize_paths(&paths, &opts) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    };
    let secs = t0.elapsed().as_secs_f64();
    let bytes: u64 = summary.files.iter().map(|f| f.text_bytes).sum();
    eprintln!(
        "files={} events={} bytes={} seconds={:.3} mb_per_s={:.1} threads={}",
        summary.files.len(),
        summary.total.events,
        bytes,
        secs,
        bytes as f64 / 1e6 / secs,
        rayon::current_num_threads(),
    );
    match mode {
        "table" => print!("{}", render_table(&summary)),
        "json" => println!(
            "{}",
            serde_json::to_string_pretty(&summary).expect("serialise")
        ),
        _ => {
            // The same shape the Python aggregation prints, for a direct comparison.
            let counts = serde_json::json!({
                "events": summary.total.events,
                "by_category": summary.total.by_category.iter()
                    .map(|(k, v)| (k.clone(), v.count)).collect::<std::collections::BTreeMap<_, _>>(),
                "by_name": summary.total.by_name.iter()
                    .map(|(k, v)| (k.clone(), v.count)).collect::<std::collections::BTreeMap<_, _>>(),
                "by_epoch": summary.total.by_epoch.iter()
                    .map(|(k, v)| (k.to_string(), v.count)).collect::<std::collections::BTreeMap<_, _>>(),
                "dur_s": (summary.total.dur_s * 1e3).round() / 1e3,
            });
            println!("{counts}");
        }
    }
}
