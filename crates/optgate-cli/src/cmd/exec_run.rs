//! `optgate exec-run [--attempt N] RUN_DIR [-- LAUNCHER...]` (hidden): executes one
//! rendered run where the job landed (this machine or a compute node) and writes its
//! manifest. A run whose manifest says it finished is never executed again, so a requeued
//! or resubmitted job cannot produce a second sample of the same run; a run a newer job
//! attempt claimed is not started, and a stale attempt never replaces its record.

use std::path::Path;

use anyhow::{Context, Result};
use tokio_util::sync::CancellationToken;

use optgate_wrapper::claim::Claim;
use optgate_wrapper::manifest::Outcome;
use optgate_wrapper::run::{Attempt, Executed, execute_prepared};

use crate::exit;

pub fn exec_run(run_dir: &Path, attempt: u32, launcher: &[String]) -> Result<i32> {
    let attempt = Attempt {
        number: attempt,
        scheduler_job_id: scheduler_job_id(|k| std::env::var(k).ok()),
    };
    // Inside the launcher's step (after `srun --cpu-freq` applied the arm's governor), this
    // same binary wraps every task: it records the governor actually in force there and
    // what the task used, around `bash run.sh`.
    let me = std::env::current_exe().context("cannot tell where this optgate binary is")?;
    let step_probe = vec![
        me.display().to_string(),
        "step".to_string(),
        run_dir.display().to_string(),
        "--attempt".to_string(),
        attempt.number.to_string(),
        "--".to_string(),
    ];
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    // Schedulers stop jobs with a signal: Slurm with SIGTERM (time limit, scancel), Flux
    // with SIGALRM then SIGHUP at a time limit and SIGTERM then SIGHUP on cancel. The run's
    // process group (its own, which the scheduler's signals do not reach) is stopped and
    // the manifest says "interrupted", so the run is re-planned, never counted. The
    // handlers are in place before the app starts.
    let stops = {
        let _in_runtime = runtime.enter();
        stop_signals()?
    };
    let executed = runtime.block_on(async {
        let cancel = CancellationToken::new();
        let c = cancel.clone();
        tokio::spawn(async move {
            stops.recv().await;
            c.cancel();
        });
        execute_prepared(run_dir, launcher, &step_probe, &attempt, &cancel).await
    })?;
    Ok(exit_status(run_dir, attempt.number, &executed))
}

/// The exit status for the job script, with a line on stderr when the run did not run or
/// was not recorded. A superseded attempt exits as interrupted: its job is a stale one, and
/// the script must not go on to its next run.
fn exit_status(run_dir: &Path, attempt: u32, executed: &Executed) -> i32 {
    let dir = run_dir.display();
    match executed {
        Executed::Recorded(m) => match m.outcome {
            Outcome::Completed => exit::OK,
            Outcome::Interrupted => exit::INTERRUPTED,
            _ => exit::FAILED,
        },
        Executed::NotStarted(Claim::Finished) | Executed::NotStarted(Claim::Held) => {
            eprintln!("optgate exec-run: {dir} already finished; not running it again");
            exit::OK
        }
        Executed::NotStarted(Claim::Superseded { by }) => {
            eprintln!(
                "optgate exec-run: attempt {attempt} does not start {dir}: attempt {by} holds it"
            );
            exit::INTERRUPTED
        }
        Executed::Stale { found, manifest } => {
            let why = match found {
                Claim::Superseded { by } => format!("attempt {by} claimed the run meanwhile"),
                _ => "the run was finished meanwhile".to_string(),
            };
            eprintln!(
                "optgate exec-run: attempt {attempt} of {dir} is stale ({why}); its record is kept as {} and its output as stdout.attempt-{attempt} and stderr.attempt-{attempt}, the run's own is unchanged",
                manifest.display()
            );
            exit::INTERRUPTED
        }
    }
}

/// `optgate step RUN_DIR [--attempt N] -- COMMAND…`: wraps one task inside a scheduler's
/// step. Once per node (the task with local id 0, or every task when no scheduler says) it
/// applies the arm's governor where the launcher cannot (outside Slurm: through the
/// experiment's `governor_helper`, restored after the app, `RUN_DIR/governor-step.attempt-N.<host>.json`
/// saying applied / verified / restored or why not), then writes the governor in force on the CPUs this process may run on (`Cpus_allowed_list`,
/// so the step's CPUs, not the node's) to `RUN_DIR/step-governor.<host>`; then it runs
/// COMMAND as the task's app (`optgate_wrapper::step::run_step`: passed through, signals
/// forwarded, measured, recorded) and exits as the app did. A failure to record is reported
/// on stderr and never stops or changes the run.
pub fn step(run_dir: &Path, attempt: u32, command: &[String]) -> Result<i32> {
    optgate_wrapper::step::check_run_dir(run_dir, attempt)
        .map_err(|e| exit::with_code(exit::INVALID_INPUT, e))?;
    let identity = optgate_wrapper::tasks::TaskIdentity::from_env(|k| std::env::var(k).ok());
    // Outside Slurm (no `--cpu-freq`), the first task of a node applies the arm's governor
    // through the experiment's helper before the governor in force is read.
    let governor = identity
        .first_on_node()
        .then(|| begin_step_governor(run_dir, &identity))
        .flatten();
    if identity.first_on_node()
        && let Err(e) = record_step_governor(run_dir)
    {
        eprintln!("optgate step: cannot record the governor in force: {e:#}");
    }
    // The node's record is written before the app (so a step killed meanwhile still
    // names its node) and again after it, with the node's RAPL energy around the app.
    let node = identity
        .first_on_node()
        .then(|| record_node(run_dir, attempt, &identity))
        .and_then(|r| {
            r.map_err(|e| eprintln!("optgate step: cannot record the node: {e:#}"))
                .ok()
        });
    let energy_root = optgate_probe::sysfs_root();
    let energy_before = node
        .as_ref()
        .and_then(|_| optgate_wrapper::energy::take(&energy_root));
    use optgate_wrapper::step::{StepError, run_step, start_failure_status};
    let step = run_step(run_dir, attempt, command);
    if let Some(mut node) = node {
        node.set_energy(match &step {
            Ok(_) => optgate_wrapper::nodes::energy_between(
                energy_before.as_ref(),
                optgate_wrapper::energy::take(&energy_root).as_ref(),
            ),
            Err(_) => Err(optgate_wrapper::nodes::EnergyGap::AppNotRun),
        });
        if let Err(e) = optgate_wrapper::nodes::write_record(run_dir, attempt, &node) {
            eprintln!("optgate step: cannot record the node's energy: {e}");
        }
    }
    let outcome = match step {
        Ok(o) => o,
        // As a shell would: the launcher reports 127 (or 126), and no task record is
        // written, since no app ran.
        Err(StepError::Start { program, source }) => {
            eprintln!("optgate step: cannot start {program}: {source}");
            return Ok(start_failure_status(&source));
        }
        Err(e) => return Err(e.into()),
    };
    if let Some(g) = governor {
        let record = g.finish();
        if let Err(e) = optgate_wrapper::step_governor::write_record(run_dir, attempt, &record) {
            eprintln!("optgate step: cannot write the governor's record: {e}");
        }
    }
    if let Err(e) = &outcome.written {
        eprintln!(
            "optgate step: cannot write the task's record under {}: {e}",
            run_dir.display()
        );
    }
    optgate_wrapper::step::pass_on(&outcome.record)
}

/// Applies the arm's governor on this node when the plan says so (see
/// `optgate_wrapper::step_governor`); None when there is nothing to apply or record.
fn begin_step_governor(
    run_dir: &Path,
    identity: &optgate_wrapper::tasks::TaskIdentity,
) -> Option<optgate_wrapper::step_governor::AppliedGovernor> {
    use optgate_wrapper::step_governor::{begin, plan_for_run, restore_path};
    let root = optgate_probe::sysfs_root();
    let plan = plan_for_run(run_dir, identity, &root);
    let cpus = step_cpus()
        .map_err(|e| eprintln!("optgate step: the governor is not applied: {e:#}"))
        .ok()?;
    let restore = restore_path(run_dir, &optgate_wrapper::run::hostname());
    begin(&root, &plan, &cpus, &restore)
}

/// The CPUs this process may run on (`Cpus_allowed_list`): the step's, not the node's.
fn step_cpus() -> Result<std::collections::BTreeSet<u32>> {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                .and_then(optgate_probe::parse_cpulist)
        })
        .context("cannot read Cpus_allowed_list of /proc/self/status")
}

fn record_step_governor(run_dir: &Path) -> Result<()> {
    let root = optgate_probe::sysfs_root();
    let cpus = step_cpus()?;
    let governor = optgate_probe::governor::governor_in_force(&root, &cpus);
    let host = optgate_wrapper::run::hostname();
    anyhow::ensure!(
        !host.is_empty() && !host.contains('/') && !host.starts_with('.'),
        "host name {host:?} cannot name a file"
    );
    let path = run_dir.join(format!(
        "{}{host}",
        optgate_wrapper::run::STEP_GOVERNOR_PREFIX
    ));
    // Tasks of one node may race; each writes a whole file under its own temporary name
    // (the process id's), fsynced and renamed into place.
    optgate_wrapper::manifest::write_atomic(&path, format!("{governor}\n").as_bytes())
        .with_context(|| format!("cannot write {}", path.display()))
}

/// The node's record (`optgate_wrapper::nodes`): its names, the governor in force on this
/// task's CPUs, the load average and the node's online cores, written once per node
/// before the app (energy not yet measured); the record written.
fn record_node(
    run_dir: &Path,
    attempt: u32,
    identity: &optgate_wrapper::tasks::TaskIdentity,
) -> Result<optgate_wrapper::nodes::NodeRecord> {
    let root = optgate_probe::sysfs_root();
    let allowed = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                .and_then(optgate_probe::parse_cpulist)
        })
        .context("cannot read Cpus_allowed_list of /proc/self/status")?;
    let online = root.join("sys/devices/system/cpu/online");
    let record = optgate_wrapper::nodes::NodeRecord {
        node: identity.node.clone(),
        host: optgate_wrapper::run::hostname(),
        governor: optgate_probe::governor::governor_in_force(&root, &allowed),
        load_avg: std::fs::read_to_string("/proc/loadavg")
            .ok()
            .and_then(|t| optgate_wrapper::manifest::parse_loadavg(&t)),
        cores: std::fs::read_to_string(&online)
            .ok()
            .and_then(|t| optgate_probe::parse_cpulist(&t))
            .and_then(|c| u32::try_from(c.len()).ok()),
        energy_j: None,
        energy_unmeasured: None,
    };
    optgate_wrapper::nodes::write_record(run_dir, attempt, &record)?;
    Ok(record)
}

/// The id of the scheduler job this run is part of, as the backend recorded it when it
/// submitted the job: Flux's first (in decimal; a `flux batch` script has only
/// `FLUX_ENCLOSING_ID`, in F58), then Slurm's, then the local backend's.
fn scheduler_job_id(var: impl Fn(&str) -> Option<String>) -> Option<String> {
    let var = |k: &str| var(k).filter(|v| !v.trim().is_empty());
    optgate_sched::flux::job_id_in_env(var)
        .or_else(|| var("SLURM_JOB_ID"))
        .or_else(|| var("OPTGATE_JOB_ID"))
}

/// The signals that mean "the job is being stopped", each with its handler.
struct StopSignals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
    alrm: tokio::signal::unix::Signal,
}

/// SIGTERM, SIGINT, SIGHUP and SIGALRM: whichever a scheduler (or a person) sends.
fn stop_signals() -> Result<StopSignals> {
    use tokio::signal::unix::{SignalKind, signal};
    let handle = |k: SignalKind, name: &str| {
        signal(k).with_context(|| format!("cannot install a {name} handler"))
    };
    Ok(StopSignals {
        term: handle(SignalKind::terminate(), "SIGTERM")?,
        int: handle(SignalKind::interrupt(), "SIGINT")?,
        hup: handle(SignalKind::hangup(), "SIGHUP")?,
        alrm: handle(SignalKind::alarm(), "SIGALRM")?,
    })
}

impl StopSignals {
    /// Returns when any of the signals arrives.
    async fn recv(mut self) {
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.int.recv() => {}
            _ = self.hup.recv() => {}
            _ = self.alrm.recv() => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn the_job_id_comes_from_the_nearest_scheduler() {
        // A `flux batch` script as real Flux 0.88.0 starts it: no FLUX_JOB_ID.
        let batch = [
            ("FLUX_ENCLOSING_ID", "ƒBLe2WvK"),
            ("FLUX_URI", "local:///x"),
        ];
        assert_eq!(
            scheduler_job_id(env(&batch)).as_deref(),
            Some("393576710144")
        );
        let ascii = [("FLUX_ENCLOSING_ID", "fhbLJV9h")];
        assert_eq!(
            scheduler_job_id(env(&ascii)).as_deref(),
            Some("1545282256896")
        );
        // A task of `flux run`: its own job's id wins.
        let task = [("FLUX_JOB_ID", "ƒ2JL"), ("FLUX_ENCLOSING_ID", "ƒBLe2WvK")];
        assert_eq!(scheduler_job_id(env(&task)).as_deref(), Some("4369"));
        // Flux started inside a Slurm job: Flux is the nearer scheduler.
        let nested = [("SLURM_JOB_ID", "77"), ("FLUX_ENCLOSING_ID", "ƒ2JL")];
        assert_eq!(scheduler_job_id(env(&nested)).as_deref(), Some("4369"));
        assert_eq!(
            scheduler_job_id(env(&[("SLURM_JOB_ID", "77")])).as_deref(),
            Some("77")
        );
        assert_eq!(
            scheduler_job_id(env(&[("OPTGATE_JOB_ID", "local-1"), ("SLURM_JOB_ID", " ")]))
                .as_deref(),
            Some("local-1")
        );
        assert_eq!(scheduler_job_id(env(&[])), None);
    }
}
