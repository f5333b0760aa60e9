//! The rules, one pure function per checklist dimension (or pair), each from [`Facts`] to
//! an [`Outcome`]: a variant carrying the measured fact that proposed it, or a verdict
//! saying why there is none. docs/PROPOSE.md lists them with their thresholds.

use std::collections::BTreeMap;

use optgate_experiment::Verdict;
use optgate_experiment::checklist::Area;
use optgate_probe::governor::Tunability;
use optgate_report::utilisation::{UtilisationFinding, finding};

use crate::facts::{Facts, LauncherKind, Usage};
use crate::outcome::{Outcome, ProposedVariant};

/// A trace category below this share of the traced time is negligible: its overlap
/// dimension is `not_applicable`, naming the share.
pub const NEGLIGIBLE_SHARE: f64 = 0.05;

/// The governor a frequency variant asks for.
pub const TARGET_GOVERNOR: &str = "performance";

/// The optimisation flags a build variant adds when the declared build lacks them.
pub const BUILD_FLAGS: [&str; 2] = ["-O3", "-march=native"];

/// The reason of every dimension no rule measures.
pub const BY_HAND: &str = "no measured fact to propose from; add a variant by hand";

/// Threading libraries that read their own thread-count variable, by the file name of
/// the shared library that gives them away.
pub const THREAD_LIBRARIES: [(&str, &str); 2] = [
    ("libmkl", "MKL_NUM_THREADS"),
    ("libopenblas", "OPENBLAS_NUM_THREADS"),
];

/// A count as it is read: "2", or "1.5" for a median between two.
fn num(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// "1.0 of 2 allotted cores busy per task, 1 thread" ("per run" for local runs).
fn usage_figure(u: &Usage, launched: bool) -> String {
    let threads = u
        .threads
        .map(|t| format!(", {} thread{}", num(t), if t == 1.0 { "" } else { "s" }))
        .unwrap_or_default();
    format!(
        "{:.1} of {} allotted cores busy per {}{threads}",
        u.cores_used,
        num(u.cores_allotted),
        if launched { "task" } else { "run" }
    )
}

/// `l2_threading_model`: idle allotted cores with `OMP_NUM_THREADS` unset or below the
/// allotment → as many threads as cores (bound, spread, one per core; `cpus_per_task`
/// set to them); more threads than cores, all busy → as many threads as
/// cores; otherwise nothing to change.
pub fn threads(f: &Facts) -> Outcome {
    const DIM: &str = "l2_threading_model";
    let Some(u) = f.usage else {
        return Outcome::verdict(
            DIM,
            Verdict::ApplicableNotMeasured,
            "the baseline's runs recorded no per-task utilisation; add a variant by hand",
            None,
        );
    };
    let figure = usage_figure(&u, f.launcher.is_some());
    let cores = u.cores_allotted.round() as u32;
    let omp: Option<u32> = f.env.get("OMP_NUM_THREADS").and_then(|v| v.parse().ok());
    let omp_words = omp.map_or("OMP_NUM_THREADS unset".to_string(), |n| {
        format!("OMP_NUM_THREADS={n}")
    });
    let description = match finding(&u.figures()) {
        Some(UtilisationFinding::IdleCores) if omp.is_none_or(|n| n < cores) => format!(
            "the baseline kept {figure} with {omp_words}: one OpenMP thread per allotted core, spread and bound"
        ),
        Some(UtilisationFinding::IdleCores) => {
            return Outcome::verdict(
                DIM,
                Verdict::ApplicableNotMeasured,
                format!(
                    "the baseline kept {figure} although {omp_words} already fills them: the idle cores are not the OpenMP thread count's; add a variant by hand"
                ),
                Some(figure),
            );
        }
        Some(UtilisationFinding::Oversubscribed) => format!(
            "the baseline ran {figure} with {omp_words}: more threads than cores; one thread per allotted core"
        ),
        None => {
            return Outcome::verdict(
                DIM,
                Verdict::NotApplicable,
                format!("the baseline kept {figure}: no idle cores and no more threads than cores"),
                Some(figure),
            );
        }
    };
    Outcome::Variant(ProposedVariant {
        name: format!("threads-{cores}"),
        dimension: DIM,
        description,
        figure,
        env: thread_env(cores, &f.linked),
        // Pre-flight refuses more threads than the arm's CPUs, locally too.
        cpus_per_task: Some(cores),
        build: None,
        governor: None,
    })
}

/// `cores` threads, spread over the cores and bound to them; the thread count of every
/// threading library the app links set the same.
fn thread_env(cores: u32, linked: &[String]) -> BTreeMap<String, String> {
    let mut env = BTreeMap::from([
        ("OMP_NUM_THREADS".to_string(), cores.to_string()),
        ("OMP_PROC_BIND".to_string(), "spread".to_string()),
        ("OMP_PLACES".to_string(), "cores".to_string()),
    ]);
    for (library, var) in THREAD_LIBRARIES {
        if linked.iter().any(|l| l.starts_with(library)) {
            env.insert(var.to_string(), cores.to_string());
        }
    }
    env
}

/// `l3_numa_affinity`: more than one NUMA node → threads bound to cores, spread over the
/// nodes; one → `not_applicable`.
pub fn binding(f: &Facts) -> Outcome {
    const DIM: &str = "l3_numa_affinity";
    let n = f.node.numa_nodes;
    let nodes = if n == 1 { "NUMA node" } else { "NUMA nodes" };
    let figure = format!("{n} {nodes} on {}", f.node.hostname);
    if n <= 1 {
        return Outcome::verdict(
            DIM,
            Verdict::NotApplicable,
            format!("{figure}: no remote memory to keep threads away from"),
            Some(figure),
        );
    }
    Outcome::Variant(ProposedVariant {
        name: "bind-spread".into(),
        dimension: DIM,
        description: format!(
            "{figure}: threads bound to cores and spread over the nodes, each near its memory"
        ),
        figure,
        env: BTreeMap::from([
            ("OMP_PROC_BIND".to_string(), "spread".to_string()),
            ("OMP_PLACES".to_string(), "cores".to_string()),
        ]),
        cpus_per_task: None,
        build: None,
        governor: None,
    })
}

/// `l3_frequency_power`: a governor this process can set, not yet `performance` → a
/// variant; no cpufreq, admin-only, already `performance`, or Flux (which cannot set one
/// per job) → `not_applicable` naming why.
pub fn governor(f: &Facts) -> Outcome {
    const DIM: &str = "l3_frequency_power";
    let na = |reason: String| Outcome::verdict(DIM, Verdict::NotApplicable, reason, None);
    let host = &f.node.hostname;
    if !f.node.cpufreq {
        return na(format!(
            "no cpufreq on {host}: the governor cannot be read or set"
        ));
    }
    let current = f.node.governors.join(", ");
    if f.node.governors.iter().all(|g| g == TARGET_GOVERNOR) {
        return na(format!(
            "the governor on {host} is already `{TARGET_GOVERNOR}`"
        ));
    }
    if f.launcher.is_some_and(|l| l.kind == LauncherKind::Flux) {
        return na("Flux sets no governor per job: a governor variant cannot run there".into());
    }
    if let Tunability::NotTunable { reason } = &f.node.governor_tunability
        && f.launcher.is_none()
    {
        return na(format!("admin-only: {reason}"));
    }
    let figure = format!("governor `{current}` on {host}");
    Outcome::Variant(ProposedVariant {
        name: format!("governor-{TARGET_GOVERNOR}"),
        dimension: DIM,
        description: format!(
            "the baseline ran under {figure}, which can be set: `{TARGET_GOVERNOR}`"
        ),
        figure,
        env: BTreeMap::new(),
        cpus_per_task: None,
        build: None,
        governor: Some(TARGET_GOVERNOR.into()),
    })
}

/// `l2_compiler_runtime_flags`: a declared build without `-O3` or `-march=native` → the
/// same build with them (only with a `correctness:` check to catch changed results); no
/// build → `not_applicable`.
pub fn build_flags(f: &Facts) -> Outcome {
    const DIM: &str = "l2_compiler_runtime_flags";
    let Some(command) = &f.build else {
        return Outcome::verdict(
            DIM,
            Verdict::NotApplicable,
            "a binary: no build declared",
            None,
        );
    };
    let missing: Vec<&str> = BUILD_FLAGS
        .into_iter()
        .filter(|flag| !command.split_whitespace().any(|w| w == *flag))
        .collect();
    if missing.is_empty() {
        return Outcome::verdict(
            DIM,
            Verdict::NotApplicable,
            format!("the build already has {}", BUILD_FLAGS.join(" ")),
            None,
        );
    }
    let figure = format!("the build lacks {}", missing.join(" "));
    if !f.has_correctness {
        return Outcome::verdict(
            DIM,
            Verdict::ApplicableNotMeasured,
            format!(
                "{figure}, but the file declares no `correctness:` check to catch a rebuild's changed results; add one and propose again"
            ),
            Some(figure),
        );
    }
    Outcome::Variant(ProposedVariant {
        name: "o3-native".into(),
        dimension: DIM,
        description: format!("{figure}: the same build with {}", BUILD_FLAGS.join(" ")),
        figure,
        env: BTreeMap::new(),
        cpus_per_task: None,
        build: Some(with_build_flags(command)),
        governor: None,
    })
}

/// `command` with its `-O0`…`-O2`/`-Os`/`-Og` replaced by `-O3` (added after the compiler
/// when it has none) and `-march=native` after it when missing.
pub fn with_build_flags(command: &str) -> String {
    let level = regex::Regex::new(r"(^|\s)-O[0-3sg]?(\s|$)").expect("a valid regex");
    let march = if command.split_whitespace().any(|w| w == "-march=native") {
        ""
    } else {
        " -march=native"
    };
    if level.is_match(command) {
        return level
            .replace(command, format!("${{1}}-O3{march}${{2}}"))
            .into_owned();
    }
    match command.split_once(' ') {
        Some((compiler, rest)) => format!("{compiler} -O3{march} {rest}"),
        None => format!("{command} -O3{march}"),
    }
}

/// `l3_hardware_capability`: the vector and matrix extensions the node has, for a variant
/// written by hand that uses them; none beyond the baseline ISA → `not_applicable`.
pub fn capability(f: &Facts) -> Outcome {
    const DIM: &str = "l3_hardware_capability";
    let host = &f.node.hostname;
    if f.node.isa.is_empty() {
        return Outcome::verdict(
            DIM,
            Verdict::NotApplicable,
            format!("{host} has none of AVX2, AVX-512, AMX, SVE: no wider vector unit to target"),
            None,
        );
    }
    let found = f.node.isa.join(", ");
    Outcome::verdict(
        DIM,
        Verdict::ApplicableNotMeasured,
        format!("{host} has {found}: a kernel using them is a variant to add by hand"),
        Some(format!("ISA: {found}")),
    )
}

/// `l1_io_overlap` and `comm_overlap` from the trace's time per category: a negligible
/// share → `not_applicable` with it, else for a variant by hand; no trace → by hand.
pub fn overlap(f: &Facts) -> [Outcome; 2] {
    let one = |dim: &'static str, area: Area| {
        if area == Area::Communication && f.launcher.is_none() && !links_mpi(&f.linked) {
            return Outcome::verdict(
                dim,
                Verdict::NotApplicable,
                "one process: no launcher and no MPI library linked, so nothing to overlap",
                None,
            );
        }
        let Some(t) = &f.trace else {
            return Outcome::verdict(
                dim,
                Verdict::ApplicableNotMeasured,
                format!("{BY_HAND} (no DFTracer trace: no time per category)"),
                None,
            );
        };
        let share = t
            .shares()
            .into_iter()
            .find(|(a, _)| *a == area)
            .map_or(0.0, |s| s.1);
        let figure = format!("{area} {:.1}% of the traced time", 100.0 * share);
        let (verdict, reason) = if share < NEGLIGIBLE_SHARE {
            (Verdict::NotApplicable, format!("{figure}: negligible"))
        } else {
            (
                Verdict::ApplicableNotMeasured,
                format!("{figure}: {BY_HAND}"),
            )
        };
        Outcome::verdict(dim, verdict, reason, Some(figure))
    };
    [
        one("l1_io_overlap", Area::Io),
        one("comm_overlap", Area::Communication),
    ]
}

/// Whether the app links an MPI library (Open MPI's `libmpi`, MPICH's `libmpich`, …).
fn links_mpi(linked: &[String]) -> bool {
    linked.iter().any(|l| l.starts_with("libmpi"))
}

/// The campaign order the trace asks for — the canonical order (I/O → communication →
/// memory → compute) — when I/O or communication has the largest share; None otherwise
/// (no trace, or memory or compute dominates: one experiment).
pub fn campaign_order(f: &Facts) -> Option<(Area, f64)> {
    let t = f.trace.as_ref()?;
    let shares = t.shares();
    let (area, share) = shares
        .into_iter()
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .filter(|(_, s)| *s > 0.0)?;
    matches!(area, Area::Io | Area::Communication).then_some((area, share))
}

/// The dimensions no rule measures: for a variant by hand.
pub fn by_hand(dimension: &'static str) -> Outcome {
    Outcome::verdict(dimension, Verdict::ApplicableNotMeasured, BY_HAND, None)
}
