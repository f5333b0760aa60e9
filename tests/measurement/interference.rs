//! Interference, end to end through the real binary: the stencil experiment runs on a calm
//! machine for its first blocks, then under CPU hogs this test starts (and stops) itself.
//! The report says the loaded runs once, marks the affected decision, keeps the per-run
//! list in JSON, and checks the decision without the loaded blocks.

use crate::support;

use std::collections::BTreeSet;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use support::*;

/// Busy loops at the lowest priority: they raise the load average (which counts runnable
/// threads whatever their niceness) while taking little CPU time from the runs.
const HOGS: usize = 24;
/// The hogs start once this many blocks have run.
const CALM_BLOCKS: u32 = 5;
const BLOCKS: u32 = 12;
/// How long the test waits for the machine's load to fall below [`CALM_SHARE`] × its CPUs
/// before it starts (an earlier test's load lingers in the 1-minute average).
const CALM_WAIT: Duration = Duration::from_secs(240);
/// A run is loaded when the 1-minute load passes the CPUs. The experiment's own runs (one
/// thread) pull the average towards 1, so a start below 0.8 × the CPUs stays below them
/// through the calm blocks, with 0.4 of a 2-CPU machine to spare for other processes.
const CALM_SHARE: f64 = 0.8;

/// The hogs this test started; killed (and reaped) when dropped, whatever happens.
struct Hogs(Vec<Child>);

impl Drop for Hogs {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn start_hogs() -> Hogs {
    Hogs(
        (0..HOGS)
            .map(|_| {
                Command::new("nice")
                    .args(["-n", "19", "sh", "-c", "while :; do :; done"])
                    .stdin(Stdio::null())
                    .spawn()
                    .expect("a CPU hog starts")
            })
            .collect(),
    )
}

/// The 1-minute load average (`/proc/loadavg`'s first field).
fn load_1min() -> f64 {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap();
    text.split_whitespace().next().unwrap().parse().unwrap()
}

/// The stencil at about half a second a run (30 sweeps an epoch): once the hogs start, the
/// load average's next 5-second update lands with blocks still to run.
fn experiment() -> String {
    let workdir = repo_root().join("examples/openmp-stencil");
    format!(
        r#"name: under-load
workdir: {workdir}
build:
  command: cc -O2 -fopenmp stencil.c -o "$OPTGATE_BUILD_DIR/stencil" -lm
app:
  command: '"$OPTGATE_BUILD_DIR/stencil"'
  args: ["--n", "1536", "--epochs", "5", "--sweeps", "30"]
  env: {{ OMP_NUM_THREADS: 1 }}
  time_limit: 2m
metric:
  source: stdout
  pattern: 'epoch (?P<epoch>\d+) took (?P<seconds>[0-9.]+) s'
scheduler: {{ kind: local }}
design: blocked
replicates: {BLOCKS}
max_replicates: {BLOCKS}
seed: 7
compare: {{ steady_epochs: "2.." }}
variants:
  - name: o3
    dimension: l2_compiler_runtime_flags
    build:
      command: cc -O3 -fopenmp stencil.c -o "$OPTGATE_BUILD_DIR/stencil" -lm
"#,
        workdir = workdir.display(),
    )
}

/// The machine, taken alone ([`support::measuring`]) once its 1-minute load is below
/// [`CALM_SHARE`] × its CPUs. While it is not, the machine is left to the other measuring
/// tests of this binary (which do not need a calm start) and asked for again every 2 s, so
/// an earlier binary's lingering load is waited out beside them rather than before them.
fn calm_machine() -> std::sync::MutexGuard<'static, ()> {
    let cpus = std::thread::available_parallelism().unwrap().get() as f64;
    let calm_since = Instant::now();
    loop {
        let machine = support::measuring();
        let load = load_1min();
        if load <= CALM_SHARE * cpus {
            eprintln!(
                "calm after {:.0?} (1-minute load {load})",
                calm_since.elapsed()
            );
            return machine;
        }
        drop(machine);
        assert!(
            calm_since.elapsed() < CALM_WAIT,
            "the machine's load stayed above {CALM_SHARE} × {cpus} CPUs for {CALM_WAIT:?}: \
             this test needs a machine it can load itself"
        );
        std::thread::sleep(Duration::from_secs(2));
    }
}

#[test]
fn runs_under_a_cpu_hog_are_summarised_and_the_decision_checked_without_them() {
    let _machine = calm_machine();
    let dir = tempfile::tempdir().unwrap();
    let exp = write_experiment(dir.path(), &experiment());
    let root = dir.path().join("exec");
    let mut child = optgate()
        .args([
            "run",
            exp.to_str().unwrap(),
            "--out",
            root.to_str().unwrap(),
            "--quiet",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The hogs start once the calm blocks have both runs' manifests.
    let calm_done = |b: u32| {
        ["baseline", "o3"].iter().all(|arm| {
            root.join(format!("runs/b{b:03}-{arm}/manifest.json"))
                .exists()
        })
    };
    let started = Instant::now();
    while !calm_done(CALM_BLOCKS) {
        assert!(
            child.try_wait().unwrap().is_none(),
            "optgate ended before block {CALM_BLOCKS}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "block {CALM_BLOCKS} never ran"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let hogs = start_hogs();
    let out = child.wait_with_output().unwrap();
    drop(hogs);
    assert_eq!(out.status.code(), Some(0), "stderr:\n{}", stderr(&out));
    let text = stdout(&out);
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("report.json")).unwrap()).unwrap();

    // What each run's manifest recorded: the blocks with a run above the machine's CPUs.
    let mut loaded_runs = 0;
    let mut loaded_blocks = BTreeSet::new();
    for b in 1..=BLOCKS {
        for arm in ["baseline", "o3"] {
            let m: serde_json::Value = serde_json::from_str(
                &std::fs::read_to_string(root.join(format!("runs/b{b:03}-{arm}/manifest.json")))
                    .unwrap(),
            )
            .unwrap();
            let c = &m["conditions"];
            let load = c["load_avg_start"]
                .as_f64()
                .unwrap()
                .max(c["load_avg_end"].as_f64().unwrap());
            if load > c["online_cpus"].as_f64().unwrap() {
                loaded_runs += 1;
                loaded_blocks.insert(b);
            }
        }
    }
    eprintln!("loaded: {loaded_runs} runs, blocks {loaded_blocks:?}");
    assert!(
        loaded_runs >= 2,
        "the hogs loaded no run: {loaded_blocks:?}"
    );
    assert!(
        loaded_blocks.iter().all(|&b| b > CALM_BLOCKS - 2),
        "{loaded_blocks:?}"
    );

    // Said once: in the text, one line; in JSON the summary and the per-run list.
    let load = &report["load"];
    assert_eq!(load["loaded_runs"], loaded_runs);
    assert_eq!(load["runs"], 2 * BLOCKS);
    let blocks: Vec<u32> = load["loaded_blocks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b.as_u64().unwrap() as u32)
        .collect();
    assert_eq!(blocks, loaded_blocks.iter().copied().collect::<Vec<_>>());
    let line = format!(
        "{loaded_runs} of {} runs were measured at a load above",
        2 * BLOCKS
    );
    assert_eq!(text.matches(&line).count(), 1, "{text}");
    assert!(
        !text.contains("b012-o3 (o3)"),
        "the text lists runs one by one:\n{text}"
    );
    assert!(report["interference"].as_array().unwrap().len() >= loaded_runs);

    // The decision is marked and checked on the blocks left.
    let v = &report["variants"][0];
    assert_eq!(v["loaded_blocks"], loaded_blocks.len());
    let n = loaded_blocks.len() as u32;
    // The decision cell may wrap anywhere in the table: its words, read in order.
    let words = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(words.contains(&format!("[{n} loaded block")), "{text}");
    let left = BLOCKS - n;
    let check = &v["without_loaded_blocks"];
    if left >= 5 {
        assert_eq!(check["blocks"], left, "{v:#}");
        assert!(
            ["accept", "reject", "inconclusive"].contains(&check["decision"].as_str().unwrap())
        );
        assert!(check["speedup"].as_f64().unwrap() > 0.0);
        assert!(
            v["reason"].as_str().unwrap().contains("loaded block"),
            "{v:#}"
        );
    } else {
        assert!(check.is_null(), "{v:#}");
    }
}
