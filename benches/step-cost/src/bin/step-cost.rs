//! `step-cost LABEL RUNS BARE… --vs WRAPPED…`: launches both in alternation RUNS times and
//! prints one Markdown table row: wall time per launch (median, p10–p90) and CPU per launch
//! (mean) of each, and the wrapped one's as a ratio to the bare one's.

use optgate_step_cost::{compare, mean, quantiles};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: step-cost LABEL RUNS BARE… --vs WRAPPED…";
    let [label, runs, rest @ ..] = args.as_slice() else {
        panic!("{usage}");
    };
    let runs: usize = runs.parse().expect(usage);
    let split = rest.iter().position(|a| a == "--vs").expect(usage);
    let (bare, wrapped) = (&rest[..split], &rest[split + 1..]);
    let (b, w) = compare(runs, bare, wrapped);
    let wall = |l: &[optgate_step_cost::Launch]| {
        quantiles(&l.iter().map(|x| x.wall_s * 1e3).collect::<Vec<_>>())
    };
    let cpu = |l: &[optgate_step_cost::Launch]| {
        mean(&l.iter().map(|x| x.cpu_s * 1e3).collect::<Vec<_>>())
    };
    let (bw, ww) = (wall(&b), wall(&w));
    let (bc, wc) = (cpu(&b), cpu(&w));
    println!(
        "| {label} | {runs} | {:.2} ({:.2}–{:.2}) | {:.2} ({:.2}–{:.2}) | **{:.2}×** (+{:.2} ms) | {bc:.2} | {wc:.2} | **{:.2}×** (+{:.2} ms) |",
        bw.0,
        bw.1,
        bw.2,
        ww.0,
        ww.1,
        ww.2,
        ww.0 / bw.0,
        ww.0 - bw.0,
        wc / bc.max(1e-9),
        wc - bc
    );
}
