//! Parsing of `/proc/cpuinfo` (pure functions on its text): per-processor model, vendor,
//! flags (x86 `flags`, Arm `Features`) and Arm MIDR identity, plus naming of Arm cores
//! from their implementer and part numbers, since Arm kernels print no model name.

use std::collections::{BTreeMap, BTreeSet};

/// What `/proc/cpuinfo` says about one logical CPU.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProcessorInfo {
    /// The `processor` number (the logical CPU id).
    pub index: u32,
    /// `vendor_id` on x86 (`GenuineIntel`, `AuthenticAMD`).
    pub vendor_id: Option<String>,
    /// `model name`, trimmed (AMD pads it with spaces).
    pub model_name: Option<String>,
    /// `physical id` (the package) on x86.
    pub physical_id: Option<u32>,
    /// `core id` on x86.
    pub core_id: Option<u32>,
    /// `flags` (x86) or `Features` (Arm), lowercased.
    pub flags: BTreeSet<String>,
    /// Whether a `flags`/`Features` line was present at all (an empty set is then a fact).
    pub has_flag_line: bool,
    /// `CPU implementer` on Arm (e.g. 0x41 for Arm Ltd, 0x4e for NVIDIA).
    pub arm_implementer: Option<u32>,
    /// `CPU part` on Arm (e.g. 0xd85 Cortex-X925).
    pub arm_part: Option<u32>,
    /// `CPU architecture` on Arm (8 for AArch64 kernels).
    pub arm_architecture: Option<String>,
    /// Fallback model fields of other architectures (`cpu` on POWER, `uarch` on RISC-V).
    pub other_model: Option<String>,
}

/// The whole of `/proc/cpuinfo`: one entry per processor block, in file order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cpuinfo {
    /// Processor blocks.
    pub processors: Vec<ProcessorInfo>,
    /// Fields outside any processor block (e.g. Arm's trailing `Hardware`).
    pub globals: BTreeMap<String, String>,
}

fn parse_hex_or_dec(v: &str) -> Option<u32> {
    let v = v.trim();
    match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        Some(hex) => u32::from_str_radix(hex, 16).ok(),
        None => v.parse().ok(),
    }
}

/// Parses the text of `/proc/cpuinfo`. Unknown keys are ignored; a block without a
/// `processor` line contributes to [`Cpuinfo::globals`].
pub fn parse_cpuinfo(text: &str) -> Cpuinfo {
    let mut out = Cpuinfo::default();
    for block in text.split("\n\n") {
        let mut info = ProcessorInfo::default();
        let mut is_processor = false;
        let mut fields: Vec<(String, String)> = Vec::new();
        for line in block.lines() {
            let Some((key, value)) = line.split_once(':') else {
                continue;
            };
            let key = key.trim();
            let value = value.trim();
            fields.push((key.to_string(), value.to_string()));
            match key {
                // Old 32-bit Arm kernels print "Processor : ARMv7 ..." (capitalised) as a
                // model line, not an index, so only the lowercase key counts as one.
                "processor" => {
                    if let Ok(n) = value.parse() {
                        info.index = n;
                        is_processor = true;
                    }
                }
                "vendor_id" => info.vendor_id = Some(value.to_string()),
                "model name" => info.model_name = Some(value.to_string()),
                "physical id" => info.physical_id = value.parse().ok(),
                "core id" => info.core_id = value.parse().ok(),
                "flags" | "Features" => {
                    info.has_flag_line = true;
                    info.flags = value
                        .split_whitespace()
                        .map(str::to_ascii_lowercase)
                        .collect();
                }
                "CPU implementer" => info.arm_implementer = parse_hex_or_dec(value),
                "CPU part" => info.arm_part = parse_hex_or_dec(value),
                "CPU architecture" => info.arm_architecture = Some(value.to_string()),
                "cpu" | "uarch" if info.other_model.is_none() && !value.is_empty() => {
                    info.other_model = Some(value.to_string())
                }
                _ => {}
            }
        }
        if is_processor {
            out.processors.push(info);
        } else {
            out.globals.extend(fields);
        }
    }
    out
}

/// The name of an Arm implementer code, as the Arm architecture manual assigns them.
pub fn arm_implementer_name(code: u32) -> Option<&'static str> {
    Some(match code {
        0x41 => "ARM",
        0x42 => "Broadcom",
        0x43 => "Cavium",
        0x46 => "Fujitsu",
        0x48 => "HiSilicon",
        0x4e => "NVIDIA",
        0x50 => "APM",
        0x51 => "Qualcomm",
        0x53 => "Samsung",
        0x61 => "Apple",
        0x6d => "Microsoft",
        0xc0 => "Ampere",
        _ => return None,
    })
}

/// The core name of an Arm (implementer, part) pair, for the parts seen in HPC and
/// workstation nodes. Unknown pairs get `None`; callers then print the raw numbers.
pub fn arm_part_name(implementer: u32, part: u32) -> Option<&'static str> {
    Some(match (implementer, part) {
        (0x41, 0xd03) => "Cortex-A53",
        (0x41, 0xd05) => "Cortex-A55",
        (0x41, 0xd07) => "Cortex-A57",
        (0x41, 0xd08) => "Cortex-A72",
        (0x41, 0xd0b) => "Cortex-A76",
        (0x41, 0xd0c) => "Neoverse-N1",
        (0x41, 0xd40) => "Neoverse-V1",
        (0x41, 0xd41) => "Cortex-A78",
        (0x41, 0xd44) => "Cortex-X1",
        (0x41, 0xd46) => "Cortex-A510",
        (0x41, 0xd47) => "Cortex-A710",
        (0x41, 0xd48) => "Cortex-X2",
        (0x41, 0xd49) => "Neoverse-N2",
        (0x41, 0xd4d) => "Cortex-A715",
        (0x41, 0xd4e) => "Cortex-X3",
        (0x41, 0xd4f) => "Neoverse-V2",
        (0x41, 0xd80) => "Cortex-A520",
        (0x41, 0xd81) => "Cortex-A720",
        (0x41, 0xd82) => "Cortex-X4",
        (0x41, 0xd84) => "Neoverse-V3",
        (0x41, 0xd85) => "Cortex-X925",
        (0x41, 0xd87) => "Cortex-A725",
        (0x41, 0xd8e) => "Neoverse-N3",
        (0x46, 0x001) => "A64FX",
        (0x48, 0xd01) => "Kunpeng-920",
        (0x4e, 0x004) => "Carmel",
        (0x4e, 0x010) => "Olympus",
        (0xc0, 0xac3) => "AmpereOne",
        _ => return None,
    })
}

impl ProcessorInfo {
    /// The model of this processor in words: x86's `model name`; on Arm the core name
    /// from the MIDR table (or `implementer 0x.. part 0x...` when unknown).
    pub fn model(&self) -> Option<String> {
        if let (Some(imp), Some(part)) = (self.arm_implementer, self.arm_part) {
            return Some(match arm_part_name(imp, part) {
                Some(name) => name.to_string(),
                None => format!("implementer {imp:#04x} part {part:#05x}"),
            });
        }
        self.model_name
            .clone()
            .or_else(|| self.other_model.clone())
            .filter(|m| !m.is_empty())
    }

    /// The vendor in words: x86's `vendor_id`, or the Arm implementer's name.
    pub fn vendor(&self) -> Option<String> {
        if let Some(v) = &self.vendor_id {
            return Some(v.clone());
        }
        let imp = self.arm_implementer?;
        Some(
            arm_implementer_name(imp)
                .map(str::to_string)
                .unwrap_or_else(|| format!("{imp:#04x}")),
        )
    }
}

impl Cpuinfo {
    /// The flags every processor has. A thread may run on any CPU it is allowed, so a
    /// feature present on only some of them cannot be relied on.
    pub fn common_flags(&self) -> BTreeSet<String> {
        let mut iter = self.processors.iter().filter(|p| p.has_flag_line);
        let Some(first) = iter.next() else {
            return BTreeSet::new();
        };
        let mut common = first.flags.clone();
        for p in iter {
            common.retain(|f| p.flags.contains(f));
        }
        common
    }

    /// Distinct models in order of first appearance.
    pub fn models(&self) -> Vec<String> {
        let mut seen = Vec::new();
        for p in &self.processors {
            if let Some(m) = p.model() {
                if !seen.contains(&m) {
                    seen.push(m);
                }
            }
        }
        seen
    }

    /// The machine architecture as `uname -m` names it, inferred from what the kernel
    /// prints: x86 `flags` with `lm` (long mode) is x86_64, Arm `CPU architecture: 8` is
    /// aarch64.
    pub fn arch(&self) -> Option<String> {
        let p = self.processors.first()?;
        if p.vendor_id.is_some() && p.has_flag_line {
            return Some(
                if p.flags.contains("lm") {
                    "x86_64"
                } else {
                    "i686"
                }
                .to_string(),
            );
        }
        match p.arm_architecture.as_deref() {
            Some("8") => Some("aarch64".to_string()),
            Some(v) if v.starts_with('7') => Some("armv7l".to_string()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Two processor blocks as an AVX-512 Xeon prints them (shortened flags line).
    const XEON: &str = "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Silver 4108 CPU @ 1.80GHz\nphysical id\t: 0\ncore id\t\t: 0\nflags\t\t: fpu lm avx2 avx512f avx512_bf16\nvmx flags\t: vnmi ept\n\nprocessor\t: 1\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Silver 4108 CPU @ 1.80GHz\nphysical id\t: 1\ncore id\t\t: 3\nflags\t\t: fpu lm avx2 avx512f\n\n";

    // As an aarch64 kernel prints a big.LITTLE pair: no model name, MIDR fields instead.
    const ARM: &str = "processor\t: 0\nBogoMIPS\t: 2000.00\nFeatures\t: fp asimd sve sve2 bf16\nCPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x0\nCPU part\t: 0xd87\nCPU revision\t: 1\n\nprocessor\t: 1\nBogoMIPS\t: 2000.00\nFeatures\t: fp asimd sve sve2 bf16\nCPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x0\nCPU part\t: 0xd85\nCPU revision\t: 1\n";

    #[test]
    fn x86_fields_and_common_flags() {
        let info = parse_cpuinfo(XEON);
        assert_eq!(info.processors.len(), 2);
        assert_eq!(info.processors[1].index, 1);
        assert_eq!(info.processors[1].physical_id, Some(1));
        assert_eq!(info.processors[1].core_id, Some(3));
        assert_eq!(
            info.models(),
            vec!["Intel(R) Xeon(R) Silver 4108 CPU @ 1.80GHz"]
        );
        // avx512_bf16 is on CPU 0 only, so it is not common; "vmx flags" is not "flags".
        let common = info.common_flags();
        assert!(common.contains("avx512f") && common.contains("avx2"));
        assert!(!common.contains("avx512_bf16"));
        assert!(!common.contains("vnmi"));
        assert_eq!(info.arch().as_deref(), Some("x86_64"));
        assert_eq!(info.processors[0].vendor().as_deref(), Some("GenuineIntel"));
    }

    #[test]
    fn arm_models_from_midr_in_order_of_appearance() {
        let info = parse_cpuinfo(ARM);
        assert_eq!(info.models(), vec!["Cortex-A725", "Cortex-X925"]);
        assert_eq!(info.arch().as_deref(), Some("aarch64"));
        assert_eq!(info.processors[0].vendor().as_deref(), Some("ARM"));
        assert!(info.common_flags().contains("sve2"));
    }

    #[test]
    fn unknown_arm_part_prints_numbers() {
        let p = ProcessorInfo {
            arm_implementer: Some(0x99),
            arm_part: Some(0x123),
            ..Default::default()
        };
        assert_eq!(p.model().as_deref(), Some("implementer 0x99 part 0x123"));
        assert_eq!(p.vendor().as_deref(), Some("0x99"));
    }

    #[test]
    fn trailing_global_block_is_kept_apart() {
        let info = parse_cpuinfo("processor\t: 0\nFeatures\t: fp\n\nHardware\t: BCM2835\n");
        assert_eq!(info.processors.len(), 1);
        assert_eq!(
            info.globals.get("Hardware").map(String::as_str),
            Some("BCM2835")
        );
    }
}
