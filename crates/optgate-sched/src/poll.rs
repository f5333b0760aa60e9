//! How long the daemon waits between two polls: short while jobs are changing state, longer
//! while nothing happens (up to a ceiling), the ceiling at once when the scheduler says it
//! is busy, and always spread by jitter so many daemons never poll `slurmctld` in step.
//! Pure: the caller supplies the jitter draw, so the schedule is testable without a clock.

use std::time::Duration;

/// What the last poll found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activity {
    /// Some job changed state (or a job was submitted): look again soon.
    Changed,
    /// Nothing changed.
    Quiet,
    /// The scheduler refused or rate-limited the query: back off to the ceiling.
    Throttled,
}

/// An adaptive poll interval with multiplicative growth and ± jitter.
#[derive(Debug, Clone, PartialEq)]
pub struct PollSchedule {
    pub min: Duration,
    pub max: Duration,
    /// Growth factor after a quiet poll (> 1).
    pub growth: f64,
    /// Jitter as a fraction of the interval: 0.2 spreads it over ±20 %.
    pub jitter: f64,
    base: Duration,
}

impl Default for PollSchedule {
    /// 10 s while busy, growing by half after each quiet poll to 3 minutes, ±20 %.
    fn default() -> Self {
        PollSchedule::new(Duration::from_secs(10), Duration::from_secs(180))
    }
}

impl PollSchedule {
    pub fn new(min: Duration, max: Duration) -> PollSchedule {
        let max = max.max(min);
        PollSchedule {
            min,
            max,
            growth: 1.5,
            jitter: 0.2,
            base: min,
        }
    }

    /// The interval before jitter.
    pub fn base(&self) -> Duration {
        self.base
    }

    /// The wait before the next poll, given what the last one found. `unit` is a jitter
    /// draw in `[0, 1)` (e.g. `rand::random::<f64>()`); 0.5 means no jitter.
    pub fn next(&mut self, activity: Activity, unit: f64) -> Duration {
        self.base = match activity {
            Activity::Changed => self.min,
            Activity::Quiet => self.base.mul_f64(self.growth.max(1.0)).min(self.max),
            Activity::Throttled => self.max,
        };
        let unit = if unit.is_finite() {
            unit.clamp(0.0, 1.0)
        } else {
            0.5
        };
        let jitter = self.jitter.clamp(0.0, 0.9);
        self.base.mul_f64(1.0 + jitter * (2.0 * unit - 1.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(d: Duration) -> f64 {
        d.as_secs_f64()
    }

    #[test]
    fn quiet_polls_grow_to_the_ceiling_and_activity_resets() {
        let mut p = PollSchedule::new(Duration::from_secs(10), Duration::from_secs(60));
        let waits: Vec<f64> = (0..6).map(|_| secs(p.next(Activity::Quiet, 0.5))).collect();
        assert_eq!(waits, [15.0, 22.5, 33.75, 50.625, 60.0, 60.0]);
        assert_eq!(secs(p.next(Activity::Changed, 0.5)), 10.0);
        assert_eq!(secs(p.next(Activity::Throttled, 0.5)), 60.0);
    }

    #[test]
    fn jitter_spreads_within_its_fraction() {
        let mut p = PollSchedule::new(Duration::from_secs(10), Duration::from_secs(60));
        assert_eq!(secs(p.next(Activity::Changed, 0.0)), 8.0);
        assert_eq!(secs(p.next(Activity::Changed, 1.0)), 12.0);
        assert_eq!(secs(p.next(Activity::Changed, 0.75)), 11.0);
        // A bad draw cannot produce a negative or endless wait.
        assert_eq!(secs(p.next(Activity::Changed, f64::NAN)), 10.0);
        assert_eq!(secs(p.next(Activity::Changed, 7.0)), 12.0);
    }
}
