//! The human-readable form of a [`Probe`] (`optgate probe` without `--json`): a short
//! aligned list of facts, the way `lscpu` reads, with tunability said in words.

use std::fmt::Write as _;

use crate::types::Probe;

fn gib(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64)
}

fn or_unknown(v: &Option<String>) -> &str {
    v.as_deref().unwrap_or("unknown")
}

/// Appends one `Label: value` line, the label padded so values line up.
fn push_line(out: &mut String, label: &str, value: &str) {
    let _ = writeln!(out, "{:<18} {}", format!("{label}:"), value);
}

/// Renders the probe for people. Every line is `Label: value`, flags on one line as
/// `lscpu` prints them, with the ISA line summarising what matters in them.
pub fn render_text(p: &Probe) -> String {
    let mut out = String::new();
    push_identity_and_topology(&mut out, p);
    push_isa(&mut out, p);
    push_cpufreq(&mut out, p);
    if p.live {
        push_allocation(&mut out, p);
        push_gpus(&mut out, p);
    }
    for n in &p.notes {
        push_line(&mut out, "Note", n);
    }
    out
}

/// Host, kernel, CPU identity, topology, core kinds, NUMA nodes and memory.
fn push_identity_and_topology(out: &mut String, p: &Probe) {
    let mut line = |label: &str, value: &str| push_line(out, label, value);
    line("Host", or_unknown(&p.hostname));
    line("Kernel", or_unknown(&p.kernel));
    line("Architecture", or_unknown(&p.arch));
    line("CPU model", or_unknown(&p.cpu_model));
    line("CPU vendor", or_unknown(&p.cpu_vendor));
    line(
        "Topology",
        &format!(
            "{} socket(s), {} core(s), {} thread(s), up to {} thread(s) per core",
            p.sockets, p.physical_cores, p.hardware_threads, p.threads_per_core
        ),
    );
    line("Online CPUs", &p.online_cpus);
    for k in &p.core_kinds {
        let freq = k
            .max_khz
            .map(|f| format!(", max {} MHz", f / 1000))
            .unwrap_or_default();
        line(
            "Core kind",
            &format!(
                "{}: CPUs {} ({} core(s), {} thread(s){freq})",
                k.name, k.cpus, k.physical_cores, k.hardware_threads
            ),
        );
    }
    let numa: Vec<String> = p
        .numa
        .iter()
        .map(|n| format!("node{} [{}]", n.id, n.cpus))
        .collect();
    line(
        "NUMA nodes",
        &if numa.is_empty() {
            p.numa_nodes.to_string()
        } else {
            format!("{}: {}", p.numa_nodes, numa.join(", "))
        },
    );
    line(
        "Memory",
        &p.memory_total_bytes
            .map(gib)
            .unwrap_or_else(|| "unknown".to_string()),
    );
}

/// The ISA summary line and the raw flags line.
fn push_isa(out: &mut String, p: &Probe) {
    let i = &p.isa;
    let mut isa: Vec<String> = Vec::new();
    for (on, name) in [
        (i.sse4_2, "sse4.2"),
        (i.avx, "avx"),
        (i.avx2, "avx2"),
        (i.fma, "fma"),
        (i.avx_vnni, "avx-vnni"),
        (i.neon, "neon"),
        (i.sve, "sve"),
        (i.sve2, "sve2"),
        (i.sme, "sme"),
        (i.bf16, "bf16"),
    ] {
        if on {
            isa.push(name.to_string());
        }
    }
    if !i.avx512.is_empty() {
        isa.push(format!("avx512 ({})", i.avx512.join(" ")));
    }
    if i.amx {
        isa.push(format!("amx ({})", i.amx_types.join(" ")));
    }
    push_line(
        out,
        "ISA",
        &if isa.is_empty() {
            "none recognised".to_string()
        } else {
            isa.join(", ")
        },
    );
    push_line(out, "Flags", &p.flags.join(" "));
}

/// Governor, driver and writability, the governors offered, and CPUs without cpufreq.
fn push_cpufreq(out: &mut String, p: &Probe) {
    let f = &p.cpufreq;
    if !f.present {
        push_line(out, "Governor", "no cpufreq");
        return;
    }
    push_line(
        out,
        "Governor",
        &format!(
            "{} (driver {}; {})",
            if f.governors.is_empty() {
                "unknown".to_string()
            } else {
                f.governors.join(", ")
            },
            if f.drivers.is_empty() {
                "unknown".to_string()
            } else {
                f.drivers.join(", ")
            },
            if f.governor_writable {
                "writable"
            } else {
                "not writable by this user"
            }
        ),
    );
    let mut available: Vec<&str> = f
        .policies
        .iter()
        .flat_map(|p| p.available_governors.iter().map(String::as_str))
        .collect();
    available.sort_unstable();
    available.dedup();
    push_line(out, "Governors offered", &available.join(" "));
    if !f.cpus_without_cpufreq.is_empty() {
        push_line(out, "No cpufreq on", &f.cpus_without_cpufreq);
    }
}

/// The scheduler allocation this probe ran inside (if any) and the CPUs it allows.
fn push_allocation(out: &mut String, p: &Probe) {
    match &p.allocation {
        Some(a) if a.scheduler.is_some() => {
            let mut parts = vec![format!(
                "{} job {}",
                or_unknown(&a.scheduler),
                or_unknown(&a.job_id)
            )];
            if let Some(n) = a.ntasks {
                parts.push(format!("{n} task(s)"));
            }
            if let Some(c) = a.cpus_per_task {
                parts.push(format!("{c} CPU(s) per task"));
            }
            if let Some(c) = a.cpus_on_node {
                parts.push(format!("{c} CPU(s) on node"));
            }
            if let Some(n) = &a.nodelist {
                parts.push(format!("nodes {n}"));
            }
            push_line(out, "Allocation", &parts.join(", "));
        }
        _ => push_line(out, "Allocation", "none (not inside a Slurm or Flux job)"),
    }
    if let Some(a) = &p.allocation {
        if let (Some(list), Some(n)) = (&a.allowed_cpus, a.allowed_cpu_count) {
            push_line(out, "Allowed CPUs", &format!("{list} ({n})"));
        }
    }
}

/// One line per GPU, or one line saying none were found and which tools were looked for.
fn push_gpus(out: &mut String, p: &Probe) {
    if p.gpus.is_empty() {
        let tools = if p.gpu_tools_found.is_empty() {
            "no vendor tool on PATH".to_string()
        } else {
            format!("tools found: {}", p.gpu_tools_found.join(", "))
        };
        push_line(out, "GPUs", &format!("none ({tools})"));
    }
    for g in &p.gpus {
        let mem = g
            .memory_total_bytes
            .map(gib)
            .unwrap_or_else(|| "memory n/a".to_string());
        let drv = g
            .driver_version
            .as_deref()
            .map(|d| format!(", driver {d}"))
            .unwrap_or_default();
        push_line(
            out,
            &format!("GPU {}", g.index),
            &format!("{} ({mem}{drv})", g.name),
        );
    }
}
