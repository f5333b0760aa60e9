//! Synthetic measurements for the tests of the crates above this one (feature `fixtures`,
//! enabled only in their dev-dependencies): runs of three epochs in numbered blocks, the
//! first epoch twice as long as the steady ones, as a warm-up makes it.

use std::collections::BTreeMap;

use crate::model::{ArmData, RunSamples};

/// The run of block `block` (its replicate too) whose steady epochs take `seconds` each:
/// epoch 1 takes `2 × seconds`, epochs 2 and 3 `seconds`.
pub fn block_run(block: u32, seconds: f64) -> RunSamples {
    RunSamples {
        replicate: block,
        block: Some(block),
        epochs: BTreeMap::from([(1, 2.0 * seconds), (2, seconds), (3, seconds)]),
    }
}

/// An arm named `name` with one [`block_run`] in each of blocks `1..=blocks`, whose steady
/// epochs in block `b` take `seconds(b)`.
pub fn blocked_arm(name: &str, blocks: u32, seconds: impl Fn(u32) -> f64) -> ArmData {
    ArmData {
        name: name.into(),
        runs: (1..=blocks).map(|b| block_run(b, seconds(b))).collect(),
        ..ArmData::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Block numbers, replicates and epoch times are what the two functions promise (a
    /// helper that numbered blocks from 0 or dropped the warm-up would fail here).
    #[test]
    fn a_blocked_arm_holds_one_three_epoch_run_per_block() {
        let arm = blocked_arm("v", 3, f64::from);
        assert_eq!(arm.name, "v");
        assert_eq!(arm.runs.len(), 3);
        for (i, r) in arm.runs.iter().enumerate() {
            let b = i as u32 + 1;
            assert_eq!((r.replicate, r.block), (b, Some(b)));
            let t = f64::from(b);
            assert_eq!(r.epochs, BTreeMap::from([(1, 2.0 * t), (2, t), (3, t)]));
        }
    }
}
