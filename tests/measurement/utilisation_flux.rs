//! Utilisation, measured, end to end on the real one-node Flux (`schedulers/flux/
//! setup-one-node.sh`): a tiny C app keeps `$THREADS` threads busy under `flux run -c N`,
//! `optgate step` records each task, and the report built from the runs says which arm left
//! cores idle and which ran more busy threads than cores.
//!
//! Functional only: the machine is shared, so the CPU seconds measured here are not
//! performance, and nothing is timed. What is checked is that real task records reach the
//! report and are read the right way. On a node loaded by others a busy thread gets less
//! than its core (at a load of 6 on 2 cores each got a third, and every arm read as idle;
//! `nice -n -20` did not help across the others' cgroups), so the app runs under real-time
//! scheduling (`chrt -f 10`, a few CPU seconds in all): the test fails, saying so, where
//! it may not.
//!
//! Without a reachable Flux this test FAILS with instructions; it never passes by skipping.

use crate::support;
use support::*;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use optgate_evidence::Layout;
use optgate_evidence::report::{Execution, Source, build_report};
use optgate_experiment::Plan;
use optgate_report::UtilisationFinding;
use optgate_sched::flux::FluxBackend;
use optgate_sched::{JobState, Scheduler};

/// A guard against hanging forever; nothing is asserted about how long anything took.
const DEADLINE: Duration = Duration::from_secs(600);

/// `$THREADS` threads (default 1), each spinning until it has used `CPU_S` seconds of its
/// own CPU time, then three epoch lines. Each pauses 1 ms every 20 ms of CPU, so that under
/// real-time scheduling `optgate step`'s thread sampler still gets a core (without the
/// pauses, two busy threads on both cores starved it and it saw 1 thread, not 2).
const BUSY_C: &str = r#"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#define CPU_S 0.6
static double cpu(void) {
    struct timespec t; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}
static void *spin(void *arg) {
    volatile unsigned long x = 0;
    double next = 0.02;
    while (cpu() < CPU_S) {
        x++;
        if (cpu() >= next) { usleep(1000); next += 0.02; }
    }
    return arg;
}
int main(void) {
    const char *e = getenv("THREADS");
    int n = e ? atoi(e) : 1;
    pthread_t t[64];
    for (int i = 1; i < n && i < 64; i++) pthread_create(&t[i], 0, spin, 0);
    spin(0);
    for (int i = 1; i < n && i < 64; i++) pthread_join(t[i], 0);
    for (int k = 1; k <= 3; k++) printf("epoch %d took 0.0%d s\n", k, k);
    return 0;
}
"#;

/// Fails (never skips) when this user may not run the app under real-time scheduling.
fn require_realtime() {
    let ok = Command::new("chrt")
        .args(["-f", "10", "true"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "`chrt -f 10 true` failed: this check needs real-time scheduling (root) so that its \
         busy threads get their cores on a shared node"
    );
}

/// Compiles [`BUSY_C`] into `dir`; the path of the binary.
fn busy_app(dir: &Path) -> std::path::PathBuf {
    let src = dir.join("busy.c");
    let bin = dir.join("busy");
    std::fs::write(&src, BUSY_C).unwrap();
    let out = Command::new("cc")
        .args(["-O1", "-pthread", "-o"])
        .arg(&bin)
        .arg(&src)
        .output()
        .expect("a C compiler (`cc`) runs");
    assert!(out.status.success(), "{out:?}");
    bin
}

/// Baseline: 1 busy thread on 2 cores. `two`: 2 on 2. `over`: 4 on 1.
fn experiment(app: &Path) -> String {
    format!(
        r#"name: flux-utilisation
app:
  command: [chrt, -f, "10", {app}]
  time_limit: 5m
metric:
  pattern: 'epoch (?P<epoch>\d+) took (?P<seconds>[0-9.]+) s'
scheduler:
  kind: flux
  cpus_per_task: 2
  time_limit: 10m
replicates: 2
allow_few_replicates: true
baseline:
  env: {{ THREADS: "1" }}
variants:
  - name: two
    dimension: l2_threading_model
    env: {{ THREADS: "2" }}
  - name: over
    dimension: l2_threading_model
    launcher: {{ cpus_per_task: 1 }}
    env: {{ THREADS: "4" }}
"#,
        app = serde_json::to_string(app.to_str().unwrap()).unwrap()
    )
}

/// One block on the real Flux; the report of its runs finds the baseline's idle core and
/// `over`'s four threads on one core, and leaves `two` unflagged. Planted bugs caught: the
/// tasks not carried from the manifest into the collected runs (no `utilisation`), cores
/// used as wall over CPU (baseline 2.0, not idle), threads compared with `>=` or the
/// finding's thresholds swapped (`two` flagged).
#[test]
fn the_report_finds_idle_cores_and_oversubscription_from_real_tasks() {
    let _machine = support::measuring();
    require_flux();
    require_realtime();
    let tmp = tempfile::tempdir().unwrap();
    let app = busy_app(tmp.path());
    let path = support::write_experiment(tmp.path(), &experiment(&app));
    let exp = optgate_experiment::load(&path)
        .unwrap_or_else(|e| panic!("{e}"))
        .experiment;
    let plan = Plan::for_experiment(&exp);
    let layout = Layout::new(tmp.path().join("exec"));
    optgate_evidence::root::prepare(&exp, &plan, &layout).unwrap();
    let name = format!("utl{}", std::process::id());
    let jobs = support::first_block_jobs(&exp, &plan, &layout, &name);
    let b = FluxBackend::new();
    let id = b.submit(&jobs[0]).unwrap();
    let give_up = Instant::now() + DEADLINE;
    let end = loop {
        let s = b.poll(std::slice::from_ref(&id)).unwrap().remove(&id);
        match s {
            Some(s) if s.is_finished() => break s,
            _ if Instant::now() > give_up => {
                let _ = b.cancel(std::slice::from_ref(&id));
                panic!("job {id} not finished in {DEADLINE:?}");
            }
            _ => std::thread::sleep(Duration::from_millis(500)),
        }
    };
    assert_eq!(end, JobState::Completed);

    let none = BTreeMap::new();
    let collected = optgate_evidence::collect(&exp, &plan, &layout, &none);
    let node = optgate_probe::probe_live();
    let source = Source::Execution(Execution {
        exp: &exp,
        plan: &plan,
        layout: &layout,
        collected: &collected,
        not_applicable: &none,
        node: &node,
    });
    let report = build_report(&source, None).unwrap();
    let u = report
        .utilisation
        .clone()
        .expect("task records: utilisation");
    let by_arm = |a: &str| u.iter().find(|x| x.arm == a).unwrap().clone();
    let (base, two, over) = (by_arm("baseline"), by_arm("two"), by_arm("over"));
    let all = format!("{u:#?}");
    // What was measured, for the log (not asserted: the node is shared).
    eprintln!(
        "{}",
        u.iter()
            .map(|x| x.describe())
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert_eq!(base.cores_allotted, 2.0, "{all}");
    assert_eq!(base.threads, Some(1.0), "{all}");
    assert_eq!(base.finding, Some(UtilisationFinding::IdleCores), "{all}");
    assert_eq!(two.cores_allotted, 2.0, "{all}");
    assert_eq!(two.threads, Some(2.0), "{all}");
    assert_eq!(two.finding, None, "{all}");
    assert_eq!(over.cores_allotted, 1.0, "{all}");
    assert_eq!(over.threads, Some(4.0), "{all}");
    assert_eq!(
        over.finding,
        Some(UtilisationFinding::Oversubscribed),
        "{all}"
    );
    // Once per node, the first task recorded the node: one record per run (one node),
    // naming this host, its cores and a governor. Planted bugs caught: the node records
    // not gathered into the manifest, one written per task (a leftover of a second task
    // would still be one file per host, so the count checks the gathering).
    let block_one: Vec<_> = collected.runs.iter().filter(|r| r.block == 1).collect();
    assert_eq!(block_one.len(), 3);
    for run in block_one {
        let m = optgate_wrapper::manifest::RunManifest::read(&layout.run_dir(&run.id))
            .unwrap()
            .unwrap();
        assert_eq!(m.nodes.len(), 1, "{}: {:?}", run.id, m.nodes);
        let n = &m.nodes[0];
        assert_eq!(n.host, optgate_wrapper::run::hostname());
        assert_eq!(n.node.as_deref(), Some("0"), "{n:?}");
        assert!(n.cores.is_some_and(|c| c >= 2), "{n:?}");
        assert!(!n.governor.is_empty() && n.load_avg.is_some(), "{n:?}");
        eprintln!("{}: {n:?}", run.id);
    }
    let text = optgate_report::render_table(&report);
    assert!(text.contains("[oversubscribed]"), "{text}");
    assert!(
        text.contains("baseline: each task used") && text.contains("most allotted cores idle"),
        "{text}"
    );
}
