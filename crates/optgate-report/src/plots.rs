//! SVG plots of a report (plotters, SVG backend only): per arm the distribution of every
//! epoch's values with epoch 1 in a panel of its own (a one-time cost must not squash
//! the steady epochs, nor hide among them), and one chart of every variant's steady-state
//! speed-up with its interval against the min worthwhile effect.

use std::path::{Path, PathBuf};

use plotters::prelude::*;
use thiserror::Error;

use crate::model::{ArmSummary, EpochSummary, Report};

#[derive(Debug, Error)]
pub enum PlotError {
    #[error("creating the plot folder {path}: {source}")]
    CreateDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("drawing {path}: {message}")]
    Draw { path: PathBuf, message: String },
}

const FIRST_COLOR: RGBColor = RGBColor(230, 120, 20);
const STEADY_COLOR: RGBColor = RGBColor(40, 100, 180);

/// A file name made of safe characters only.
fn file_stem(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// One drawn plot: the file name [`write_plots`] gives it, a sentence saying what it shows
/// (the alternative text of the HTML report) and the SVG document.
#[derive(Debug, Clone, PartialEq)]
pub struct Plot {
    pub file_name: String,
    pub title: String,
    pub svg: String,
}

/// Every plot of `report`, drawn into memory: one per arm, then the speed-ups.
pub fn draw_plots(report: &Report) -> Result<Vec<Plot>, PlotError> {
    let unit = match report.analysis.better {
        optgate_stats::Better::Lower => "seconds",
        optgate_stats::Better::Higher => "value",
    };
    let mut plots = Vec::new();
    for (i, arm) in report.arms.iter().enumerate() {
        let file_name = format!("epochs-{:02}-{}.svg", i, file_stem(&arm.name));
        let mut svg = String::new();
        draw_arm(arm, unit, &mut svg).map_err(|message| PlotError::Draw {
            path: PathBuf::from(&file_name),
            message,
        })?;
        plots.push(Plot {
            title: arm_title(arm, unit),
            file_name,
            svg,
        });
    }
    let mut svg = String::new();
    draw_speedups(report, &mut svg).map_err(|message| PlotError::Draw {
        path: PathBuf::from("speedup.svg"),
        message,
    })?;
    plots.push(Plot {
        file_name: "speedup.svg".into(),
        title: speedup_title(report),
        svg,
    });
    Ok(plots)
}

/// Writes `epochs-<arm>.svg` for every arm and `speedup.svg` into `dir` (created if
/// needed); returns the paths written.
pub fn write_plots(report: &Report, dir: &Path) -> Result<Vec<PathBuf>, PlotError> {
    let plots = draw_plots(report)?;
    std::fs::create_dir_all(dir).map_err(|source| PlotError::CreateDir {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut written = Vec::new();
    for plot in plots {
        let path = dir.join(&plot.file_name);
        std::fs::write(&path, plot.svg).map_err(|e| PlotError::Draw {
            path: path.clone(),
            message: e.to_string(),
        })?;
        written.push(path);
    }
    Ok(written)
}

/// What an arm's plot shows, in words: its runs and the median of epoch 1 and of the
/// steady epochs' medians.
fn arm_title(arm: &ArmSummary, unit: &str) -> String {
    let first = arm.epochs.iter().find(|e| e.epoch == 1);
    let steady: Vec<f64> = arm
        .epochs
        .iter()
        .filter(|e| e.epoch != 1)
        .map(|e| e.median)
        .collect();
    let mut s = format!(
        "Per-epoch distribution of arm {} over {} runs (box: quartiles, bar: median, \
         whiskers: min to max)",
        arm.name, arm.runs
    );
    if let Some(f) = first {
        s.push_str(&format!("; epoch 1 median {:.4} {unit}", f.median));
    }
    if let (Some(lo), Some(hi)) = (
        steady.iter().copied().reduce(f64::min),
        steady.iter().copied().reduce(f64::max),
    ) {
        s.push_str(&format!(
            "; epochs after the first: medians from {lo:.4} to {hi:.4} {unit}"
        ));
    }
    s.push('.');
    s
}

/// What the speed-up plot shows, in words: each variant's estimate, interval and decision.
fn speedup_title(report: &Report) -> String {
    let a = &report.analysis;
    let parts: Vec<String> = a
        .variants
        .iter()
        .map(|v| {
            let s = &v.speedup;
            let est = s
                .estimate
                .map_or("no estimate".into(), |e| format!("{e:.3}×"));
            let ci = match (s.ci_low, s.ci_high) {
                (Some(l), Some(h)) => format!(" [{l:.3}, {h:.3}]"),
                _ => String::new(),
            };
            format!("{} {est}{ci}, {}", v.name, v.decision)
        })
        .collect();
    format!(
        "Steady-state speed-up of each variant against baseline {} with {:.0}% intervals, \
         beside no change (1.0) and the minimum worthwhile effect ({}%): {}.",
        a.baseline,
        100.0 * (1.0 - 2.0 * a.alpha),
        a.min_effect_pct,
        if parts.is_empty() {
            "no variants".into()
        } else {
            parts.join("; ")
        }
    )
}

fn y_range(epochs: &[&EpochSummary]) -> std::ops::Range<f64> {
    let lo = epochs.iter().map(|e| e.min).fold(f64::INFINITY, f64::min);
    let hi = epochs
        .iter()
        .map(|e| e.max)
        .fold(f64::NEG_INFINITY, f64::max);
    let pad = ((hi - lo) * 0.08).max(hi.abs() * 0.01).max(1e-9);
    (lo - pad).max(0.0)..hi + pad
}

/// Box per epoch: IQR box, median bar, whiskers to min and max.
fn draw_boxes<DB: DrawingBackend>(
    chart: &mut ChartContext<
        '_,
        DB,
        Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
    >,
    epochs: &[&EpochSummary],
    color: RGBColor,
    label: &str,
) -> Result<(), String> {
    let half = 0.3;
    chart
        .draw_series(epochs.iter().map(|e| {
            let x = e.epoch as f64;
            Rectangle::new(
                [(x - half, e.q1), (x + half, e.q3)],
                color.mix(0.35).filled(),
            )
        }))
        .map_err(|e| e.to_string())?
        .label(label)
        .legend(move |(x, y)| {
            Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.mix(0.35).filled())
        });
    chart
        .draw_series(epochs.iter().map(|e| {
            let x = e.epoch as f64;
            PathElement::new(
                vec![(x - half, e.median), (x + half, e.median)],
                color.stroke_width(2),
            )
        }))
        .map_err(|e| e.to_string())?;
    chart
        .draw_series(epochs.iter().map(|e| {
            let x = e.epoch as f64;
            PathElement::new(vec![(x, e.min), (x, e.max)], color.stroke_width(1))
        }))
        .map_err(|e| e.to_string())?;
    Ok(())
}

fn draw_arm(arm: &ArmSummary, unit: &str, out: &mut String) -> Result<(), String> {
    let root = SVGBackend::with_string(out, (1000, 420)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let root = root
        .titled(
            &format!(
                "{}: per-epoch distribution over {} runs",
                arm.name, arm.runs
            ),
            ("sans-serif", 20),
        )
        .map_err(|e| e.to_string())?;
    let (left, right) = root.split_horizontally(230);

    let first: Vec<&EpochSummary> = arm.epochs.iter().filter(|e| e.epoch == 1).collect();
    let steady: Vec<&EpochSummary> = arm.epochs.iter().filter(|e| e.epoch != 1).collect();

    if !first.is_empty() {
        let mut chart = ChartBuilder::on(&left)
            .caption("epoch 1 (one-time)", ("sans-serif", 15))
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(60)
            .build_cartesian_2d(0.5f64..1.5f64, y_range(&first))
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .x_labels(1)
            .x_label_formatter(&|_| "epoch 1".to_string())
            .y_desc(unit)
            .disable_x_mesh()
            .draw()
            .map_err(|e| e.to_string())?;
        draw_boxes(&mut chart, &first, FIRST_COLOR, "epoch 1")?;
    }

    if steady.is_empty() {
        right
            .draw(&Text::new(
                "no epochs after epoch 1",
                (40, 180),
                ("sans-serif", 15).into_font(),
            ))
            .map_err(|e| e.to_string())?;
    } else {
        let lo = steady.first().map_or(2, |e| e.epoch) as f64;
        let hi = steady.last().map_or(2, |e| e.epoch) as f64;
        let mut chart = ChartBuilder::on(&right)
            .caption(
                format!(
                    "epochs {}–{} (box: IQR, bar: median, whiskers: min–max)",
                    lo, hi
                ),
                ("sans-serif", 15),
            )
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(60)
            .build_cartesian_2d(lo - 0.6..hi + 0.6, y_range(&steady))
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .x_desc("epoch")
            .y_desc(unit)
            .x_labels(steady.len().min(20))
            .x_label_formatter(&|x| format!("{}", x.round() as i64))
            .draw()
            .map_err(|e| e.to_string())?;
        draw_boxes(&mut chart, &steady, STEADY_COLOR, "steady epochs")?;
    }
    root.present().map_err(|e| e.to_string())?;
    Ok(())
}

/// The chart the speed-up plot draws on: speed-up across, one row per variant down.
type SpeedupChart<'a, DB> = ChartContext<
    'a,
    DB,
    Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
>;

fn draw_speedups(report: &Report, out: &mut String) -> Result<(), String> {
    let a = &report.analysis;
    let n = a.variants.len().max(1);
    let height = (120 + 45 * n) as u32;
    let root = SVGBackend::with_string(out, (900, height)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let worthwhile = 1.0 + a.min_effect_pct / 100.0;
    let (lo, hi) = speedup_range(&a.variants, worthwhile);
    let pad = (hi - lo).max(0.01) * 0.1;
    let names: Vec<String> = a.variants.iter().map(|v| v.name.clone()).collect();
    let label_of = move |y: &f64| {
        let i = y.round();
        if (y - i).abs() < 1e-6 && i >= 0.0 {
            names.get(i as usize).cloned().unwrap_or_default()
        } else {
            String::new()
        }
    };
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "steady-state speed-up vs '{}' ({:.0}% intervals; > 1 = faster)",
                a.baseline,
                100.0 * (1.0 - 2.0 * a.alpha)
            ),
            ("sans-serif", 18),
        )
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(140)
        .build_cartesian_2d(lo - pad..hi + pad, -0.6f64..(n as f64 - 0.4))
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_desc("speed-up (baseline time / variant time)")
        .y_labels(n * 2 + 1)
        .y_label_formatter(&label_of)
        .disable_y_mesh()
        .draw()
        .map_err(|e| e.to_string())?;
    let y_span = (-0.6, n as f64 - 0.4);
    draw_reference_lines(&mut chart, worthwhile, a.min_effect_pct, y_span)?;
    for (i, v) in a.variants.iter().enumerate() {
        draw_variant_speedup(&mut chart, v, i as f64)?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| e.to_string())?;
    root.present().map_err(|e| e.to_string())?;
    Ok(())
}

/// The speed-up axis's extent: 1.0, the worthwhile effect and every estimate and
/// interval end.
fn speedup_range(
    variants: &[optgate_stats::analysis::VariantAnalysis],
    worthwhile: f64,
) -> (f64, f64) {
    let mut lo = worthwhile.min(1.0);
    let mut hi = worthwhile.max(1.0);
    for v in variants {
        for x in [v.speedup.estimate, v.speedup.ci_low, v.speedup.ci_high]
            .into_iter()
            .flatten()
        {
            lo = lo.min(x);
            hi = hi.max(x);
        }
    }
    (lo, hi)
}

/// The vertical lines at "no change" (1.0) and at the minimum worthwhile effect.
fn draw_reference_lines<DB: DrawingBackend>(
    chart: &mut SpeedupChart<'_, DB>,
    worthwhile: f64,
    min_effect_pct: f64,
    y_span: (f64, f64),
) -> Result<(), String> {
    chart
        .draw_series(std::iter::once(PathElement::new(
            vec![(1.0, y_span.0), (1.0, y_span.1)],
            BLACK.stroke_width(1),
        )))
        .map_err(|e| e.to_string())?
        .label("no change (1.0)")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 15, y)], BLACK));
    chart
        .draw_series(std::iter::once(PathElement::new(
            vec![(worthwhile, y_span.0), (worthwhile, y_span.1)],
            RED.stroke_width(2),
        )))
        .map_err(|e| e.to_string())?
        .label(format!("min worthwhile effect ({min_effect_pct}%)"))
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 15, y)], RED.stroke_width(2)));
    Ok(())
}

/// One variant's row: its interval as a bar, its estimate as a dot labelled with the
/// estimate and the decision.
fn draw_variant_speedup<DB: DrawingBackend>(
    chart: &mut SpeedupChart<'_, DB>,
    v: &optgate_stats::analysis::VariantAnalysis,
    y: f64,
) -> Result<(), String> {
    if let (Some(l), Some(h)) = (v.speedup.ci_low, v.speedup.ci_high) {
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(l, y), (h, y)],
                STEADY_COLOR.stroke_width(3),
            )))
            .map_err(|e| e.to_string())?;
    }
    if let Some(e) = v.speedup.estimate {
        chart
            .draw_series(std::iter::once(Circle::new(
                (e, y),
                5,
                STEADY_COLOR.filled(),
            )))
            .map_err(|e| e.to_string())?;
        chart
            .draw_series(std::iter::once(Text::new(
                format!("{e:.3}× {}", v.decision),
                (e, y + 0.3),
                ("sans-serif", 12).into_font(),
            )))
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}
