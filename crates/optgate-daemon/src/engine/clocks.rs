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

/// The variable that sets the cluster schedule's shortest wait (`30s`, `2s`; the experiment
/// file's duration syntax): for a site whose controller can take more queries, or for the
/// fast tier's fake schedulers, whose jobs end at once. The longest wait stays 3 minutes.
pub const CLUSTER_POLL_VAR: &str = "OPTGATE_CLUSTER_POLL";

/// The shortest wait [`CLUSTER_POLL_VAR`] may set: a daemon never asks `squeue` or
/// `flux jobs` more than once a second.
pub const CLUSTER_POLL_FLOOR: Duration = Duration::from_secs(1);

impl EngineSettings {
    /// The default settings with the cluster's shortest wait from `value`
    /// (`$OPTGATE_CLUSTER_POLL`): the default when unset or empty; an error naming the
    /// variable when it is not a duration or is under [`CLUSTER_POLL_FLOOR`].
    pub fn from_cluster_poll(
        value: Option<std::ffi::OsString>,
    ) -> Result<EngineSettings, crate::error::SettingError> {
        use crate::error::SettingError;
        let mut settings = EngineSettings::default();
        let var = CLUSTER_POLL_VAR;
        let Some(v) = value.filter(|v| !v.is_empty()) else {
            return Ok(settings);
        };
        let text = v.to_str().ok_or(SettingError::NotUtf8 { var })?;
        let min = optgate_experiment::parse_duration(text).map_err(|source| {
            SettingError::NotADuration {
                var,
                value: text.to_string(),
                source,
            }
        })?;
        if min < CLUSTER_POLL_FLOOR {
            return Err(SettingError::BelowFloor {
                var,
                value: text.to_string(),
                floor: CLUSTER_POLL_FLOOR,
            });
        }
        settings.cluster = PollSchedule::new(min, settings.cluster.max);
        Ok(settings)
    }

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

#[cfg(test)]
mod cluster_poll_tests {
    use super::*;

    fn from(text: &str) -> Result<EngineSettings, crate::error::SettingError> {
        EngineSettings::from_cluster_poll(Some(text.into()))
    }

    #[test]
    fn unset_or_empty_keeps_the_default_schedule() {
        assert_eq!(
            EngineSettings::from_cluster_poll(None).unwrap(),
            EngineSettings::default()
        );
        assert_eq!(from("").unwrap(), EngineSettings::default());
    }

    #[test]
    fn a_duration_sets_the_shortest_cluster_wait_only() {
        let s = from("2s").unwrap();
        assert_eq!(s.cluster.min, Duration::from_secs(2));
        assert_eq!(s.cluster.max, EngineSettings::default().cluster.max);
        assert_eq!(s.local, EngineSettings::default().local);
        assert_eq!(from("1s").unwrap().cluster.min, CLUSTER_POLL_FLOOR);
    }

    #[test]
    fn under_the_floor_or_not_a_duration_is_an_error_naming_the_variable() {
        let low = from("500ms").unwrap_err().to_string();
        assert!(
            low.contains(CLUSTER_POLL_VAR) && low.contains("floor"),
            "{low}"
        );
        let bad = from("often").unwrap_err().to_string();
        assert!(bad.contains(CLUSTER_POLL_VAR), "{bad}");
    }
}
