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

/// Renders the probe for people. Every line is `Label: value`, flags on one line as
/// `lscpu` prints them, with the ISA line summarising what matters in them.
pub fn render_text(p: &Probe) -> String {
    let mut out = String::new();
    let mut line = |label: &str, value: &str| {
        let _ = writeln!(out, "{:<18} {}", format!("{label}:"), value);
    };
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
    line(
        "ISA",
        &if isa.is_empty() {
            "none recognised".to_string()
        } else {
            isa.join(", ")
        },
    );
    line("Flags", &p.flags.join(" "));

    let f = &p.cpufreq;
    if f.present {
        line(
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
        line("Governors offered", &available.join(" "));
        if !f.cpus_without_cpufreq.is_empty() {
            line("No cpufreq on", &f.cpus_without_cpufreq);
        }
    } else {
        line("Governor", "no cpufreq");
    }

    if p.live {
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
                line("Allocation", &parts.join(", "));
            }
            _ => line("Allocation", "none (not inside a Slurm or Flux job)"),
        }
        if let Some(a) = &p.allocation {
            if let (Some(list), Some(n)) = (&a.allowed_cpus, a.allowed_cpu_count) {
                line("Allowed CPUs", &format!("{list} ({n})"));
            }
        }
        if p.gpus.is_empty() {
            let tools = if p.gpu_tools_found.is_empty() {
                "no vendor tool on PATH".to_string()
            } else {
                format!("tools found: {}", p.gpu_tools_found.join(", "))
            };
            line("GPUs", &format!("none ({tools})"));
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
            line(
                &format!("GPU {}", g.index),
                &format!("{} ({mem}{drv})", g.name),
            );
        }
    }
    for n in &p.notes {
        line("Note", n);
    }
    out
}
