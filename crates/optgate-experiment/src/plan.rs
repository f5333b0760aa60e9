//! The plan: replicates laid out in blocks, each block running every arm once in an order
//! drawn from the experiment's seed. A block's order depends only on the seed and the
//! block's number, so blocks added later (sequential replicates) never reshuffle earlier
//! ones and a plan can be re-derived exactly from what was recorded.

use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::model::Design;
use crate::resolved::Experiment;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedBlock {
    /// 1-based block number; in a blocked design also the replicate number of its runs.
    pub index: u32,
    /// Arm names in the order they run.
    pub order: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedRun {
    /// `b003-omp2`: unique within the experiment, safe as a directory and job name part.
    pub id: String,
    pub block: u32,
    pub replicate: u32,
    pub arm: String,
    /// 0-based position inside the block.
    pub position: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    pub experiment: String,
    pub seed: u64,
    pub design: Design,
    pub arms: Vec<String>,
    pub blocks: Vec<PlannedBlock>,
}

impl Plan {
    /// The experiment's initial plan: `replicates` blocks.
    pub fn for_experiment(exp: &Experiment) -> Plan {
        let mut plan = Plan {
            experiment: exp.name().to_string(),
            seed: exp.file.seed,
            design: exp.file.design,
            arms: exp.arm_names(),
            blocks: Vec::new(),
        };
        plan.extend(exp.file.replicates);
        plan
    }

    /// Appends `count` more blocks (used when replicates are added).
    pub fn extend(&mut self, count: u32) {
        let first = self.blocks.len() as u32 + 1;
        for index in first..first + count {
            self.blocks.push(block_order(self.seed, &self.arms, index));
        }
    }

    /// Every run of the plan, block by block, in execution order.
    pub fn runs(&self) -> Vec<PlannedRun> {
        self.blocks
            .iter()
            .flat_map(|b| {
                b.order
                    .iter()
                    .enumerate()
                    .map(move |(pos, arm)| PlannedRun {
                        id: run_id(b.index, arm),
                        block: b.index,
                        replicate: b.index,
                        arm: arm.clone(),
                        position: pos as u32,
                    })
            })
            .collect()
    }
}

pub fn run_id(block: u32, arm: &str) -> String {
    format!("b{block:03}-{arm}")
}

/// The order of block `index`: a ChaCha stream per block, keyed by the seed.
pub fn block_order(seed: u64, arms: &[String], index: u32) -> PlannedBlock {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(u64::from(index));
    let mut order = arms.to_vec();
    order.shuffle(&mut rng);
    PlannedBlock { index, order }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arms() -> Vec<String> {
        ["baseline", "a", "b", "c"].map(String::from).to_vec()
    }

    #[test]
    fn same_seed_same_order_and_extension_keeps_prefix() {
        let a = block_order(42, &arms(), 3);
        let b = block_order(42, &arms(), 3);
        assert_eq!(a, b);
        let mut p = Plan {
            experiment: "x".into(),
            seed: 7,
            design: Design::Blocked,
            arms: arms(),
            blocks: vec![],
        };
        p.extend(5);
        let first = p.blocks.clone();
        p.extend(3);
        assert_eq!(&p.blocks[..5], &first[..]);
        assert_eq!(p.blocks.len(), 8);
        assert_eq!(p.runs().len(), 32);
    }

    #[test]
    fn orders_vary_between_blocks_and_seeds() {
        let orders: std::collections::BTreeSet<Vec<String>> =
            (1..=20).map(|i| block_order(1, &arms(), i).order).collect();
        assert!(
            orders.len() > 5,
            "20 blocks of 4 arms gave only {} orders",
            orders.len()
        );
        let s1: Vec<_> = (1..=10).map(|i| block_order(1, &arms(), i).order).collect();
        let s2: Vec<_> = (1..=10).map(|i| block_order(2, &arms(), i).order).collect();
        assert_ne!(s1, s2);
    }

    #[test]
    fn every_block_holds_every_arm_once() {
        for i in 1..50 {
            let mut o = block_order(9, &arms(), i).order;
            o.sort();
            let mut want = arms();
            want.sort();
            assert_eq!(o, want);
        }
    }
}
