//! The staged rule's operating characteristics, from the simulation of
//! `benches/decision-cost` (committed as `data/operating_characteristics.csv`, embedded
//! here): for a design (`replicates`, `max_replicates`, variants, paired), at a noise given
//! as the SD of the per-block log ratios in units of the minimum effect, P(accept) and the
//! expected blocks at a true speed-up of 0, 1, 2 and 5 × `min_effect_pct`. Read at the
//! observed noise by linear interpolation in log(noise). Pure.

use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

/// The table `benches/decision-cost` writes (`oc.rs`): one row per cell.
const TABLE: &str = include_str!("../data/operating_characteristics.csv");

/// The true speed-ups the report states, as multiples of `min_effect_pct`.
pub const REPORTED_MULTIPLES: [f64; 3] = [0.0, 2.0, 5.0];

/// One simulated cell.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cell {
    pub replicates: u32,
    pub max_replicates: u32,
    pub variants: usize,
    /// SD of the per-block log ratios / ln(1 + min effect).
    pub noise_ratio: f64,
    /// True speed-up / `min_effect_pct`.
    pub effect_multiple: f64,
    pub p_accept: f64,
    pub mean_blocks: f64,
    pub experiments: u32,
}

/// The design's characteristics at one true speed-up, at the observed noise.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct OcPoint {
    /// True speed-up in multiples of `min_effect_pct` (0 = no effect).
    pub effect_multiple: f64,
    pub speedup_pct: f64,
    /// Probability that a variant with this true speed-up is accepted.
    pub p_accept: f64,
    /// Expected blocks the experiment runs.
    pub expected_blocks: f64,
}

/// What the report shows: the design, the noise it was read at, and the points.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OperatingCharacteristics {
    pub replicates: u32,
    pub max_replicates: u32,
    pub variants: usize,
    /// The observed noise: RMS over the variants of the SD of the per-block log ratios, in
    /// percent.
    pub noise_pct: f64,
    /// That noise in units of the minimum effect (ln scale).
    pub noise_ratio: f64,
    /// The noise is outside the simulated range; the nearest simulated noise is shown.
    pub clamped: bool,
    pub points: Vec<OcPoint>,
    /// Where the numbers come from.
    pub source: String,
}

/// The embedded table, parsed once.
pub fn table() -> &'static [Cell] {
    static CELLS: OnceLock<Vec<Cell>> = OnceLock::new();
    CELLS.get_or_init(|| parse(TABLE).expect("the committed operating-characteristics table"))
}

/// Parse the CSV: a header line, then `replicates,max_replicates,variants,noise_ratio,
/// effect_multiple,p_accept,mean_blocks,experiments`.
pub fn parse(text: &str) -> Result<Vec<Cell>, String> {
    text.lines()
        .enumerate()
        .skip(1)
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, line)| {
            let f: Vec<&str> = line.split(',').map(str::trim).collect();
            let bad = || format!("line {}: {line:?}", i + 1);
            if f.len() != 8 {
                return Err(bad());
            }
            let num = |k: usize| f[k].parse::<f64>().map_err(|_| bad());
            Ok(Cell {
                replicates: f[0].parse().map_err(|_| bad())?,
                max_replicates: f[1].parse().map_err(|_| bad())?,
                variants: f[2].parse().map_err(|_| bad())?,
                noise_ratio: num(3)?,
                effect_multiple: num(4)?,
                p_accept: num(5)?,
                mean_blocks: num(6)?,
                experiments: f[7].parse().map_err(|_| bad())?,
            })
        })
        .collect()
}

/// The characteristics of the staged design (`replicates`, `max_replicates`, `variants`,
/// paired) at the observed `log_sd` (SD of the per-block log ratios), for a minimum effect
/// of `min_effect_pct`; `None` when that design was not simulated or the noise is unknown.
pub fn characteristics(
    replicates: u32,
    max_replicates: u32,
    variants: usize,
    min_effect_pct: f64,
    log_sd: f64,
) -> Option<OperatingCharacteristics> {
    let delta = (1.0 + min_effect_pct / 100.0).ln();
    if !(delta > 0.0 && log_sd.is_finite() && log_sd > 0.0) {
        return None;
    }
    let ratio = log_sd / delta;
    let cells: Vec<&Cell> = table()
        .iter()
        .filter(|c| {
            (c.replicates, c.max_replicates, c.variants) == (replicates, max_replicates, variants)
        })
        .collect();
    let mut clamped = false;
    let points = REPORTED_MULTIPLES
        .iter()
        .map(|&m| {
            let row: Vec<&Cell> = cells
                .iter()
                .copied()
                .filter(|c| c.effect_multiple == m)
                .collect();
            let (p, blocks, out) = interpolate(&row, ratio)?;
            clamped |= out;
            Some(OcPoint {
                effect_multiple: m,
                speedup_pct: m * min_effect_pct,
                p_accept: p,
                expected_blocks: blocks,
            })
        })
        .collect::<Option<Vec<_>>>()?;
    let experiments = cells.iter().map(|c| c.experiments).min().unwrap_or(0);
    Some(OperatingCharacteristics {
        replicates,
        max_replicates,
        variants,
        noise_pct: 100.0 * log_sd,
        noise_ratio: ratio,
        clamped,
        points,
        source: format!(
            "simulated by benches/decision-cost ({experiments} experiments per cell; log-normal noise, paired blocks), interpolated at the observed noise"
        ),
    })
}

/// (P(accept), E[blocks], outside the grid) at `ratio` over one effect's cells, linear in
/// log(ratio) between the two nearest noise levels, the nearest one outside the grid.
fn interpolate(row: &[&Cell], ratio: f64) -> Option<(f64, f64, bool)> {
    let mut row = row.to_vec();
    row.sort_by(|a, b| a.noise_ratio.total_cmp(&b.noise_ratio));
    let (first, last) = (row.first()?, row.last()?);
    if ratio <= first.noise_ratio {
        return Some((first.p_accept, first.mean_blocks, ratio < first.noise_ratio));
    }
    if ratio >= last.noise_ratio {
        return Some((last.p_accept, last.mean_blocks, ratio > last.noise_ratio));
    }
    let hi = row.iter().position(|c| c.noise_ratio >= ratio)?;
    let (a, b) = (row[hi - 1], row[hi]);
    let w = (ratio.ln() - a.noise_ratio.ln()) / (b.noise_ratio.ln() - a.noise_ratio.ln());
    let lerp = |x: f64, y: f64| x + w * (y - x);
    Some((
        lerp(a.p_accept, b.p_accept),
        lerp(a.mean_blocks, b.mean_blocks),
        false,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_committed_table_parses_and_covers_the_default_design() {
        let cells = table();
        assert!(!cells.is_empty());
        for c in cells {
            assert!((0.0..=1.0).contains(&c.p_accept), "{c:?}");
            assert!(
                c.mean_blocks >= c.replicates as f64 && c.mean_blocks <= c.max_replicates as f64,
                "{c:?}"
            );
        }
        let oc = characteristics(5, 30, 1, 1.0, 0.03 * 2f64.sqrt()).expect("default design");
        assert_eq!(oc.points.len(), REPORTED_MULTIPLES.len());
        // More effect, more power; no effect, hardly any accept.
        assert!(oc.points[0].p_accept < 0.05, "{oc:?}");
        assert!(oc.points[2].p_accept > oc.points[1].p_accept, "{oc:?}");
    }

    #[test]
    fn interpolation_is_linear_in_log_noise_and_clamps_outside() {
        let cell = |noise_ratio: f64, p_accept: f64, mean_blocks: f64| Cell {
            replicates: 5,
            max_replicates: 30,
            variants: 1,
            noise_ratio,
            effect_multiple: 2.0,
            p_accept,
            mean_blocks,
            experiments: 1,
        };
        let (a, b) = (cell(1.0, 0.9, 6.0), cell(4.0, 0.5, 14.0));
        let row = [&a, &b];
        let (p, n, out) = interpolate(&row, 2.0).unwrap();
        assert!((p - 0.7).abs() < 1e-12 && (n - 10.0).abs() < 1e-12 && !out);
        assert_eq!(interpolate(&row, 8.0), Some((0.5, 14.0, true)));
        assert_eq!(interpolate(&row, 0.5), Some((0.9, 6.0, true)));
        assert_eq!(interpolate(&row, 1.0), Some((0.9, 6.0, false)));
    }

    #[test]
    fn a_design_not_simulated_has_none() {
        assert_eq!(characteristics(7, 13, 1, 1.0, 0.04), None);
        assert_eq!(characteristics(5, 30, 1, 0.0, 0.04), None);
        assert_eq!(characteristics(5, 30, 1, 1.0, 0.0), None);
    }

    #[test]
    fn a_malformed_line_is_named() {
        let err = parse("header\n5,30,1,x,0,0.1,5,10\n").unwrap_err();
        assert!(err.contains("line 2"), "{err}");
    }
}
