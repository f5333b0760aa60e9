//! The samples file's rows grouped into arms, runs and epochs (`parse_samples`) equal a
//! straightforward grouping of the same rows, for random files with the rows in random
//! order: which arm is the baseline, the variants in order of their first row, each run's
//! replicate, block and every epoch's seconds.

use std::collections::BTreeMap;

use optgate_report::parse_samples;
use optgate_stats::Design;
use proptest::prelude::*;

/// variant → replicate → (block, epoch → seconds).
type Grouped = BTreeMap<String, BTreeMap<u32, (Option<u32>, BTreeMap<u32, f64>)>>;

#[derive(Debug)]
struct Row {
    variant: String,
    replicate: u32,
    block: u32,
    epoch: u32,
    seconds: f64,
}

/// Arms × runs × epochs, every run complete, each run in the block of its replicate number
/// (so a paired design pairs them), rows shuffled by `order`.
fn rows() -> impl Strategy<Value = Vec<Row>> {
    (
        2usize..5,
        prop::collection::btree_set(0u32..40, 2..6),
        1u32..8,
        prop::collection::vec(1e-3f64..1e3, 400),
        any::<u64>(),
    )
        .prop_map(|(arms, replicates, epochs, seconds, order)| {
            let mut rows = Vec::new();
            for a in 0..arms {
                for &replicate in &replicates {
                    for epoch in 1..=epochs {
                        let i = rows.len() % seconds.len();
                        rows.push(Row {
                            variant: format!("arm{a}"),
                            replicate,
                            block: replicate + 100,
                            epoch,
                            seconds: seconds[i],
                        });
                    }
                }
            }
            // A deterministic shuffle from `order` (Fisher–Yates on an LCG).
            let mut state = order | 1;
            for i in (1..rows.len()).rev() {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                rows.swap(i, (state >> 33) as usize % (i + 1));
            }
            rows
        })
}

fn csv(rows: &[Row]) -> String {
    let mut out = String::from("epoch,seconds,block,variant,replicate\n");
    for r in rows {
        out.push_str(&format!(
            "{},{},{},{},{}\n",
            r.epoch, r.seconds, r.block, r.variant, r.replicate
        ));
    }
    out
}

/// The reference: every row into nested maps; the arms in order of their first row.
fn reference(rows: &[Row]) -> (Grouped, Vec<String>) {
    let mut grouped = Grouped::new();
    let mut order = Vec::new();
    for r in rows {
        if !order.contains(&r.variant) {
            order.push(r.variant.clone());
        }
        let run = grouped
            .entry(r.variant.clone())
            .or_default()
            .entry(r.replicate)
            .or_insert((Some(r.block), BTreeMap::new()));
        run.1.insert(r.epoch, r.seconds);
    }
    (grouped, order)
}

proptest! {
    /// Catches rows filed under the wrong run or epoch, a lost or doubled row, a block
    /// taken from the wrong run, and variants out of first-row order (a faster grouping
    /// that sorted them, say).
    #[test]
    fn parsed_arms_equal_a_plain_grouping_of_the_rows(rows in rows(), paired in any::<bool>()) {
        let (want, order) = reference(&rows);
        let baseline = order[1].clone();
        let design = if paired { Design::Paired } else { Design::Independent };
        let samples = parse_samples(&csv(&rows), "random.csv", &baseline, design).unwrap();
        let mut got = Grouped::new();
        let mut got_order = vec![samples.baseline.name.clone()];
        got_order.extend(samples.variants.iter().map(|v| v.name.clone()));
        for arm in std::iter::once(&samples.baseline).chain(&samples.variants) {
            for run in &arm.runs {
                got.entry(arm.name.clone())
                    .or_default()
                    .insert(run.replicate, (run.block, run.epochs.clone()));
            }
        }
        prop_assert_eq!(got, want);
        let want_order: Vec<String> = std::iter::once(baseline.clone())
            .chain(order.iter().filter(|n| **n != baseline).cloned())
            .collect();
        prop_assert_eq!(got_order, want_order);
        prop_assert!(samples.has_blocks);
    }
}
