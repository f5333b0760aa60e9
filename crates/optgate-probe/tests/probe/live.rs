//! The probe on this machine's real /proc and /sys, checked against what `nproc` and
//! `lscpu` say, plus the live-only facts (host name, allocation, GPUs) and governor
//! tunability of this very node.

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use optgate_probe::governor::{Tunability, TuneVia, tunability};
use optgate_probe::{has_capability, probe, probe_live};

fn run(cmd: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(cmd)
        .args(args)
        .env("LC_ALL", "C")
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

fn lscpu() -> Option<BTreeMap<String, String>> {
    let text = run("lscpu", &[])?;
    Some(
        text.lines()
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
            .collect(),
    )
}

#[test]
fn matches_nproc_and_lscpu() {
    let p = probe(Path::new("/")).unwrap();
    let offline = std::fs::read_to_string("/sys/devices/system/cpu/offline").unwrap_or_default();
    let nproc_all: u32 = run("nproc", &["--all"])
        .expect("nproc")
        .trim()
        .parse()
        .unwrap();
    if offline.trim().is_empty() {
        assert_eq!(p.hardware_threads, nproc_all);
    } else {
        assert!(p.hardware_threads <= nproc_all);
    }
    let Some(l) = lscpu() else {
        common::missing_external(
            "lscpu is not available here: install util-linux (tests/run-all.sh does)",
            "OPTGATE_SKIP_LSCPU",
        );
        return;
    };
    let num = |k: &str| l.get(k).and_then(|v| v.parse::<u32>().ok());
    assert_eq!(
        Some(p.hardware_threads),
        optgate_probe::parse_cpulist(&l["On-line CPU(s) list"]).map(|s| s.len() as u32)
    );
    assert_eq!(Some(p.sockets), num("Socket(s)"), "{l:?}");
    assert_eq!(Some(p.threads_per_core), num("Thread(s) per core"), "{l:?}");
    if p.core_kinds.is_empty() {
        assert_eq!(
            Some(p.physical_cores),
            num("Core(s) per socket").map(|c| c * p.sockets),
            "{l:?}"
        );
    }
    assert_eq!(
        p.cpu_model.as_deref(),
        l.get("Model name").map(String::as_str)
    );
    if let Some(n) = num("NUMA node(s)") {
        assert_eq!(p.numa_nodes, n);
    }
    let lscpu_flags: Vec<&str> = l
        .get("Flags")
        .map(|f| f.split_whitespace().collect())
        .unwrap_or_default();
    for f in &lscpu_flags {
        assert!(
            p.flags.iter().any(|x| x == f),
            "lscpu lists {f}, the probe does not"
        );
    }
    if lscpu_flags.contains(&"avx2") {
        assert!(p.isa.avx2 && has_capability(&p, "avx2"));
    }
    assert_eq!(p.arch.as_deref(), Some(std::env::consts::ARCH));
}

#[test]
fn live_probe_fills_what_only_the_live_system_has() {
    let p = probe_live();
    assert!(p.live);
    let kernel_hostname = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    assert_eq!(p.hostname.as_deref(), Some(kernel_hostname.trim()));
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    assert_eq!(p.kernel.as_deref(), Some(release.trim()));
    assert!(p.hardware_threads >= 1 && p.physical_cores >= 1);
    assert!(p.memory_total_bytes.unwrap() > 0);
    let a = p
        .allocation
        .as_ref()
        .expect("live probes record the allocation");
    let allowed = a.allowed_cpu_count.expect("Cpus_allowed_list");
    let list = a.allowed_cpus.as_deref().expect("Cpus_allowed_list");
    let allowed_set = optgate_probe::parse_cpulist(list).expect("a CPU list");
    assert!(allowed >= 1, "{list}");
    assert_eq!(allowed_set.len() as u32, allowed, "{list}");
    // The allowed CPUs are hardware threads of this node: a subset of the kernel's
    // online list (whose size is the probe's count), and, where no CPU is offline,
    // exactly as many as `nproc` counts through sched_getaffinity.
    let online_text = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    let online = optgate_probe::parse_cpulist(&online_text).expect("online CPU list");
    assert_eq!(online.len() as u32, p.hardware_threads, "{online_text}");
    let offline = std::fs::read_to_string("/sys/devices/system/cpu/offline").unwrap_or_default();
    let nproc: u32 = {
        // nproc honours these instead of the affinity when they are set.
        let out = Command::new("nproc")
            .env_remove("OMP_NUM_THREADS")
            .env_remove("OMP_THREAD_LIMIT")
            .output()
            .expect("nproc");
        assert!(out.status.success(), "nproc failed");
        String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
    };
    if offline.trim().is_empty() {
        assert!(
            allowed_set.is_subset(&online),
            "allowed {list} is not within online {}",
            online_text.trim()
        );
        assert!(allowed <= p.hardware_threads, "{list}");
        assert_eq!(allowed, nproc, "Cpus_allowed_list {list} vs nproc");
    } else {
        // Affinity masks may name CPUs that are offline now; sched_getaffinity drops them.
        assert!(nproc <= allowed, "nproc {nproc}, Cpus_allowed_list {list}");
    }
    // Whatever the scheduler, only its variables are kept.
    assert!(
        a.env
            .keys()
            .all(|k| k.starts_with("SLURM_") || k.starts_with("FLUX_"))
    );
    assert_eq!(
        a.scheduler.is_some(),
        std::env::var("SLURM_JOB_ID").is_ok() || std::env::var("FLUX_JOB_ID").is_ok()
    );
    // No GPU tool is a fact, not an error: GPUs only ever come from a tool found.
    if p.gpu_tools_found.is_empty() {
        assert!(p.gpus.is_empty());
    }
    let json = serde_json::to_value(&p).unwrap();
    assert!(json["gpus"].is_array() && json["gpu_tools_found"].is_array());
    let text = optgate_probe::render_text(&p);
    assert!(text.contains("Allocation:"), "{text}");
    if p.gpus.is_empty() {
        assert!(text.contains("GPUs:"), "{text}");
    }
}

#[test]
fn this_node_governor_tunability() {
    let t = tunability(Path::new("/"), None);
    let cpu0 = Path::new("/sys/devices/system/cpu/cpu0/cpufreq");
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim()
        .to_string();
    if !cpu0.exists() {
        // This is the path the development machines and CI take: no cpufreq at all.
        match t {
            Tunability::NotTunable { reason } => {
                assert!(reason.contains("cpufreq"), "{reason}");
                assert!(
                    reason.starts_with(&format!("no cpufreq on {host} (")),
                    "{reason}"
                );
                assert!(
                    reason.contains("/sys/devices/system/cpu/cpu0/cpufreq does not exist"),
                    "{reason}"
                );
            }
            other => panic!("no cpufreq here, yet {other:?}"),
        }
        return;
    }
    let writable = nix::unistd::access(
        &cpu0.join("scaling_governor"),
        nix::unistd::AccessFlags::W_OK,
    )
    .is_ok();
    match t {
        Tunability::Tunable { via } => {
            assert!(writable);
            assert_eq!(via, TuneVia::Sysfs);
        }
        Tunability::NotTunable { reason } => {
            assert!(!writable || reason.contains("cpufreq"), "{reason}");
        }
    }
}
