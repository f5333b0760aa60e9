//! The 10 dimensions of the compute-optimization checklist (from the reference text) and
//! the order a report lists them in: I/O → communication → memory → compute.

/// Which resource a dimension is mainly about; the report's recommended application order
/// follows this enum's order.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Area {
    Io,
    Communication,
    Memory,
    Compute,
}

impl Area {
    /// The canonical application order, I/O first.
    pub const ALL: [Area; 4] = [Area::Io, Area::Communication, Area::Memory, Area::Compute];

    /// The word a campaign's `component:` uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Area::Io => "io",
            Area::Communication => "communication",
            Area::Memory => "memory",
            Area::Compute => "compute",
        }
    }

    /// The area named exactly `word` (`io`, `communication`, `memory`, `compute`).
    pub fn parse(word: &str) -> Option<Area> {
        Area::ALL.into_iter().find(|a| a.as_str() == word)
    }
}

impl std::fmt::Display for Area {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One checklist dimension: its id (what `dimension:` and `checklist:` keys use), the
/// reference's title, and its area.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dimension {
    pub id: &'static str,
    pub title: &'static str,
    pub area: Area,
}

/// All 10, in the reference's numbering.
pub const DIMENSIONS: [Dimension; 10] = [
    Dimension {
        id: "l1_vectorization",
        title: "L1 algorithmic/vectorization",
        area: Area::Compute,
    },
    Dimension {
        id: "l1_kernel_library",
        title: "L1 kernel/library selection",
        area: Area::Compute,
    },
    Dimension {
        id: "l1_io_overlap",
        title: "L1 compute/I-O or compute/comm overlap",
        area: Area::Io,
    },
    Dimension {
        id: "l2_compiler_runtime_flags",
        title: "L2 compiler/runtime flags",
        area: Area::Compute,
    },
    Dimension {
        id: "l2_threading_model",
        title: "L2 threading model",
        area: Area::Compute,
    },
    Dimension {
        id: "l2_autotuning",
        title: "L2 auto-tuning",
        area: Area::Compute,
    },
    Dimension {
        id: "l3_frequency_power",
        title: "L3 CPU/GPU frequency & power",
        area: Area::Compute,
    },
    Dimension {
        id: "l3_numa_affinity",
        title: "L3 NUMA/affinity binding",
        area: Area::Memory,
    },
    Dimension {
        id: "l3_hardware_capability",
        title: "L3 hardware capability check",
        area: Area::Compute,
    },
    Dimension {
        id: "comm_overlap",
        title: "Compute/communication overlap",
        area: Area::Communication,
    },
];

/// The dimensions whose changes are safe only when the output is unchanged (a vectorised
/// loop, another kernel library, other compiler flags, auto-tuned parameters can each
/// change the computed result): an accepted variant of one of them without a
/// `correctness` check is shown `accept [output not checked]`, and `validate` warns.
pub const OUTPUT_MUST_MATCH: [&str; 4] = [
    "l1_vectorization",
    "l1_kernel_library",
    "l2_compiler_runtime_flags",
    "l2_autotuning",
];

/// Whether dimension `id`'s changes are safe only when the output is unchanged.
pub fn output_must_match(id: &str) -> bool {
    OUTPUT_MUST_MATCH.contains(&id)
}

pub fn dimension(id: &str) -> Option<&'static Dimension> {
    DIMENSIONS.iter().find(|d| d.id == id)
}

/// The dimensions in report order: by area (I/O first), then by reference number.
pub fn report_order() -> Vec<&'static Dimension> {
    let mut v: Vec<&Dimension> = DIMENSIONS.iter().collect();
    v.sort_by_key(|d| d.area);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_output_dimensions_are_known_ones() {
        for id in OUTPUT_MUST_MATCH {
            assert!(dimension(id).is_some(), "{id}");
        }
        assert!(output_must_match("l1_kernel_library"));
        assert!(!output_must_match("l2_threading_model"));
    }

    #[test]
    fn ids_are_unique_and_order_starts_with_io() {
        let mut ids: Vec<_> = DIMENSIONS.iter().map(|d| d.id).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), 10);
        let order = report_order();
        assert_eq!(order[0].id, "l1_io_overlap");
        assert_eq!(order[1].id, "comm_overlap");
        assert_eq!(order[2].id, "l3_numa_affinity");
        assert_eq!(order[3].id, "l1_vectorization");
    }
}
