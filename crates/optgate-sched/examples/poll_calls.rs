//! Driver of `benches/scheduler-calls/run.sh`: polls N tracked jobs P times through the real
//! Slurm or Flux backend (commands found on PATH — the benchmark puts logging fakes there)
//! and prints one line: backend, jobs, polls, milliseconds per poll, the states seen, and —
//! from the fakes' log named by `CALL_LOG` — the scheduler commands each poll ran.
//!
//! Usage: cargo run -p optgate-sched --example poll_calls -- slurm|flux JOBS POLLS

use std::collections::BTreeMap;
use std::time::Instant;

use optgate_sched::command::{RetryPolicy, SystemRunner};
use optgate_sched::flux::FluxBackend;
use optgate_sched::slurm::SlurmBackend;
use optgate_sched::{JobId, Scheduler};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (kind, jobs, polls) = match args.as_slice() {
        [_, kind, jobs, polls] => (
            kind.clone(),
            jobs.parse::<u64>().expect("JOBS is a number"),
            polls.parse::<u32>().expect("POLLS is a number"),
        ),
        _ => {
            eprintln!("usage: poll_calls slurm|flux JOBS POLLS");
            std::process::exit(2);
        }
    };
    let runner = std::sync::Arc::new(SystemRunner::default());
    let retry = RetryPolicy::immediate(1);
    let backend: Box<dyn Scheduler> = match kind.as_str() {
        "slurm" => Box::new(SlurmBackend::with_runner(runner, retry)),
        "flux" => Box::new(FluxBackend::with_runner(runner, retry)),
        other => panic!("unknown backend {other}"),
    };
    let ids: Vec<JobId> = (1..=jobs).map(|i| JobId(i.to_string())).collect();
    let log = std::env::var_os("CALL_LOG");
    let logged = || {
        log.as_ref()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .map_or(0, |t| t.lines().count())
    };
    let mut calls = Vec::new();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut busy = std::time::Duration::ZERO;
    for _ in 0..polls {
        let before = logged();
        let t0 = Instant::now();
        let states = backend.poll(&ids).expect("poll succeeds");
        busy += t0.elapsed();
        calls.push((logged() - before).to_string());
        assert_eq!(states.len(), ids.len(), "a state for every job");
        for s in states.values() {
            let name = serde_json::to_value(s).expect("serialises")["state"]
                .as_str()
                .unwrap_or("?")
                .to_string();
            *seen.entry(name).or_default() += 1;
        }
    }
    let ms = busy.as_secs_f64() * 1000.0 / f64::from(polls.max(1));
    let seen: Vec<String> = seen
        .iter()
        .map(|(k, v)| format!("{k}={}", v / polls as usize))
        .collect();
    println!(
        "{kind} {jobs} {polls} {ms:.1} {} {}",
        calls.join(","),
        seen.join(",")
    );
}
