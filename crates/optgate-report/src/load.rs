//! The report's word on load: how many runs were measured at a load above their node's
//! CPUs, said once ("31 of 38 runs were measured at a load above this machine's 2 CPUs:
//! load 2.0–4.9"), beside the per-run interference list that JSON and HTML keep.

use serde::{Deserialize, Serialize};

/// The runs measured under load, summarised.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadSummary {
    /// Complete runs measured at a load above their node's CPUs, and all complete runs.
    pub loaded_runs: usize,
    pub runs: usize,
    /// The CPUs of the loaded runs' nodes, when they all had the same number.
    pub cpus: Option<u32>,
    /// The lowest and highest of the loaded runs' loads (1-minute load averages).
    pub load_min: f64,
    pub load_max: f64,
    /// The blocks that had a loaded run, in order.
    pub loaded_blocks: Vec<u32>,
}

impl LoadSummary {
    /// The one line the text, Markdown and HTML reports show.
    pub fn describe(&self) -> String {
        let over = match self.cpus {
            Some(c) => format!("this machine's {c} CPU{}", if c == 1 { "" } else { "s" }),
            None => "their node's CPUs".to_string(),
        };
        let range = if format!("{:.1}", self.load_min) == format!("{:.1}", self.load_max) {
            format!("load {:.1}", self.load_max)
        } else {
            format!("load {:.1}–{:.1}", self.load_min, self.load_max)
        };
        let blocks = self.loaded_blocks.len();
        format!(
            "{} of {} runs were measured at a load above {over}: {range} ({blocks} block{} \
             affected).",
            self.loaded_runs,
            self.runs,
            if blocks == 1 { "" } else { "s" }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sentence of the LAMMPS run, and its singular and mixed-node forms.
    /// Planted bugs caught: min and max swapped, a range printed for one load.
    #[test]
    fn the_loaded_runs_are_said_in_one_line() {
        let s = LoadSummary {
            loaded_runs: 31,
            runs: 38,
            cpus: Some(2),
            load_min: 2.04,
            load_max: 4.93,
            loaded_blocks: vec![1, 2, 3],
        };
        assert_eq!(
            s.describe(),
            "31 of 38 runs were measured at a load above this machine's 2 CPUs: load 2.0–4.9 \
             (3 blocks affected)."
        );
        let one = LoadSummary {
            loaded_runs: 1,
            cpus: None,
            load_min: 3.01,
            load_max: 3.04,
            loaded_blocks: vec![4],
            ..s
        };
        assert_eq!(
            one.describe(),
            "1 of 38 runs were measured at a load above their node's CPUs: load 3.0 (1 block \
             affected)."
        );
    }
}
