//! The energy statistic against NumPy: `tests/fixtures/make_energy_reference.py` computes
//! it from its definition for every split of a few fixed series (committed as
//! `energy_reference.json`); `energy_statistic` must agree at every split, and
//! `best_split`'s running sums must find the largest of them with its value.

use optgate_stats::change_points::{best_split, energy_statistic};
use serde_json::Value;

fn cases() -> Vec<Value> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/energy_reference.json"
    );
    let text = std::fs::read_to_string(path).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    v["cases"].as_array().unwrap().clone()
}

fn floats(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

#[test]
fn the_energy_statistic_agrees_with_numpy_at_every_split() {
    for case in cases() {
        let (xs, q) = (floats(&case["series"]), floats(&case["q_by_split"]));
        for (i, want) in q.iter().enumerate() {
            let tau = i + 1;
            let got = energy_statistic(&xs[..tau], &xs[tau..]);
            assert!(
                (got - want).abs() <= 1e-12 * want.abs().max(1.0),
                "{} τ={tau}: {got} vs {want}",
                case["name"]
            );
        }
    }
}

#[test]
fn the_best_split_is_numpys_largest() {
    for case in cases() {
        let (xs, q) = (floats(&case["series"]), floats(&case["q_by_split"]));
        for min in 1..=3 {
            let Some((tau, got)) = best_split(&xs, min) else {
                continue;
            };
            let (want_tau, want) = (min..=xs.len() - min)
                .map(|t| (t, q[t - 1]))
                .max_by(|a, b| a.1.total_cmp(&b.1))
                .unwrap();
            assert!(
                (got - want).abs() <= 1e-9 * want.abs().max(1.0),
                "{}: {got} vs {want}",
                case["name"]
            );
            assert!(
                tau == want_tau || (q[tau - 1] - want).abs() < 1e-12,
                "{}: τ {tau} vs {want_tau}",
                case["name"]
            );
        }
    }
}
