//! What `optgate run` shows while it works. On a terminal: a bar with runs done/total,
//! the last finished run's block and arm, and an estimate of the time left. Elsewhere (`nohup`, a CI
//! log, a pipe): one line per finished run with the same facts, e.g.
//! `optgate: run 7/28 done (block 2, arm omp6, 3.1 s); ETA 1m 10s`. `--quiet`: neither.
//!
//! The estimate is the mean wall time (from the runs' manifests) of the runs finished by
//! this execution times the runs left; runs finished by an earlier, interrupted execution
//! count as done but not in the mean.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

use optgate_daemon::foreground::Event;

enum View {
    Off,
    Lines,
    Bar(ProgressBar),
}

pub struct Progress {
    view: View,
    /// Runs this execution is to have done: the plan's, less those of arms that are not
    /// applicable here.
    total: usize,
    done: usize,
    /// Runs finished by this execution, and their time.
    ran: u32,
    ran_time: Duration,
    /// When the last run's outcome arrived (or the execution started): a run's time when
    /// its manifest gives none.
    since: Instant,
}

impl Progress {
    /// A bar when stderr is a terminal, lines otherwise, nothing with `quiet`.
    pub fn new(quiet: bool, total: usize, already_done: usize) -> Progress {
        let view = if quiet {
            View::Off
        } else if std::io::stderr().is_terminal() {
            let bar = ProgressBar::new(total as u64);
            bar.set_style(
                ProgressStyle::with_template(
                    "{spinner} [{elapsed_precise}] {bar:20} {pos}/{len} runs  {msg}",
                )
                .expect("valid template"),
            );
            bar.set_position(already_done as u64);
            bar.enable_steady_tick(Duration::from_millis(200));
            View::Bar(bar)
        } else {
            View::Lines
        };
        Progress {
            view,
            total,
            done: already_done,
            ran: 0,
            ran_time: Duration::ZERO,
            since: Instant::now(),
        }
    }

    /// A look added blocks: more runs to do.
    pub fn set_total(&mut self, total: usize) {
        self.total = total;
        if let View::Bar(bar) = &self.view {
            bar.set_length(total as u64);
        }
    }

    /// Time left: the mean of this execution's runs times the runs not done yet.
    fn eta(&self) -> Option<Duration> {
        let left = self.total.saturating_sub(self.done);
        (self.ran > 0 && left > 0).then(|| self.ran_time / self.ran * left as u32)
    }

    /// Prints `line` on stderr without tearing the bar.
    fn say(&self, line: &str) {
        match &self.view {
            View::Bar(bar) => bar.suspend(|| errln!("{line}")),
            _ => errln!("{line}"),
        }
    }

    pub fn on_event(&mut self, ev: Event) {
        match ev {
            Event::Building => match &self.view {
                View::Bar(bar) => bar.set_message("building"),
                View::Lines => errln!("optgate: building…"),
                View::Off => {}
            },
            Event::RunFinished {
                run_id,
                block,
                arm,
                failed,
                elapsed,
            } => {
                // The run's own wall time when its manifest has it; else the time since
                // the last one (runs go one after another).
                let took = elapsed.unwrap_or_else(|| self.since.elapsed());
                self.since = Instant::now();
                self.done += 1;
                self.ran += 1;
                self.ran_time += took;
                if let Some(reason) = &failed {
                    self.say(&format!("optgate: run {run_id} failed: {reason}"));
                }
                let what = if failed.is_some() { "failed" } else { "done" };
                match &self.view {
                    View::Bar(bar) => {
                        bar.set_position(self.done as u64);
                        // The estimate first: a long arm name is what a narrow terminal cuts.
                        let eta = self
                            .eta()
                            .map(|d| format!("ETA {} · ", fmt_duration(d)))
                            .unwrap_or_default();
                        bar.set_message(format!("{eta}last: block {block} · {arm}"));
                    }
                    View::Lines => errln!(
                        "{}",
                        run_line(self.done, self.total, what, block, &arm, took, self.eta())
                    ),
                    View::Off => {}
                }
            }
            // Shown by the caller (not-applicable arms, the totals it was made with).
            Event::NotApplicable { .. } | Event::Total { .. } => {}
        }
    }

    pub fn finish(&self) {
        if let View::Bar(bar) = &self.view {
            bar.finish_and_clear();
        }
    }
}

/// One finished run for a log: `optgate: run 7/28 done (block 2, arm omp6, 3.1 s); ETA 1m 10s`.
fn run_line(
    done: usize,
    total: usize,
    what: &str,
    block: u32,
    arm: &str,
    took: Duration,
    eta: Option<Duration>,
) -> String {
    let eta = eta
        .map(|d| format!("; ETA {}", fmt_duration(d)))
        .unwrap_or_default();
    format!(
        "optgate: run {done}/{total} {what} (block {block}, arm {arm}, {:.1} s){eta}",
        took.as_secs_f64()
    )
}

/// `42s`, `1m 10s`, `2h 5m`.
fn fmt_duration(d: Duration) -> String {
    let s = d.as_secs_f64().round() as u64;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m {}s", s / 60, s % 60),
        _ => format!("{}h {}m", s / 3600, (s % 3600) / 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_like_a_person_writes_them() {
        assert_eq!(fmt_duration(Duration::from_millis(400)), "0s");
        assert_eq!(fmt_duration(Duration::from_secs(42)), "42s");
        assert_eq!(fmt_duration(Duration::from_secs(70)), "1m 10s");
        assert_eq!(fmt_duration(Duration::from_secs(7500)), "2h 5m");
    }

    #[test]
    fn the_line_of_a_finished_run() {
        assert_eq!(
            run_line(
                7,
                28,
                "done",
                2,
                "omp6",
                Duration::from_millis(3100),
                Some(Duration::from_secs(70))
            ),
            "optgate: run 7/28 done (block 2, arm omp6, 3.1 s); ETA 1m 10s"
        );
        assert_eq!(
            run_line(28, 28, "done", 7, "omp6", Duration::from_secs(3), None),
            "optgate: run 28/28 done (block 7, arm omp6, 3.0 s)"
        );
    }

    #[test]
    fn the_estimate_is_the_mean_run_times_the_runs_left() {
        let mut p = Progress {
            view: View::Off,
            total: 10,
            done: 4,
            ran: 0,
            ran_time: Duration::ZERO,
            since: Instant::now(),
        };
        assert_eq!(p.eta(), None, "no run of this execution has finished yet");
        p.done = 6;
        p.ran = 2;
        p.ran_time = Duration::from_secs(6);
        assert_eq!(p.eta(), Some(Duration::from_secs(12)));
        p.done = 10;
        assert_eq!(p.eta(), None);
    }
}
