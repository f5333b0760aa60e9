//! The rules on recorded facts: node facts from the captured /proc+/sys trees of
//! `tests/fixtures/hwloc-topologies` (read by optgate-probe), utilisation as the Flux
//! reports of `experiments/hybrid-flux.yaml` recorded it (1 thread on 2-core tasks).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use optgate_experiment::Verdict;
use optgate_experiment::checklist::{Area, DIMENSIONS};
use optgate_probe::governor::Tunability;

use crate::facts::{Facts, Launcher, LauncherKind, NodeFacts, TraceTimes, Usage};
use crate::outcome::{Outcome, Settings};
use crate::{Existing, propose, rules};

/// A captured tree unpacked into a temporary directory (kept alive with it).
fn node(name: &str) -> (tempfile::TempDir, NodeFacts) {
    let tarball = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/hwloc-topologies")
        .join(format!("{name}.tar.bz2"));
    assert!(
        tarball.is_file(),
        "fixture {} is missing",
        tarball.display()
    );
    // Thousands of small files: tmpfs unpacks them in a blink, the disk takes a minute.
    let shm = Path::new("/dev/shm");
    let dir = if shm.is_dir() {
        tempfile::tempdir_in(shm).or_else(|_| tempfile::tempdir())
    } else {
        tempfile::tempdir()
    }
    .expect("tempdir");
    let ok = std::process::Command::new("tar")
        .arg("-xjf")
        .arg(&tarball)
        .arg("-C")
        .arg(dir.path())
        .arg("--no-same-owner")
        .status()
        .expect("run tar")
        .success();
    assert!(ok, "tar failed on {}", tarball.display());
    let root: PathBuf = dir.path().join(name);
    let probe = optgate_probe::probe(&root).expect("probe the fixture");
    let tunability = optgate_probe::governor::tunability(&root, None);
    (dir, NodeFacts::from_probe(&probe, tunability))
}

/// The Xeon Silver 4108 pair: 2 NUMA nodes, AVX-512, no cpufreq.
const XEON: &str = "32intel64-2p8co2t+8ve";
/// The i7-1370P: 1 NUMA node, `powersave` under intel_pstate.
const I7: &str = "20em64t-hybrid-1p6c2t+2ca4co1t";
/// The DGX GB10: 1 NUMA node, Arm, already `performance`.
const GB10: &str = "nvidia-dgx-gb10";

/// The hybrid Flux example's baseline as its report recorded it: each 2-core rank kept
/// 1.0 core busy with 1 thread, `OMP_NUM_THREADS=1`.
fn flux_baseline(node: NodeFacts) -> Facts {
    Facts {
        node,
        usage: Some(Usage {
            cores_allotted: 2.0,
            cores_used: 1.0,
            threads: Some(1.0),
            runnable_threads: None,
            under_load: false,
        }),
        env: BTreeMap::from([("OMP_NUM_THREADS".into(), "1".into())]),
        launcher: Some(Launcher {
            kind: LauncherKind::Flux,
            cpus_per_task: 2,
        }),
        build: Some("mpicc -O2 -fopenmp stencil.c -o \"$OPTGATE_BUILD_DIR/stencil\" -lm".into()),
        has_correctness: true,
        linked: vec!["libgomp.so.1".into(), "libmpich.so.12".into()],
        trace: None,
    }
}

fn variant(o: Outcome) -> crate::ProposedVariant {
    match o {
        Outcome::Variant(v) => v,
        Outcome::Verdict(v) => panic!("expected a variant, got {v:?}"),
    }
}

fn verdict(o: Outcome) -> (Verdict, String) {
    match o {
        Outcome::Verdict(v) => (v.verdict, v.reason),
        Outcome::Variant(v) => panic!("expected a verdict, got {v:?}"),
    }
}

/// The seed's fix: 1 busy thread on 2-core tasks under Flux → 2 threads, spread, bound,
/// `cpus_per_task: 2`; the description quotes the measured figure (catches a thread count
/// from the node's cores instead of the task's, and a lost launcher shape).
#[test]
fn idle_cores_under_flux_give_one_thread_per_allotted_core() {
    let (_d, n) = node(XEON);
    let v = variant(rules::threads(&flux_baseline(n)));
    assert_eq!(v.name, "threads-2");
    assert_eq!(v.dimension, "l2_threading_model");
    assert_eq!(v.env["OMP_NUM_THREADS"], "2");
    assert_eq!(v.env["OMP_PROC_BIND"], "spread");
    assert_eq!(v.env["OMP_PLACES"], "cores");
    assert!(!v.env.contains_key("MKL_NUM_THREADS"));
    assert_eq!(v.cpus_per_task, Some(2));
    assert!(
        v.description.contains("1.0 of 2 allotted cores"),
        "{}",
        v.description
    );
    assert!(
        v.description.contains("OMP_NUM_THREADS=1"),
        "{}",
        v.description
    );
}

/// Locally (no launcher, `OMP_NUM_THREADS` unset) `cpus_per_task` is the allotment too; MKL and OpenBLAS
/// linked get their own thread counts (catches the library check reading the wrong list).
#[test]
fn local_idle_cores_and_linked_thread_libraries() {
    let (_d, n) = node(I7);
    let mut f = flux_baseline(n);
    f.launcher = None;
    f.env.clear();
    f.usage = Some(Usage {
        cores_allotted: 4.0,
        cores_used: 1.02,
        threads: None,
        runnable_threads: None,
        under_load: false,
    });
    f.linked = vec!["libmkl_rt.so.2".into(), "libopenblas.so.0".into()];
    let v = variant(rules::threads(&f));
    assert_eq!(v.env["OMP_NUM_THREADS"], "4");
    assert_eq!(v.env["MKL_NUM_THREADS"], "4");
    assert_eq!(v.env["OPENBLAS_NUM_THREADS"], "4");
    assert_eq!(v.cpus_per_task, Some(4));
    assert!(v.description.contains("OMP_NUM_THREADS unset"));
}

/// Busy cores → nothing; threads already at the allotment but idle → by hand; more busy
/// threads than cores → the reduction; no utilisation → not measured.
#[test]
fn threads_without_idle_cores() {
    let (_d, n) = node(XEON);
    let mut f = flux_baseline(n);
    let at = |used: f64, threads: f64| Usage {
        cores_allotted: 2.0,
        cores_used: used,
        threads: Some(threads),
        runnable_threads: None,
        under_load: false,
    };
    f.usage = Some(at(1.95, 2.0));
    assert_eq!(verdict(rules::threads(&f)).0, Verdict::NotApplicable);
    f.usage = Some(at(1.0, 2.0));
    f.env.insert("OMP_NUM_THREADS".into(), "2".into());
    let (v, why) = verdict(rules::threads(&f));
    assert_eq!(v, Verdict::ApplicableNotMeasured);
    assert!(why.contains("already fills them"), "{why}");
    f.usage = Some(at(2.0, 8.0));
    f.env.insert("OMP_NUM_THREADS".into(), "8".into());
    let r = variant(rules::threads(&f));
    assert_eq!(r.env["OMP_NUM_THREADS"], "2");
    assert!(r.description.contains("more threads than cores"));
    f.usage = None;
    assert_eq!(
        verdict(rules::threads(&f)).0,
        Verdict::ApplicableNotMeasured
    );
}

/// Two NUMA nodes → a binding variant; one → `not_applicable` "1 NUMA node".
#[test]
fn binding_from_the_numa_nodes() {
    let (_d, xeon) = node(XEON);
    let v = variant(rules::binding(&flux_baseline(xeon)));
    assert_eq!(v.dimension, "l3_numa_affinity");
    assert_eq!(v.env["OMP_PROC_BIND"], "spread");
    assert!(v.figure.starts_with("2 NUMA nodes"), "{}", v.figure);
    let (_d, i7) = node(I7);
    let (v, why) = verdict(rules::binding(&flux_baseline(i7)));
    assert_eq!(v, Verdict::NotApplicable);
    assert!(why.starts_with("1 NUMA node"), "{why}");
}

/// The governor on each recorded node: none (Xeon), `performance` already (GB10),
/// `powersave` and writable (the unpacked i7 tree) → a variant locally, not under Flux.
#[test]
fn governor_by_cpufreq_state() {
    let (_d, xeon) = node(XEON);
    let (v, why) = verdict(rules::governor(&flux_baseline(xeon)));
    assert_eq!(v, Verdict::NotApplicable);
    assert!(why.starts_with("no cpufreq"), "{why}");
    let (_d, gb10) = node(GB10);
    let (_, why) = verdict(rules::governor(&flux_baseline(gb10)));
    assert!(why.contains("already `performance`"), "{why}");
    let (_d, i7) = node(I7);
    let mut f = flux_baseline(i7);
    let (_, why) = verdict(rules::governor(&f));
    assert!(why.starts_with("Flux"), "{why}");
    f.launcher = None;
    assert!(matches!(
        f.node.governor_tunability,
        Tunability::Tunable { .. }
    ));
    let v = variant(rules::governor(&f));
    assert_eq!(v.governor.as_deref(), Some("performance"));
    assert!(v.figure.contains("powersave"), "{}", v.figure);
    f.node.governor_tunability = Tunability::NotTunable {
        reason: "scaling_governor is not writable".into(),
    };
    let (_, why) = verdict(rules::governor(&f));
    assert!(why.starts_with("admin-only"), "{why}");
}

/// `-O2` becomes `-O3 -march=native`; no optimisation level gets one; a build with both
/// is left alone; no build is "a binary"; no correctness check → no rebuild proposed.
#[test]
fn build_flags_rebuild_only_with_a_check() {
    let (_d, n) = node(XEON);
    let mut f = flux_baseline(n);
    let v = variant(rules::build_flags(&f));
    assert_eq!(
        v.build.as_deref(),
        Some("mpicc -O3 -march=native -fopenmp stencil.c -o \"$OPTGATE_BUILD_DIR/stencil\" -lm")
    );
    assert_eq!(
        rules::with_build_flags("cc x.c -o y"),
        "cc -O3 -march=native x.c -o y"
    );
    assert_eq!(
        rules::with_build_flags("cc -O3 x.c"),
        "cc -O3 -march=native x.c"
    );
    f.build = Some("cc -O3 -march=native x.c".into());
    assert_eq!(verdict(rules::build_flags(&f)).0, Verdict::NotApplicable);
    f.build = Some("cc -O1 x.c".into());
    f.has_correctness = false;
    let (v, why) = verdict(rules::build_flags(&f));
    assert_eq!(v, Verdict::ApplicableNotMeasured);
    assert!(why.contains("no `correctness:`"), "{why}");
    f.build = None;
    assert_eq!(
        verdict(rules::build_flags(&f)),
        (Verdict::NotApplicable, "a binary: no build declared".into())
    );
}

/// The capability verdict names the ISA found: AVX-512 on the Xeon, SVE on the GB10.
#[test]
fn capability_names_the_isa() {
    let (_d, xeon) = node(XEON);
    let (_, why) = verdict(rules::capability(&flux_baseline(xeon)));
    assert!(
        why.contains("AVX2") && why.contains("AVX-512 (avx512"),
        "{why}"
    );
    let (_d, gb10) = node(GB10);
    let (_, why) = verdict(rules::capability(&flux_baseline(gb10)));
    assert!(why.contains("SVE"), "{why}");
}

/// The trace's shares: I/O dominating makes a campaign; a negligible share is
/// `not_applicable` with it (catches a share computed against the wrong total).
#[test]
fn trace_shares_order_and_negligible_categories() {
    let (_d, n) = node(I7);
    let mut f = flux_baseline(n);
    let [io, comm] = rules::overlap(&f);
    assert!(verdict(io).1.contains("no DFTracer trace"));
    assert_eq!(verdict(comm).0, Verdict::ApplicableNotMeasured);
    assert_eq!(rules::campaign_order(&f), None);
    f.trace = Some(TraceTimes {
        io_s: 60.0,
        communication_s: 1.0,
        memory_s: 0.0,
        compute_s: 39.0,
    });
    let [io, comm] = rules::overlap(&f);
    assert_eq!(verdict(io).0, Verdict::ApplicableNotMeasured);
    let (v, why) = verdict(comm);
    assert_eq!(v, Verdict::NotApplicable);
    assert!(
        why.starts_with("communication 1.0% of the traced time"),
        "{why}"
    );
    assert_eq!(rules::campaign_order(&f), Some((Area::Io, 0.6)));
    f.trace = Some(TraceTimes {
        compute_s: 90.0,
        io_s: 10.0,
        ..TraceTimes::default()
    });
    assert_eq!(rules::campaign_order(&f), None);
}

/// Every dimension gets a variant or a verdict with a reason (catches a rule's outcome
/// lost in the merge, and a dimension never walked).
#[test]
fn all_ten_dimensions_covered() {
    let (_d, n) = node(XEON);
    let p = propose(&flux_baseline(n), &Existing::default());
    for d in DIMENSIONS {
        let by_variant = p.variants.iter().any(|v| v.dimension == d.id);
        let by_verdict = p
            .verdicts
            .iter()
            .any(|v| v.dimension == d.id && !v.reason.is_empty());
        assert!(by_variant ^ by_verdict, "{} covered once", d.id);
    }
    let names: Vec<&str> = p.variants.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(names, ["o3-native", "threads-2", "bind-spread"]);
}

/// A file with variants keeps them: a proposal with an existing variant's settings is
/// left out, a taken name gets a suffix, a dimension with a verdict gets no variant.
#[test]
fn existing_variants_and_verdicts_are_kept() {
    let (_d, n) = node(XEON);
    let f = flux_baseline(n);
    let same = rules::threads(&f);
    let Outcome::Variant(t) = same else { panic!() };
    let existing = Existing {
        variants: vec![
            (
                "mine".into(),
                Some("l2_threading_model".into()),
                Settings {
                    env: t.env.clone(),
                    cpus_per_task: t.cpus_per_task,
                    ..Settings::default()
                },
            ),
            ("bind-spread".into(), None, Settings::default()),
        ],
        verdicts: ["l2_compiler_runtime_flags".to_string()].into(),
    };
    let p = propose(&f, &existing);
    let names: Vec<&str> = p.variants.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(names, ["bind-spread-2"]);
    assert_eq!(p.left_out.len(), 2, "{:?}", p.left_out);
    assert!(
        !p.verdicts
            .iter()
            .any(|v| v.dimension == "l2_threading_model")
    );
    assert!(
        !p.verdicts
            .iter()
            .any(|v| v.dimension == "l2_compiler_runtime_flags")
    );
    assert_eq!(p.verdicts.len() + 1 + 2, 10, "{:?}", p.verdicts);
}

/// A real DLIO trace's categories (the committed fixtures': POSIX, STDIO, storage, reader,
/// data_loader, compute, and DFTracer's own) grouped into areas; nesting regions and
/// DFTracer's records count toward none (catches a category filed under the wrong area).
#[test]
fn trace_categories_grouped_into_areas() {
    use optgate_experiment::checklist::Area;
    assert_eq!(crate::facts::area_of_category("POSIX"), Some(Area::Io));
    assert_eq!(
        crate::facts::area_of_category("MPI"),
        Some(Area::Communication)
    );
    assert_eq!(crate::facts::area_of_category("dftracer"), None);
    let t = TraceTimes::from_categories([
        ("POSIX", 3.0),
        ("STDIO", 1.0),
        ("MPI", 0.5),
        ("compute", 2.0),
        ("dftracer", 99.0),
        ("dlio_benchmark", 50.0),
    ])
    .unwrap();
    assert_eq!(
        t,
        TraceTimes {
            io_s: 4.0,
            communication_s: 0.5,
            memory_s: 0.0,
            compute_s: 2.0
        }
    );
    assert_eq!(TraceTimes::from_categories([("config", 1.0)]), None);
}

/// Local runs of a program with no MPI library have nothing to overlap; under a launcher,
/// or linking MPI, the dimension stays open (catches the check reading the launcher only).
#[test]
fn communication_overlap_needs_a_second_process() {
    let (_d, n) = node(I7);
    let mut f = flux_baseline(n);
    let comm = |f: &Facts| verdict(rules::overlap(f)[1].clone());
    assert_eq!(comm(&f).0, Verdict::ApplicableNotMeasured);
    f.launcher = None;
    assert_eq!(
        comm(&f).0,
        Verdict::ApplicableNotMeasured,
        "libmpich is linked"
    );
    f.linked = vec!["libgomp.so.1".into()];
    let (v, why) = comm(&f);
    assert_eq!(v, Verdict::NotApplicable);
    assert!(why.contains("no MPI library"), "{why}");
}
