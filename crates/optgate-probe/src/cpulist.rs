//! The kernel's CPU-list notation ("0-3,8,10-11"): parsing it from sysfs and writing it
//! back in the same canonical form, so lists in the probe read like `lscpu`'s.

use std::collections::BTreeSet;

/// Parses a kernel CPU list such as `0-7,16-23` (whitespace around it is ignored; an
/// empty string is the empty set). Returns `None` on anything else, e.g. a hex mask.
pub fn parse_cpulist(text: &str) -> Option<BTreeSet<u32>> {
    let mut cpus = BTreeSet::new();
    let text = text.trim();
    if text.is_empty() {
        return Some(cpus);
    }
    for part in text.split(',') {
        let part = part.trim();
        match part.split_once('-') {
            Some((lo, hi)) => {
                let lo: u32 = lo.trim().parse().ok()?;
                let hi: u32 = hi.trim().parse().ok()?;
                if lo > hi {
                    return None;
                }
                cpus.extend(lo..=hi);
            }
            None => {
                cpus.insert(part.parse().ok()?);
            }
        }
    }
    Some(cpus)
}

/// Formats a set of CPUs as the kernel does: ascending, runs collapsed to `a-b`.
pub fn format_cpulist<'a>(cpus: impl IntoIterator<Item = &'a u32>) -> String {
    let mut sorted: Vec<u32> = cpus.into_iter().copied().collect();
    sorted.sort_unstable();
    sorted.dedup();
    let mut out = String::new();
    let mut i = 0;
    while i < sorted.len() {
        let start = sorted[i];
        let mut end = start;
        while i + 1 < sorted.len() && sorted[i + 1] == end + 1 {
            i += 1;
            end = sorted[i];
        }
        if !out.is_empty() {
            out.push(',');
        }
        if start == end {
            out.push_str(&start.to_string());
        } else {
            out.push_str(&format!("{start}-{end}"));
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ranges_singles_and_newline() {
        let set = parse_cpulist("0-7,16-23\n").unwrap();
        assert_eq!(set.len(), 16);
        assert!(set.contains(&0) && set.contains(&7) && set.contains(&16) && set.contains(&23));
        assert!(!set.contains(&8));
        assert_eq!(
            parse_cpulist("0,16")
                .unwrap()
                .into_iter()
                .collect::<Vec<_>>(),
            vec![0, 16]
        );
        assert!(parse_cpulist("").unwrap().is_empty());
    }

    #[test]
    fn rejects_masks_and_reversed_ranges() {
        assert!(parse_cpulist("ff,ffffffff").is_none());
        assert!(parse_cpulist("5-3").is_none());
    }

    #[test]
    fn formats_canonically() {
        assert_eq!(format_cpulist(&[3, 0, 1, 2, 8, 10, 11]), "0-3,8,10-11");
        assert_eq!(format_cpulist(&[5]), "5");
        assert_eq!(format_cpulist(&[]), "");
        let round = parse_cpulist("0-7,16-23").unwrap();
        assert_eq!(format_cpulist(&round), "0-7,16-23");
    }
}
