//! Per-epoch values from a pattern's matches: each match is one epoch, labelled as the app
//! printed it (a step counter `100, 200`, a 0-based count, a simulated time `0.005`) and
//! held by position (1 = the first epoch printed). Labels must increase strictly; a
//! running clock ([`EpochClock::Running`]) becomes each epoch's advance.

use regex::Regex;

use crate::shared::{EpochSeconds, MetricError};

/// What the pattern's `seconds` group holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EpochClock {
    /// Each match's value is that epoch's own: its time, or (`better: higher`) its rate.
    #[default]
    PerEpoch,
    /// A running clock (`metric.cumulative: true`): an epoch's time is the clock's advance
    /// since the previous match; the first epoch's is the first reading itself.
    Running,
}

/// One match of the metric's pattern: the 1-based line it is on and its two groups' text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochMatch<'a> {
    pub line: usize,
    pub epoch: &'a str,
    pub seconds: &'a str,
}

/// One run's epochs: values by position (1 = the first printed) and the labels as printed
/// (`labels[0]` is position 1's).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LabelledEpochs {
    pub seconds: EpochSeconds,
    pub labels: Vec<String>,
}

/// Applies `re` (named groups `epoch` and `seconds`) to `text`; every match is one epoch.
pub fn extract_epochs(
    re: &Regex,
    text: &str,
    source_name: &str,
    clock: EpochClock,
) -> Result<LabelledEpochs, MetricError> {
    let mut matches = Vec::new();
    let (mut counted_to, mut line) = (0, 1);
    for caps in re.captures_iter(text) {
        let start = caps.get(0).expect("group 0 always exists").start();
        line += text[counted_to..start]
            .bytes()
            .filter(|&b| b == b'\n')
            .count();
        counted_to = start;
        let group = |name: &str| caps.name(name).map_or("", |m| m.as_str());
        matches.push(EpochMatch {
            line,
            epoch: group("epoch"),
            seconds: group("seconds"),
        });
    }
    if matches.is_empty() {
        return Err(MetricError::NoMatch {
            source_name: source_name.to_string(),
            pattern: re.as_str().to_string(),
        });
    }
    epochs_from_matches(&matches, source_name, clock)
}

/// The epochs of a run's matches, in the order printed: labels strictly increasing as
/// numbers, every value (or a running clock's every advance) positive and finite.
pub fn epochs_from_matches(
    matches: &[EpochMatch<'_>],
    source_name: &str,
    clock: EpochClock,
) -> Result<LabelledEpochs, MetricError> {
    let mut out = LabelledEpochs::default();
    // The previous match: its label, its label's number, its reading and its line.
    let mut previous: Option<(&str, f64, f64, usize)> = None;
    for (position, m) in (1u32..).zip(matches) {
        let label = m.epoch.trim();
        let number = finite_number(source_name, m.line, "epoch", m.epoch)?;
        let reading = finite_number(source_name, m.line, "seconds", m.seconds)?;
        if let Some((prev_label, prev_number, _, prev_line)) = previous {
            check_order(
                source_name,
                m.line,
                label,
                number,
                prev_label,
                prev_number,
                prev_line,
            )?;
        }
        let value = match (clock, previous) {
            (EpochClock::Running, Some((prev_label, _, prev_reading, prev_line))) => {
                if reading <= prev_reading {
                    return Err(MetricError::ClockNotAdvancing {
                        source_name: source_name.to_string(),
                        line: m.line,
                        epoch: label.to_string(),
                        seconds: reading,
                        previous_epoch: prev_label.to_string(),
                        previous: prev_reading,
                        previous_line: prev_line,
                    });
                }
                reading - prev_reading
            }
            _ => reading,
        };
        if !(value.is_finite() && value > 0.0) {
            return Err(MetricError::NonPositive {
                source_name: source_name.to_string(),
                line: m.line,
                epoch: label.to_string(),
                seconds: value,
            });
        }
        out.seconds.insert(position, value);
        out.labels.push(label.to_string());
        previous = Some((label, number, reading, m.line));
    }
    Ok(out)
}

/// A group's text as a finite number, or the error naming its line and group.
fn finite_number(
    source_name: &str,
    line: usize,
    group: &str,
    text: &str,
) -> Result<f64, MetricError> {
    text.trim()
        .parse::<f64>()
        .ok()
        .filter(|x| x.is_finite())
        .ok_or_else(|| MetricError::NotANumber {
            source_name: source_name.to_string(),
            line,
            group: group.into(),
            text: text.to_string(),
        })
}

/// An epoch's label must be above the previous one's (equal: printed twice).
fn check_order(
    source_name: &str,
    line: usize,
    label: &str,
    number: f64,
    previous: &str,
    previous_number: f64,
    previous_line: usize,
) -> Result<(), MetricError> {
    if number > previous_number {
        return Ok(());
    }
    Err(if number == previous_number {
        MetricError::DuplicateEpoch {
            source_name: source_name.to_string(),
            line,
            epoch: label.to_string(),
            first_line: previous_line,
        }
    } else {
        MetricError::NotIncreasing {
            source_name: source_name.to_string(),
            line,
            epoch: label.to_string(),
            previous: previous.to_string(),
            previous_line,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn re() -> Regex {
        Regex::new(r"epoch (?P<epoch>\d+) time (?P<seconds>[0-9.eE+-]+)").unwrap()
    }

    fn seconds(e: &LabelledEpochs) -> Vec<(u32, f64)> {
        e.seconds.iter().map(|(&k, &v)| (k, v)).collect()
    }

    #[test]
    fn extracts_epochs_in_order() {
        let text = "start\nepoch 1 time 0.5\nnoise\nepoch 2 time 0.25\nepoch 3 time 2.5e-1\n";
        let e = extract_epochs(&re(), text, "stdout", EpochClock::PerEpoch).unwrap();
        assert_eq!(seconds(&e), [(1, 0.5), (2, 0.25), (3, 0.25)]);
        assert_eq!(e.labels, ["1", "2", "3"]);
    }

    #[test]
    fn reports_problems_precisely() {
        let per = EpochClock::PerEpoch;
        let err = extract_epochs(&re(), "hello\n", "runs/b001-x/stdout", per).unwrap_err();
        assert!(matches!(err, MetricError::NoMatch { .. }));
        assert!(err.to_string().contains("runs/b001-x/stdout"));

        let err = extract_epochs(&re(), "epoch 1 time 1\nepoch 1 time 2\n", "out", per);
        assert_eq!(
            err.unwrap_err().to_string(),
            "out:2: epoch 1 reported a second time (first on line 1)"
        );
        let err = extract_epochs(&re(), "epoch 2 time 1\n\nepoch 1 time 2\n", "out", per);
        assert_eq!(
            err.unwrap_err().to_string(),
            "out:3: epoch 1 follows epoch 2 (line 1); epoch labels must be strictly increasing"
        );

        let err = extract_epochs(&re(), "x\nepoch 1 time 0\n", "out", per).unwrap_err();
        assert!(
            matches!(err, MetricError::NonPositive { line: 2, .. }),
            "{err}"
        );

        let err = extract_epochs(&re(), "epoch 1 time 1.2.3\n", "out", per).unwrap_err();
        assert!(
            matches!(err, MetricError::NotANumber { line: 1, .. }),
            "{err}"
        );
    }

    /// LAMMPS 2022 (Debian's `lmp`), `thermo_style custom step temp etotal cpu spcpu`:
    /// one line per thermo interval, labelled by the step counter; the last column is the
    /// interval's rate (timesteps per CPU second, `better: higher`), the one before it
    /// the running CPU clock. The first line (step 0, before any step ran) has no rate.
    /// Planted bugs caught: epochs required to count from 1 (the old rule: "epoch 1 is
    /// missing"), the clock's reading kept instead of its advance, and the labels lost.
    const LAMMPS_THERMO: &str = "\
   Step          Temp          TotEng          CPU           S/CPU     
         0   3             -0.32129252     0              0            
       100   1.6735783     -0.35041089     0.53112456     188.27929    
       200   1.6574599     -0.34936785     1.0722371      184.79734    
       300   1.6558416     -0.34922061     1.6151906      184.17787    
Loop time of 1.61521 on 1 procs for 300 steps with 4000 atoms
";

    #[test]
    fn lammps_thermo_lines_are_epochs_labelled_by_step() {
        let rate = Regex::new(
            r"(?m)^\s+(?P<epoch>[1-9]\d*)\s+\S+\s+\S+\s+\S+\s+(?P<seconds>[0-9.eE+-]+)\s*$",
        )
        .unwrap();
        let e = extract_epochs(&rate, LAMMPS_THERMO, "log", EpochClock::PerEpoch).unwrap();
        assert_eq!(e.labels, ["100", "200", "300"]);
        assert_eq!(
            seconds(&e),
            [(1, 188.27929), (2, 184.79734), (3, 184.17787)]
        );

        let clock = Regex::new(
            r"(?m)^\s+(?P<epoch>[1-9]\d*)\s+\S+\s+\S+\s+(?P<seconds>[0-9.eE+-]+)\s+\S+\s*$",
        )
        .unwrap();
        let e = extract_epochs(&clock, LAMMPS_THERMO, "log", EpochClock::Running).unwrap();
        assert_eq!(e.labels, ["100", "200", "300"]);
        let want = [0.53112456, 1.0722371 - 0.53112456, 1.6151906 - 1.0722371];
        for ((p, got), want) in seconds(&e).into_iter().zip(want) {
            assert!(
                (got - want).abs() < 1e-12,
                "epoch {p}: {got} against {want}"
            );
        }
    }

    /// OpenFOAM (pimpleFoam/icoFoam) prints each time step's simulated time and, a few
    /// lines on, the running clock: `Time = 0.005` … `ExecutionTime = 0.02 s`. Matched
    /// over lines with `(?s)` and a lazy gap, labels are the simulated times.
    /// Planted bugs caught: labels parsed as integers ("0.005 is not a number"), the
    /// clock's reading kept, and a clock that goes backwards accepted.
    #[test]
    fn openfoam_time_steps_with_a_running_clock() {
        let log = "\
Starting time loop

Time = 0.005

Courant Number mean: 0 max: 0
smoothSolver:  Solving for Ux, Initial residual = 1, Final residual = 8.90511e-06, No Iterations 19
DICPCG:  Solving for p, Initial residual = 1, Final residual = 0.0492854, No Iterations 12
time step continuity errors : sum local = 8.90511e-07, global = -1.23048e-20, cumulative = -1.23048e-20
ExecutionTime = 0.01 s  ClockTime = 0 s

Time = 0.01

ExecutionTime = 0.03 s  ClockTime = 0 s

Time = 0.015

ExecutionTime = 0.06 s  ClockTime = 1 s

End
";
        let re = Regex::new(
            r"(?ms)^Time = (?P<epoch>[0-9.eE+-]+)$.*?^ExecutionTime = (?P<seconds>[0-9.eE+-]+) s",
        )
        .unwrap();
        let e = extract_epochs(&re, log, "log.pimpleFoam", EpochClock::Running).unwrap();
        assert_eq!(e.labels, ["0.005", "0.01", "0.015"]);
        let got: Vec<f64> = e.seconds.values().copied().collect();
        for (got, want) in got.iter().zip([0.01, 0.02, 0.03]) {
            assert!((got - want).abs() < 1e-12, "{got:?}");
        }
        let backwards = log.replace("ExecutionTime = 0.06", "ExecutionTime = 0.02");
        let err = extract_epochs(&re, &backwards, "log", EpochClock::Running).unwrap_err();
        assert_eq!(
            err.to_string(),
            "log:15: the running clock reads 0.02 s at epoch 0.015, not after the 0.03 s of \
             epoch 0.01 (line 11); with `metric.cumulative: true` each epoch's time is the \
             clock's advance, which must be positive"
        );
        // Read per epoch, the same lines give the clock's readings.
        let e = extract_epochs(&re, log, "log", EpochClock::PerEpoch).unwrap();
        assert_eq!(
            e.seconds.values().copied().collect::<Vec<_>>(),
            [0.01, 0.03, 0.06]
        );
    }

    /// A PyTorch-style loop counting from 0: epoch 0 is position 1.
    #[test]
    fn zero_based_counts_are_labels_too() {
        let re = Regex::new(r"Epoch (?P<epoch>\d+): (?P<seconds>[0-9.]+)s").unwrap();
        let e = extract_epochs(
            &re,
            "Epoch 0: 2.5s\nEpoch 1: 1.5s\n",
            "o",
            EpochClock::PerEpoch,
        )
        .unwrap();
        assert_eq!(e.labels, ["0", "1"]);
        assert_eq!(seconds(&e), [(1, 2.5), (2, 1.5)]);
        let any = Regex::new(r"Epoch (?P<epoch>\S+): (?P<seconds>[0-9.]+)s").unwrap();
        let err = extract_epochs(&any, "Epoch nan: 1s\n", "o", EpochClock::PerEpoch).unwrap_err();
        assert!(matches!(err, MetricError::NotANumber { .. }), "{err}");
    }
}
