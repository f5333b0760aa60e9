//! The probe on real captured trees (tests/fixtures/hwloc-topologies, from hwloc's test
//! suite): exact facts read off each capture by hand — model, sockets, cores, threads,
//! NUMA, flags, cpufreq. A missing capture fails the test, naming its path.

use crate::common;

use optgate_probe::governor::{CpuSelection, GovernorGuard, Tunability, TuneVia, tunability};
use optgate_probe::{Probe, has_capability, probe};

const KIB: u64 = 1024;

/// The JSON form reads back to the same record, and the text form names the model.
fn round_trips(p: &Probe) {
    let json = serde_json::to_string(p).unwrap();
    let back: Probe = serde_json::from_str(&json).unwrap();
    assert_eq!(&back, p);
    let text = optgate_probe::render_text(p);
    assert!(text.contains(p.cpu_model.as_deref().unwrap()), "{text}");
}

fn flag(p: &Probe, f: &str) -> bool {
    p.flags.iter().any(|x| x == f)
}

#[test]
fn xeon_silver_4108_two_sockets_avx512_no_cpufreq() {
    let fx = common::fixture("32intel64-2p8co2t+8ve");
    let p = probe(&fx.root).unwrap();
    round_trips(&p);
    assert_eq!(
        p.cpu_model.as_deref(),
        Some("Intel(R) Xeon(R) Silver 4108 CPU @ 1.80GHz")
    );
    assert_eq!(p.cpu_vendor.as_deref(), Some("GenuineIntel"));
    assert_eq!(p.arch.as_deref(), Some("x86_64"));
    assert_eq!(p.hostname.as_deref(), Some("ve"));
    assert_eq!(p.kernel.as_deref(), Some("3.10.0-1160.15.2.el7.x86_64"));
    // 2 packages × 8 cores × 2 threads; `possible` is 0-111 but only 0-31 are online.
    assert_eq!(
        (
            p.sockets,
            p.physical_cores,
            p.hardware_threads,
            p.threads_per_core
        ),
        (2, 16, 32, 2)
    );
    assert_eq!(p.online_cpus, "0-31");
    assert!(p.core_kinds.is_empty());
    assert_eq!(p.numa_nodes, 2);
    assert_eq!(p.numa[0].cpus, "0-7,16-23");
    assert_eq!(p.numa[1].cpus, "8-15,24-31");
    assert_eq!(p.numa[0].memory_total_bytes, Some(47925628 * KIB));
    assert_eq!(p.numa[1].memory_total_bytes, Some(49519964 * KIB));
    assert_eq!(p.memory_total_bytes, Some(97445600 * KIB));
    assert_eq!(p.flags.len(), 132);
    for f in [
        "avx2", "fma", "avx512f", "avx512dq", "avx512cd", "avx512bw", "avx512vl",
    ] {
        assert!(flag(&p, f), "{f}");
    }
    assert_eq!(
        p.isa.avx512,
        vec!["avx512bw", "avx512cd", "avx512dq", "avx512f", "avx512vl"]
    );
    assert!(!p.isa.amx && !p.isa.bf16 && !p.isa.avx_vnni);
    assert!(has_capability(&p, "avx512"));
    assert!(has_capability(&p, "AVX-512"));
    assert!(has_capability(&p, "avx512_f"));
    assert!(has_capability(&p, "sse4.2"));
    assert!(!has_capability(&p, "avx512_bf16"));
    assert!(!has_capability(&p, "amx"));
    assert!(!has_capability(&p, "neon"));
    // The capture has intel_pstate's global directory but no per-CPU cpufreq.
    assert!(!p.cpufreq.present);
    assert_eq!(p.cpufreq.cpus_without_cpufreq, "0-31");
    assert!(p.cpufreq.policies.is_empty());
    assert!(!p.cpufreq.governor_writable);
    let text = optgate_probe::render_text(&p);
    assert!(
        text.lines()
            .any(|l| l.starts_with("Governor:") && l.ends_with("no cpufreq")),
        "{text}"
    );
    assert!(
        text.contains("2 socket(s), 16 core(s), 32 thread(s), up to 2 thread(s) per core"),
        "{text}"
    );
    match tunability(&fx.root, None) {
        Tunability::NotTunable { reason } => {
            assert!(reason.starts_with("no cpufreq on ve ("), "{reason}");
            assert!(
                reason.ends_with("/sys/devices/system/cpu/cpu0/cpufreq does not exist)"),
                "{reason}"
            );
        }
        other => panic!("expected not tunable, got {other:?}"),
    }
}

#[test]
fn gb10_arm_big_little_with_cppc_cpufreq() {
    let fx = common::fixture("nvidia-dgx-gb10");
    let p = probe(&fx.root).unwrap();
    round_trips(&p);
    // No `model name` on Arm: the cores are named from CPU implementer 0x41 and parts
    // 0xd87 (CPUs 0-4, 10-14) and 0xd85 (CPUs 5-9, 15-19).
    assert_eq!(p.cpu_model.as_deref(), Some("Cortex-A725 + Cortex-X925"));
    assert_eq!(p.cpu_vendor.as_deref(), Some("ARM"));
    assert_eq!(p.arch.as_deref(), Some("aarch64"));
    assert_eq!(p.hostname.as_deref(), Some("cfarm107"));
    assert_eq!(p.kernel.as_deref(), Some("6.17.0-1014-nvidia"));
    // physical_package_id is 36 on every CPU: one socket.
    assert_eq!(
        (
            p.sockets,
            p.physical_cores,
            p.hardware_threads,
            p.threads_per_core
        ),
        (1, 20, 20, 1)
    );
    assert_eq!(p.numa_nodes, 1);
    assert_eq!(p.numa[0].cpus, "0-19");
    assert_eq!(p.memory_total_bytes, Some(125508468 * KIB));
    assert_eq!(p.core_kinds.len(), 2);
    let (little, big) = (&p.core_kinds[0], &p.core_kinds[1]);
    assert_eq!(
        (
            little.name.as_str(),
            little.basis.as_str(),
            little.cpus.as_str()
        ),
        ("Cortex-A725", "midr", "0-4,10-14")
    );
    assert_eq!((little.physical_cores, little.max_khz), (10, Some(2808000)));
    assert_eq!(
        (big.name.as_str(), big.cpus.as_str()),
        ("Cortex-X925", "5-9,15-19")
    );
    assert_eq!((big.physical_cores, big.max_khz), (10, Some(3900000)));
    assert_gb10_features(&p);
    assert_gb10_cpufreq(&p, &fx.root);
    let text = optgate_probe::render_text(&p);
    assert!(
        text.contains("Cortex-X925: CPUs 5-9,15-19 (10 core(s), 10 thread(s), max 3900 MHz)"),
        "{text}"
    );
    assert!(
        text.lines().any(|l| l.starts_with("Governor:")
            && l.contains("performance (driver cppc_cpufreq; writable)")),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("Flags:") && l.contains(" sve2 ")),
        "{text}"
    );
}

/// GB10's `Features` (not `flags`): Arm SIMD, SVE2 and BF16; no x86 extension, no GPU.
fn assert_gb10_features(p: &Probe) {
    assert_eq!(p.flags.len(), 49);
    for f in [
        "fp", "asimd", "sve", "sve2", "bf16", "i8mm", "svebf16", "atomics",
    ] {
        assert!(flag(p, f), "{f}");
    }
    assert!(p.isa.neon && p.isa.sve && p.isa.sve2 && p.isa.bf16 && p.isa.fma);
    assert!(!p.isa.sme && !p.isa.avx2 && p.isa.avx512.is_empty());
    assert!(has_capability(p, "neon") && has_capability(p, "asimd") && has_capability(p, "SVE2"));
    assert!(has_capability(p, "bf16"));
    assert!(
        has_capability(p, "fma"),
        "FMA is part of AArch64's base SIMD"
    );
    assert!(
        !has_capability(p, "avx2") && !has_capability(p, "avx512") && !has_capability(p, "sme")
    );
    assert!(
        !has_capability(p, "gpu"),
        "GPUs are not known from a captured tree"
    );
}

/// GB10's cpufreq: one policy per CPU, in CPU order, under cppc_cpufreq; the governor of
/// the unpacked copy at `root` is writable through sysfs.
fn assert_gb10_cpufreq(p: &Probe, root: &std::path::Path) {
    // One policy per CPU, all `performance` under cppc_cpufreq, six governors offered.
    let f = &p.cpufreq;
    assert!(f.present);
    assert_eq!(f.cpus_without_cpufreq, "");
    assert_eq!(f.policies.len(), 20);
    assert_eq!(f.governors, vec!["performance"]);
    assert_eq!(f.drivers, vec!["cppc_cpufreq"]);
    let p0 = &f.policies[0];
    assert_eq!((p0.name.as_str(), p0.cpus.as_str()), ("policy0", "0"));
    assert_eq!(
        p0.available_governors,
        vec![
            "conservative",
            "ondemand",
            "userspace",
            "powersave",
            "performance",
            "schedutil"
        ]
    );
    assert_eq!((p0.min_khz, p0.max_khz), (Some(338000), Some(2808000)));
    assert_eq!(p0.base_khz, None);
    let p5 = &f.policies[5];
    assert_eq!((p5.name.as_str(), p5.cpus.as_str()), ("policy5", "5"));
    assert_eq!((p5.min_khz, p5.max_khz), (Some(1378000), Some(3900000)));
    // Policies are in CPU order, not path order (policy10 after policy9).
    assert_eq!(f.policies[10].name, "policy10");
    // The unpacked copy belongs to whoever unpacked it, so it is writable.
    assert!(f.governor_writable);
    assert_eq!(
        tunability(root, None),
        Tunability::Tunable {
            via: TuneVia::Sysfs
        }
    );
}

#[test]
fn gb10_copy_governor_change_and_restore() {
    let fx = common::fixture("nvidia-dgx-gb10");
    let state = tempfile::tempdir().unwrap();
    let restore_file = state.path().join("governor.restore");
    let gov = |cpu: u32| {
        std::fs::read_to_string(fx.root.join(format!(
            "sys/devices/system/cpu/cpufreq/policy{cpu}/scaling_governor"
        )))
        .unwrap()
        .trim()
        .to_string()
    };
    {
        let guard = GovernorGuard::set(
            &fx.root,
            "schedutil",
            &CpuSelection::AllOnline,
            &restore_file,
        )
        .unwrap();
        assert_eq!(guard.changes().len(), 20);
        assert!(
            guard
                .changes()
                .iter()
                .all(|c| c.previous == "performance" && c.new == "schedutil")
        );
        assert_eq!(gov(0), "schedutil");
        assert_eq!(gov(19), "schedutil");
        assert!(restore_file.is_file());
        assert_eq!(
            probe(&fx.root).unwrap().cpufreq.governors,
            vec!["schedutil"]
        );
    }
    assert_eq!(gov(0), "performance");
    assert_eq!(gov(19), "performance");
    assert!(!restore_file.exists());
    // intel_pstate-style refusals are caught before anything is written.
    let err =
        GovernorGuard::set(&fx.root, "turbo", &CpuSelection::AllOnline, &restore_file).unwrap_err();
    assert!(err.to_string().contains("not offered"), "{err}");
    assert!(!restore_file.exists());
}

#[test]
fn hybrid_i7_1370p_p_and_e_cores() {
    let fx = common::fixture("20em64t-hybrid-1p6c2t+2ca4co1t");
    let p = probe(&fx.root).unwrap();
    round_trips(&p);
    assert_eq!(
        p.cpu_model.as_deref(),
        Some("13th Gen Intel(R) Core(TM) i7-1370P")
    );
    assert_eq!(p.hostname.as_deref(), Some("vesubie"));
    assert_eq!(p.kernel.as_deref(), Some("6.1.0-13-amd64"));
    // 6 P-cores with 2 threads (core ids 0,4,…,20) and 8 E-cores with 1 (core ids
    // 24-31): 14 cores, 20 threads. cpuinfo agrees: "cpu cores : 14".
    assert_eq!(
        (
            p.sockets,
            p.physical_cores,
            p.hardware_threads,
            p.threads_per_core
        ),
        (1, 14, 20, 2)
    );
    assert_eq!(p.core_kinds.len(), 2);
    let (perf, eff) = (&p.core_kinds[0], &p.core_kinds[1]);
    assert_eq!(
        (perf.name.as_str(), perf.basis.as_str(), perf.cpus.as_str()),
        ("performance", "base_frequency", "0-11")
    );
    assert_eq!((perf.physical_cores, perf.hardware_threads), (6, 12));
    assert_eq!(
        (perf.base_khz, perf.max_khz),
        (Some(1900000), Some(5200000))
    );
    assert_eq!(
        (eff.name.as_str(), eff.cpus.as_str()),
        ("efficiency", "12-19")
    );
    assert_eq!((eff.physical_cores, eff.hardware_threads), (8, 8));
    assert_eq!((eff.base_khz, eff.max_khz), (Some(1400000), Some(3900000)));
    assert_eq!(p.numa_nodes, 1);
    assert_eq!(p.memory_total_bytes, Some(32489496 * KIB));
    assert_eq!(p.flags.len(), 137);
    assert!(p.isa.avx2 && p.isa.fma && p.isa.avx_vnni);
    assert!(p.isa.avx512.is_empty(), "Raptor Lake has AVX-512 fused off");
    assert!(
        has_capability(&p, "avx2")
            && has_capability(&p, "avx_vnni")
            && has_capability(&p, "sha_ni")
    );
    assert!(!has_capability(&p, "avx512"));
    let f = &p.cpufreq;
    assert_eq!(f.policies.len(), 20);
    assert_eq!(f.governors, vec!["powersave"]);
    assert_eq!(f.drivers, vec!["intel_pstate"]);
    assert!(
        f.policies
            .iter()
            .all(|x| x.available_governors == ["performance", "powersave"])
    );
    assert_eq!(f.policies[0].max_khz, Some(5000000));
    assert_eq!(f.policies[4].max_khz, Some(5200000));
    assert_eq!(f.policies[12].max_khz, Some(3900000));
    assert_eq!(f.policies[12].base_khz, Some(1400000));
}

#[test]
fn opteron_6276_four_sockets_eight_numa_nodes() {
    let fx = common::fixture("64amd64-4s2n4ca2co");
    let p = probe(&fx.root).unwrap();
    round_trips(&p);
    // Trailing blanks of the model name are the kernel's padding, not part of it.
    assert_eq!(
        p.cpu_model.as_deref(),
        Some("AMD Opteron(TM) Processor 6276")
    );
    assert_eq!(p.cpu_vendor.as_deref(), Some("AuthenticAMD"));
    assert_eq!(p.arch.as_deref(), Some("x86_64"));
    assert_eq!(p.hostname, None);
    assert_eq!(p.kernel, None);
    // Each die numbers its cores 0-7 again (cpu0 and cpu8 are both core 0 of package 0),
    // and compute-unit pairs are listed as siblings with distinct core ids: 64 cores of
    // one thread each, as hwloc counts them.
    assert_eq!(
        (
            p.sockets,
            p.physical_cores,
            p.hardware_threads,
            p.threads_per_core
        ),
        (4, 64, 64, 1)
    );
    assert_eq!(p.numa_nodes, 8);
    assert_eq!(
        p.numa.iter().map(|n| n.cpus.as_str()).collect::<Vec<_>>(),
        [
            "0-7", "8-15", "16-23", "24-31", "32-39", "40-47", "48-55", "56-63"
        ]
    );
    assert_eq!(p.numa[5].memory_total_bytes, Some(8388608 * KIB));
    assert_eq!(p.memory_total_bytes, Some(123994388 * KIB));
    assert_eq!(p.flags.len(), 70);
    assert!(flag(&p, "fma4") && flag(&p, "xop") && flag(&p, "avx"));
    assert!(!p.isa.avx2 && !p.isa.fma, "FMA4 is not FMA3");
    assert!(!has_capability(&p, "fma") && has_capability(&p, "fma4"));
    assert!(!p.cpufreq.present);
    match tunability(&fx.root, None) {
        Tunability::NotTunable { reason } => {
            assert!(reason.starts_with("no cpufreq on this node ("), "{reason}")
        }
        other => panic!("expected not tunable, got {other:?}"),
    }
}
