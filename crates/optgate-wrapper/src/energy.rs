//! Energy a run used, from the RAPL counters Linux exposes under
//! `/sys/class/powercap/intel-rapl:N/energy_uj` (Intel, and AMD since Linux 5.8 under the
//! same names): one reading per package zone before the run and one after, wraparound
//! handled with `max_energy_range_uj`.
//!
//! Why packages only: the sub-zones (`intel-rapl:N:M`, core, uncore, dram) are parts of
//! their package's count on most parts, so adding them would count energy twice. Reading
//! `energy_uj` needs root on kernels since 5.10 (CVE-2020-8694); where it cannot be read,
//! there is no energy figure and the manifest says nothing about energy.

use std::collections::BTreeMap;
use std::path::Path;

/// Where the powercap zones are, below the sysfs root.
pub const POWERCAP_DIR: &str = "sys/class/powercap";

/// What the manifest names as the source of an energy figure.
pub const RAPL_SOURCE: &str = "rapl";

/// The most zones read: a node has one per socket; more entries than this are a strange
/// tree and are not read.
pub const MAX_ZONES: usize = 64;

/// One package zone's counter at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ZoneReading {
    pub energy_uj: u64,
    /// The counter wraps to 0 after this value (`max_energy_range_uj`).
    pub max_range_uj: u64,
}

/// Every readable package zone's counter, by zone directory name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RaplSnapshot {
    pub zones: BTreeMap<String, ZoneReading>,
}

/// Whether a powercap entry names a package zone: `intel-rapl:N`, N decimal.
fn is_package_zone(name: &str) -> bool {
    name.strip_prefix("intel-rapl:")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

fn read_u64(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// Reads the package zones under `root`. None when there are none or any one of them
/// cannot be read (a partial sum would be wrong without saying so).
pub fn take(root: &Path) -> Option<RaplSnapshot> {
    let dir = root.join(POWERCAP_DIR);
    let mut zones = BTreeMap::new();
    for entry in std::fs::read_dir(&dir).ok()?.flatten().take(MAX_ZONES) {
        let name = entry.file_name().into_string().ok()?;
        if !is_package_zone(&name) {
            continue;
        }
        let zone = entry.path();
        zones.insert(
            name,
            ZoneReading {
                energy_uj: read_u64(&zone.join("energy_uj"))?,
                max_range_uj: read_u64(&zone.join("max_energy_range_uj"))?,
            },
        );
    }
    (!zones.is_empty()).then_some(RaplSnapshot { zones })
}

/// Joules used between two snapshots of the same node: per zone the counter's advance,
/// once around when it wrapped (a counter can wrap at most once in a run shorter than
/// its range: about an hour at 60 W for a 32-bit µJ range, days for the usual 2⁶² range).
/// None when the two do not have the same zones.
pub fn joules_between(before: &RaplSnapshot, after: &RaplSnapshot) -> Option<f64> {
    if before.zones.keys().ne(after.zones.keys()) {
        return None;
    }
    let mut uj: u128 = 0;
    for (name, b) in &before.zones {
        let a = after.zones[name];
        let advance = if a.energy_uj >= b.energy_uj {
            a.energy_uj - b.energy_uj
        } else {
            // Wrapped: up to the range, then from 0.
            b.max_range_uj.saturating_sub(b.energy_uj) + a.energy_uj
        };
        uj += u128::from(advance);
    }
    Some(uj as f64 / 1e6)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zone(root: &Path, name: &str, energy: &str, range: &str) {
        let d = root.join(POWERCAP_DIR).join(name);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("energy_uj"), energy).unwrap();
        std::fs::write(d.join("max_energy_range_uj"), range).unwrap();
    }

    #[test]
    fn packages_are_summed_and_subzones_left_out() {
        let dir = tempfile::tempdir().unwrap();
        zone(dir.path(), "intel-rapl:0", "1000000\n", "262143328850\n");
        zone(dir.path(), "intel-rapl:1", "5000000\n", "262143328850\n");
        // A core sub-zone: part of package 0's count.
        zone(
            dir.path(),
            "intel-rapl:0:0",
            "999999999\n",
            "262143328850\n",
        );
        let before = take(dir.path()).unwrap();
        assert_eq!(before.zones.len(), 2);
        zone(dir.path(), "intel-rapl:0", "3500000\n", "262143328850\n");
        zone(dir.path(), "intel-rapl:1", "6000000\n", "262143328850\n");
        let after = take(dir.path()).unwrap();
        assert_eq!(joules_between(&before, &after), Some(3.5));
    }

    #[test]
    fn a_wrapped_counter_counts_once_around() {
        let r = |e| RaplSnapshot {
            zones: [(
                "intel-rapl:0".to_string(),
                ZoneReading {
                    energy_uj: e,
                    max_range_uj: 10_000_000,
                },
            )]
            .into(),
        };
        // 9.5 J → wrap at 10 J → 1.25 J: 0.5 + 1.25.
        assert_eq!(joules_between(&r(9_500_000), &r(1_250_000)), Some(1.75));
    }

    #[test]
    fn no_figure_without_every_zone() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(take(dir.path()), None);
        zone(dir.path(), "intel-rapl:0", "10\n", "100\n");
        // Unreadable as a number (as when the file is root-only and read as empty).
        zone(dir.path(), "intel-rapl:1", "", "100\n");
        assert_eq!(take(dir.path()), None);
        let one = |n: &str| RaplSnapshot {
            zones: [(
                n.to_string(),
                ZoneReading {
                    energy_uj: 1,
                    max_range_uj: 10,
                },
            )]
            .into(),
        };
        assert_eq!(
            joules_between(&one("intel-rapl:0"), &one("intel-rapl:1")),
            None
        );
    }

    #[test]
    fn only_package_names_are_zones() {
        assert!(is_package_zone("intel-rapl:0"));
        assert!(is_package_zone("intel-rapl:12"));
        assert!(!is_package_zone("intel-rapl:0:1"));
        assert!(!is_package_zone("intel-rapl:"));
        assert!(!is_package_zone("intel-rapl-mmio:0"));
    }
}
