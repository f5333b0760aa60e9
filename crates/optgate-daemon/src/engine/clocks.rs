//! How often each scheduler kind's jobs are polled: the settings and the per-kind clocks.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use optgate_experiment::SchedulerKind;
use optgate_sched::poll::{Activity, PollSchedule};

/// How often each backend's jobs are polled. Each kind keeps its own clock, so an active
/// local experiment (whose job states are a few files away) never makes the daemon ask
/// `squeue` or `flux jobs` more often than their own schedule.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineSettings {
    /// Local jobs: 100 ms while they change, growing to 2 s.
    pub local: PollSchedule,
    /// Slurm and Flux: 10 s while jobs change, growing to 3 minutes (±20 % jitter), so a
    /// shared controller sees at most one query per daemon every 10 s.
    pub cluster: PollSchedule,
}

impl Default for EngineSettings {
    fn default() -> Self {
        EngineSettings {
            local: PollSchedule::new(Duration::from_millis(100), Duration::from_secs(2)),
            cluster: PollSchedule::default(),
        }
    }
}

impl EngineSettings {
    /// The schedule of scheduler kind `kind`.
    pub fn schedule_for(&self, kind: SchedulerKind) -> PollSchedule {
        match kind {
            SchedulerKind::Local => self.local.clone(),
            SchedulerKind::Slurm | SchedulerKind::Flux => self.cluster.clone(),
        }
    }
}

/// Each scheduler kind's poll schedule and when it is next due.
#[derive(Debug, Default)]
pub(crate) struct PollClocks {
    clocks: BTreeMap<SchedulerKind, (PollSchedule, tokio::time::Instant)>,
}

impl PollClocks {
    /// Keeps a clock for each kind in use (a new one is due at once), drops the others.
    pub(crate) fn track(&mut self, kinds: &BTreeSet<SchedulerKind>, settings: &EngineSettings) {
        self.clocks.retain(|k, _| kinds.contains(k));
        for &k in kinds {
            self.clocks
                .entry(k)
                .or_insert_with(|| (settings.schedule_for(k), tokio::time::Instant::now()));
        }
    }

    /// Whether kind `kind`'s jobs are due for a poll (an unknown kind is).
    pub(crate) fn is_due(&self, kind: SchedulerKind, now: tokio::time::Instant) -> bool {
        self.clocks.get(&kind).is_none_or(|(_, due)| *due <= now)
    }

    /// After a pass: every kind polled in it gets its next due time from what the pass
    /// found; a pass that changed something brings every clock back to its shortest wait.
    pub(crate) fn advance(&mut self, polled: &BTreeSet<SchedulerKind>, activity: Activity) {
        let now = tokio::time::Instant::now();
        for (kind, (schedule, due)) in &mut self.clocks {
            if polled.contains(kind) || activity == Activity::Changed {
                *due = now + schedule.next(activity, rand::random::<f64>());
            }
        }
    }

    /// How long until the next kind is due (None: no kind in use).
    pub(crate) fn next_due_in(&self) -> Option<Duration> {
        let now = tokio::time::Instant::now();
        self.clocks
            .values()
            .map(|(_, due)| due.saturating_duration_since(now))
            .min()
    }
}

#[cfg(test)]
mod poll_clock_tests {
    use super::*;

    const LOCAL: SchedulerKind = SchedulerKind::Local;
    const SLURM: SchedulerKind = SchedulerKind::Slurm;

    fn kinds(k: &[SchedulerKind]) -> BTreeSet<SchedulerKind> {
        k.iter().copied().collect()
    }

    /// With a local and a Slurm experiment active, the engine wakes on the local clock but
    /// asks Slurm only on its own: quiet passes keep Slurm's next poll ≥ its 10 s minimum
    /// (less jitter) away while local polls come every ≤ 2 s.
    #[tokio::test(start_paused = true)]
    async fn a_local_experiment_does_not_make_slurm_polled_faster() {
        let settings = EngineSettings::default();
        let mut clocks = PollClocks::default();
        clocks.track(&kinds(&[LOCAL, SLURM]), &settings);
        let now = tokio::time::Instant::now();
        assert!(clocks.is_due(LOCAL, now) && clocks.is_due(SLURM, now));
        // The first pass polls both; nothing changed.
        clocks.advance(&kinds(&[LOCAL, SLURM]), Activity::Quiet);
        let mut slurm_polls = 0;
        let mut local_polls = 0;
        // Two minutes of quiet passes, each at the next due time.
        let end = tokio::time::Instant::now() + Duration::from_secs(120);
        while tokio::time::Instant::now() < end {
            let wait = clocks.next_due_in().unwrap();
            assert!(wait <= Duration::from_millis(2400), "{wait:?}");
            tokio::time::advance(wait).await;
            let now = tokio::time::Instant::now();
            let mut polled = BTreeSet::new();
            for k in [LOCAL, SLURM] {
                if clocks.is_due(k, now) {
                    polled.insert(k);
                }
            }
            slurm_polls += usize::from(polled.contains(&SLURM));
            local_polls += usize::from(polled.contains(&LOCAL));
            clocks.advance(&polled, Activity::Quiet);
        }
        // Slurm: 10 s growing by 1.5× (±20 %) → at most a handful in two minutes.
        assert!(slurm_polls <= 6, "slurm polled {slurm_polls} times");
        assert!(local_polls >= 50, "local polled {local_polls} times");
    }

    /// A pass that changed something brings every clock back to its shortest wait; a
    /// kind no longer in use loses its clock.
    #[tokio::test(start_paused = true)]
    async fn a_change_resets_every_clock_and_unused_kinds_are_dropped() {
        let settings = EngineSettings::default();
        let mut clocks = PollClocks::default();
        clocks.track(&kinds(&[SLURM]), &settings);
        for _ in 0..10 {
            clocks.advance(&kinds(&[SLURM]), Activity::Quiet);
        }
        assert!(clocks.next_due_in().unwrap() > Duration::from_secs(100));
        clocks.advance(&BTreeSet::new(), Activity::Changed);
        assert!(clocks.next_due_in().unwrap() <= Duration::from_secs(12));
        clocks.track(&BTreeSet::new(), &settings);
        assert_eq!(clocks.next_due_in(), None);
    }
}
