//! Instruction-set facts: the [`IsaSummary`] drawn from CPU flags, and
//! [`has_capability`], which answers an experiment's `requires:` entries (CPU flags,
//! their common aliases, and GPU kinds).

use std::collections::BTreeSet;

use crate::types::{IsaSummary, Probe};

/// Summarises the flags that matter for vectorised HPC code.
pub fn summarize(flags: &BTreeSet<String>) -> IsaSummary {
    let has = |f: &str| flags.contains(f);
    IsaSummary {
        sse4_2: has("sse4_2"),
        avx: has("avx"),
        avx2: has("avx2"),
        // AArch64 makes fused multiply-add part of the base FP/ASIMD instruction set.
        fma: has("fma") || has("asimd"),
        avx512: flags
            .iter()
            .filter(|f| f.starts_with("avx512"))
            .cloned()
            .collect(),
        avx_vnni: has("avx_vnni"),
        amx: has("amx_tile"),
        amx_types: flags
            .iter()
            .filter(|f| f.starts_with("amx_"))
            .cloned()
            .collect(),
        neon: has("asimd") || has("neon"),
        sve: has("sve"),
        sve2: has("sve2"),
        sme: has("sme"),
        bf16: has("avx512_bf16") || has("amx_bf16") || has("bf16"),
    }
}

/// Folds a flag or capability name for comparison: lowercase, with `_`, `-`, `.` and
/// spaces dropped, so `AVX-512`, `avx512` and `sse4.2`/`sse4_2` meet, and the kernel's
/// own inconsistencies (`avx512vbmi` but `avx512_vbmi2`) do not matter.
fn fold(name: &str) -> String {
    name.chars()
        .filter(|c| !matches!(c, '_' | '-' | '.' | ' '))
        .flat_map(char::to_lowercase)
        .collect()
}

/// Whether the node has `capability`, as an experiment's `requires:` names it.
///
/// Matching is case-insensitive and ignores `_`, `-` and `.`. Besides any flag of
/// [`Probe::flags`] by its own name, these aliases are understood:
///
/// | asked for | true when |
/// |---|---|
/// | `avx512` | `avx512f` (the AVX-512 foundation every variant needs) |
/// | `amx` | `amx_tile` |
/// | `neon`, `asimd` | `asimd` (AArch64) or `neon` (32-bit Arm) |
/// | `bf16` | `avx512_bf16`, `amx_bf16` or Arm `bf16` |
/// | `fma` | x86 `fma` (FMA3; `fma4` does not count), or `asimd` (AArch64 has FMA in its base) |
/// | `gpu` | any GPU was found |
/// | `nvidia`, `cuda`, `gpu:nvidia` | an NVIDIA GPU was found |
/// | `amd-gpu`, `rocm`, `gpu:amd` | an AMD GPU was found |
/// | `gpu:TEXT` | a GPU whose name contains TEXT (case-insensitive), e.g. `gpu:h100` |
///
/// GPU capabilities are only known on live probes; on a captured tree they are false.
pub fn has_capability(probe: &Probe, capability: &str) -> bool {
    let wanted = capability.trim().to_lowercase();
    if let Some(rest) = wanted.strip_prefix("gpu:") {
        let rest = rest.trim();
        return match rest {
            "nvidia" | "amd" => probe.gpus.iter().any(|g| g.vendor == rest),
            _ => probe
                .gpus
                .iter()
                .any(|g| g.name.to_lowercase().contains(rest)),
        };
    }
    let folded = fold(&wanted);
    let flag = |name: &str| probe.flags.iter().any(|f| fold(f) == fold(name));
    match folded.as_str() {
        "gpu" => !probe.gpus.is_empty(),
        "nvidia" | "cuda" | "nvidiagpu" => probe.gpus.iter().any(|g| g.vendor == "nvidia"),
        "amdgpu" | "rocm" => probe.gpus.iter().any(|g| g.vendor == "amd"),
        "avx512" => flag("avx512f"),
        "amx" => flag("amx_tile"),
        "neon" | "asimd" => flag("asimd") || flag("neon"),
        "bf16" => flag("avx512_bf16") || flag("amx_bf16") || flag("bf16"),
        "fma" => flag("fma") || flag("asimd"),
        "" => false,
        _ => probe.flags.iter().any(|f| fold(f) == folded),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(flags: &[&str]) -> BTreeSet<String> {
        flags.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn x86_summary() {
        let s = summarize(&set(&[
            "sse4_2",
            "avx",
            "avx2",
            "fma",
            "avx512f",
            "avx512_bf16",
            "amx_tile",
            "amx_int8",
        ]));
        assert!(s.sse4_2 && s.avx && s.avx2 && s.fma && s.amx && s.bf16);
        assert_eq!(s.avx512, vec!["avx512_bf16", "avx512f"]);
        assert_eq!(s.amx_types, vec!["amx_int8", "amx_tile"]);
        assert!(!s.neon && !s.sve);
    }

    #[test]
    fn arm_summary() {
        let s = summarize(&set(&["fp", "asimd", "sve", "sve2", "bf16"]));
        assert!(s.neon && s.sve && s.sve2 && s.fma && s.bf16);
        assert!(!s.avx2 && s.avx512.is_empty() && !s.amx && !s.sme);
    }

    #[test]
    fn folding() {
        assert_eq!(fold("AVX-512"), "avx512");
        assert_eq!(fold("sse4.2"), fold("sse4_2"));
        assert_eq!(fold("avx512_vbmi2"), fold("AVX512VBMI2"));
    }
}
