//! The caps on distinct categories and names (`MAX_CATEGORIES`, `MAX_NAMES`) with more
//! distinct (category, name) pairs than the aggregator's pair cache keeps (`MAX_PAIRS`):
//! the summary must equal a plain first-come model of the documented rules, with one
//! diagnostic per cap, whichever pairs the cache holds.

use std::collections::BTreeMap;
use std::path::Path;

use optgate_dftracer::{
    AggregateOptions, DiagnosticKind, MAX_CATEGORIES, MAX_NAMES, MAX_PAIRS, OTHER_CATEGORIES,
    OTHER_NAMES, summarize_reader,
};

/// Counts of `keys` in order, the first `cap` distinct ones kept, the rest under `other`.
fn capped(keys: &[String], cap: usize, other: &str) -> BTreeMap<String, u64> {
    let mut out: BTreeMap<String, u64> = BTreeMap::new();
    for k in keys {
        let slot = if out.contains_key(k) || out.len() < cap {
            k.as_str()
        } else {
            other
        };
        *out.entry(slot.to_string()).or_default() += 1;
    }
    out
}

#[test]
fn caps_hold_past_the_pair_cache() {
    let distinct_names = MAX_NAMES + 1000;
    let distinct_cats = MAX_CATEGORIES + 100;
    let n = 2 * distinct_names;
    let (mut text, mut names, mut cats) = (String::new(), Vec::new(), Vec::new());
    for i in 0..n {
        let (name, cat) = (
            format!("n{}", i % distinct_names),
            format!("c{}", i % distinct_cats),
        );
        text += &format!(r#"{{"id":{i},"name":"{name}","cat":"{cat}","ts":{i},"dur":1,"ph":1}}"#);
        text.push('\n');
        names.push(name);
        cats.push(cat);
    }
    let pairs: std::collections::HashSet<_> = names.iter().zip(&cats).collect();
    assert!(
        pairs.len() > MAX_PAIRS,
        "the test must overflow the pair cache"
    );

    let s = summarize_reader(
        Path::new("caps.pfw"),
        text.as_bytes(),
        &AggregateOptions::default(),
    );
    let counts = |m: &BTreeMap<String, optgate_dftracer::Stat>| {
        m.iter()
            .map(|(k, v)| (k.clone(), v.count))
            .collect::<BTreeMap<_, _>>()
    };
    assert_eq!(s.total.events, n as u64);
    assert_eq!(
        counts(&s.total.by_category),
        capped(&cats, MAX_CATEGORIES, OTHER_CATEGORIES)
    );
    assert_eq!(
        counts(&s.total.by_name),
        capped(&names, MAX_NAMES, OTHER_NAMES)
    );
    let too_many = s
        .diagnostics
        .iter()
        .filter(|d| d.kind == DiagnosticKind::TooMany)
        .count();
    assert_eq!(too_many, 2, "{:?}", s.diagnostics);
}
