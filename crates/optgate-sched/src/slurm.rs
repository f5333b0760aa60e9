//! The Slurm backend: a pure `render_script` (`#SBATCH` directives, then one
//! `"$OPTGATE_BIN" exec-run RUN_DIR --attempt N -- srun …` line per run), pure parsers of `sbatch`,
//! `squeue` and `sacct` output, and [`SlurmBackend`], which runs those commands through
//! the command runner.
//!
//! Facts this follows (docs/SCHEDULERS.md): `srun -c` is always passed (22.05/23.02 stopped
//! inheriting `SLURM_CPUS_PER_TASK`); `SBATCH_*`/`SLURM_*` variables of the submitting
//! shell are cleared (they silently change options); every query passes `-o`; polling is
//! one `squeue` for all jobs plus, for jobs it no longer lists, one `sacct` — never one
//! call per job.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::sync::{Arc, Mutex};

use optgate_experiment::SchedulerKind;

use crate::backend::{JobId, JobRun, JobSpec, JobState, SchedError, Scheduler};
use crate::batch::limit_seconds;
use crate::batch_client::{BatchClient, NameQuery, Submission, env_without};
use crate::command::{CommandRunner, Invocation, RetryPolicy};
use crate::directive::{self, Carries, Dialect, last_line, launch_shape};
use crate::lookup::{NamedJob, parse_name_listing};

/// Slurm's time-limit format, `D-HH:MM:SS` (seconds rounded up).
pub fn format_time_limit(limit: std::time::Duration) -> Result<String, SchedError> {
    let s = limit_seconds(limit)?;
    Ok(format!(
        "{}-{:02}:{:02}:{:02}",
        s / 86_400,
        s % 86_400 / 3_600,
        s % 3_600 / 60,
        s % 60
    ))
}

/// The `srun` words of one run: its own shape (not the allocation's), `-c` always
/// explicit, the arm's governor as `--cpu-freq=<governor>` (Slurm sets it on the step's
/// CPUs and puts the old one back after), the whole environment exported, then the arm's
/// extra launcher arguments. A governor outside [`optgate_experiment::load::CPUFREQ_GOVERNORS`]
/// is refused (`SchedError::Unrepresentable`), never passed on.
pub fn srun_words(run: &JobRun) -> Result<Vec<String>, SchedError> {
    let mut w: Vec<String> = vec!["srun".into()];
    w.extend(launch_shape(run));
    if run.gpus_per_task > 0 {
        w.push(format!("--gpus-per-task={}", run.gpus_per_task));
    }
    if let Some(g) = &run.governor {
        if !optgate_experiment::load::CPUFREQ_GOVERNORS.contains(&g.as_str()) {
            return Err(SchedError::Unrepresentable {
                field: format!("governor of run {}", run.run_id),
                value: g.clone(),
                reason: format!(
                    "not a cpufreq governor (one of {})",
                    optgate_experiment::load::CPUFREQ_GOVERNORS.join(", ")
                ),
            });
        }
        w.push(format!("--cpu-freq={g}"));
    }
    w.push("--export=ALL".into());
    w.extend(run.launcher_args.iter().cloned());
    Ok(w)
}

/// What each part of a job renders to in an `#SBATCH` line, in the order written.
pub const SBATCH: Dialect = Dialect {
    scheduler: "Slurm",
    prefix: "#SBATCH ",
    time_limit: format_time_limit,
    launcher: srun_words,
    directives: &[
        ("--job-name", Carries::JobName),
        ("--nodes", Carries::Nodes),
        ("--ntasks-per-node", Carries::TasksPerNode),
        ("--cpus-per-task", Carries::CpusPerTask),
        ("--gpus-per-task", Carries::GpusPerTask),
        ("--time", Carries::TimeLimit),
        ("--partition", Carries::Queue),
        ("--account", Carries::Account),
        ("--exclusive", Carries::Exclusive),
        ("--output", Carries::Fixed("slurm-%j.out")),
        ("--error", Carries::Fixed("slurm-%j.err")),
    ],
};

/// The batch script of a job. Fails on values a directive line cannot carry.
pub fn render_script(job: &JobSpec) -> Result<String, SchedError> {
    directive::render_script(&SBATCH, job)
}

/// Whether a variable of the submitting environment would change the job or the output
/// optgate parses: `SBATCH_*`/`SALLOC_*`/`SRUN_*` set options, `SLURM_*` from an enclosing
/// allocation leak into the job and its `srun` steps (and `SLURM_TIME_FORMAT`,
/// `SLURM_CLUSTERS` change what the queries print), `SQUEUE_*`/`SACCT_*` change formats and
/// filters. `SLURM_CONF` stays: it says where the cluster's configuration is.
pub fn is_cleared_variable(name: &str) -> bool {
    name != "SLURM_CONF"
        && ["SBATCH_", "SALLOC_", "SRUN_", "SLURM_", "SQUEUE_", "SACCT_"]
            .iter()
            .any(|p| name.starts_with(p))
}

/// The environment Slurm commands run with: `base` without the cleared variables (what
/// [`BatchClient::inv`] gives the backend's commands).
pub fn clean_env(base: &BTreeMap<OsString, OsString>) -> BTreeMap<OsString, OsString> {
    env_without(base, is_cleared_variable)
}

/// `sbatch --parsable` prints `JOBID` or `JOBID;CLUSTER`.
pub fn parse_sbatch_parsable(stdout: &str) -> Result<JobId, SchedError> {
    let id = last_line(stdout).split(';').next().unwrap_or("");
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()) {
        return Err(SchedError::Parse {
            what: "a job id from `sbatch --parsable`",
            text: stdout.to_string(),
        });
    }
    Ok(JobId(id.to_string()))
}

/// One line of `squeue -h -o '%i %T %r'`: id, long state name, reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqueueRow {
    pub id: String,
    pub state: String,
    pub reason: String,
}

pub const SQUEUE_STATE_FORMAT: &str = "%i %T %r";
pub const SQUEUE_NAME_FORMAT: &str = "%i %j";

/// Parses `squeue -h -o '%i %T %r'` (the reason may be absent or contain spaces).
pub fn parse_squeue(stdout: &str) -> Result<Vec<SqueueRow>, SchedError> {
    let mut rows = Vec::new();
    for line in stdout.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let mut parts = line.splitn(3, ' ');
        let (Some(id), Some(state)) = (parts.next(), parts.next()) else {
            return Err(SchedError::Parse {
                what: "a `squeue` line (id, state, reason)",
                text: line.to_string(),
            });
        };
        rows.push(SqueueRow {
            id: id.to_string(),
            state: state.to_string(),
            reason: parts.next().unwrap_or("").trim().to_string(),
        });
    }
    Ok(rows)
}

/// Parses `squeue -h -o '%i %j'` (see [`crate::lookup::parse_name_listing`]).
pub fn parse_squeue_names(stdout: &str) -> Result<Vec<NamedJob>, SchedError> {
    parse_name_listing(stdout, "a `squeue` line (id, name)")
}

/// Whether a line `scancel` printed says the job had already ended: cancelling it is then
/// not a failure (Slurm 22.05's words for an ended job, and for one it has forgotten).
pub fn says_job_ended(line: &str) -> bool {
    line.contains("already completing or completed") || line.contains("Invalid job id specified")
}

/// One line of `sacct -X -n -P -o JobID,State,ExitCode,Elapsed`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SacctRow {
    pub id: String,
    /// As printed, e.g. `CANCELLED by 1000`.
    pub state: String,
    /// `rc:signal`.
    pub exit_code: String,
    pub elapsed: String,
}

pub const SACCT_FIELDS: &str = "JobID,State,ExitCode,Elapsed";

pub fn parse_sacct(stdout: &str) -> Result<Vec<SacctRow>, SchedError> {
    stdout
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|line| {
            let f: Vec<&str> = line.split('|').collect();
            match f.as_slice() {
                [id, state, exit_code, elapsed, ..] => Ok(SacctRow {
                    id: id.to_string(),
                    state: state.to_string(),
                    exit_code: exit_code.to_string(),
                    elapsed: elapsed.to_string(),
                }),
                _ => Err(SchedError::Parse {
                    what: "a `sacct -P` line (JobID|State|ExitCode|Elapsed)",
                    text: line.to_string(),
                }),
            }
        })
        .collect()
}

/// Whether `sacct` answered that this cluster keeps no accounting.
pub fn accounting_disabled(stdout: &str, stderr: &str) -> bool {
    let said = |s: &str| s.contains("accounting storage is disabled");
    said(stdout) || said(stderr)
}

/// `rc:signal` as words for a failure's detail.
pub fn describe_exit_code(code: &str) -> String {
    match code.split_once(':') {
        Some((_, sig)) if sig != "0" && !sig.is_empty() => format!("killed by signal {sig}"),
        Some((rc, _)) => format!("exit code {rc}"),
        None => format!("exit code {code}"),
    }
}

/// Maps a Slurm state name (as `squeue %T` or `sacct` print it; `CANCELLED by 123`
/// included) to a [`JobState`]. `detail` (a reason or exit code) goes into failures.
/// A state not listed is an error: treating it as "running" could wait forever.
pub fn job_state(state: &str, detail: &str) -> Result<JobState, SchedError> {
    let name = state.split_whitespace().next().unwrap_or("");
    // squeue can mark a state with a trailing `+` (e.g. `CANCELLED+` in narrow columns).
    let name = name.trim_end_matches('+');
    let with_detail = |s: &str| {
        if detail.is_empty() || detail == "None" {
            s.to_string()
        } else {
            format!("{s}: {detail}")
        }
    };
    Ok(match name {
        // Waiting: queued, held, or requeued and waiting to run again.
        "PENDING" | "CONFIGURING" | "REQUEUED" | "REQUEUE_HOLD" | "REQUEUE_FED"
        | "RESV_DEL_HOLD" => JobState::Pending,
        // Started and not yet ended. COMPLETING: the script ended and the node is being
        // cleaned up; the final state follows. SUSPENDED/STOPPED: paused, not ended.
        "RUNNING" | "COMPLETING" | "SUSPENDED" | "STOPPED" | "SIGNALING" | "STAGE_OUT"
        | "RESIZING" => JobState::Running,
        "COMPLETED" => JobState::Completed,
        "FAILED" | "SPECIAL_EXIT" => JobState::Failed(with_detail(name)),
        // The app's own memory use: resubmitting would fail the same way.
        "OUT_OF_MEMORY" => JobState::Failed(with_detail(name)),
        "CANCELLED" => JobState::Cancelled,
        // Ended at a time limit or a --deadline: finished runs are kept, the rest re-planned.
        "TIMEOUT" | "DEADLINE" => JobState::Timeout,
        // Lost to the system, not the app: may be resubmitted.
        "NODE_FAIL" | "PREEMPTED" | "BOOT_FAIL" | "REVOKED" => JobState::Lost(with_detail(name)),
        _ => {
            return Err(SchedError::Parse {
                what: "a Slurm job state",
                text: state.to_string(),
            });
        }
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Accounting {
    Untried,
    Works,
    Disabled,
}

/// How a job's script goes to Slurm: `sbatch --parsable job.sh`.
const SBATCH_SUBMISSION: Submission = Submission {
    dialect: &SBATCH,
    what: "sbatch",
    program: "sbatch",
    args: &["--parsable"],
    parse_id: parse_sbatch_parsable,
};

/// The Slurm backend. Blocking; the daemon calls it from a blocking task.
pub struct SlurmBackend {
    /// Its commands start from `client.base_env` without the cleared variables.
    client: BatchClient,
    /// Learnt from the first `sacct`: a cluster without accounting is not asked again.
    accounting: Mutex<Accounting>,
}

impl Default for SlurmBackend {
    fn default() -> Self {
        SlurmBackend::new()
    }
}

impl SlurmBackend {
    /// Runs the real commands, starting from this process's environment.
    pub fn new() -> SlurmBackend {
        SlurmBackend::from_client(BatchClient::system(is_cleared_variable))
    }

    pub fn with_runner(runner: Arc<dyn CommandRunner>, retry: RetryPolicy) -> SlurmBackend {
        SlurmBackend::from_client(BatchClient::new(runner, retry, is_cleared_variable))
    }

    fn from_client(client: BatchClient) -> SlurmBackend {
        SlurmBackend {
            client,
            accounting: Mutex::new(Accounting::Untried),
        }
    }

    /// Replaces the environment the commands start from (tests prove that what must be
    /// cleared is cleared).
    pub fn with_base_env(mut self, env: BTreeMap<OsString, OsString>) -> SlurmBackend {
        self.client.base_env = env;
        self
    }

    /// `squeue` of all this user's jobs in `format`. `-t all`: also the jobs that ended but
    /// slurmctld still remembers (MinJobAge), with their final state — the same knowledge
    /// `scontrol show job` has, for all jobs in one call.
    fn squeue_all(&self, format: &str) -> Invocation {
        let args = ["--me", "-t", "all", "-h", "-o", format];
        self.client.inv("squeue", args.map(String::from))
    }

    fn names(&self) -> NameQuery {
        NameQuery {
            command: self.squeue_all(SQUEUE_NAME_FORMAT),
            parse: parse_squeue_names,
        }
    }

    /// One batched `sacct` for jobs `squeue` no longer lists; `None` when the cluster keeps
    /// no accounting (remembered, so it is not asked again).
    fn sacct(&self, ids: &[&JobId]) -> Result<Option<Vec<SacctRow>>, SchedError> {
        if *self.accounting.lock().expect("not poisoned") == Accounting::Disabled {
            return Ok(None);
        }
        let list = ids
            .iter()
            .map(|i| i.0.as_str())
            .collect::<Vec<_>>()
            .join(",");
        let args = ["-X", "-n", "-P", "-j", &list, "-o", SACCT_FIELDS];
        let inv = self.client.inv("sacct", args.map(String::from));
        let c = &self.client;
        let out = c.retry.run_pausing("sacct", &|d| c.pause(d), || {
            let out = c.runner.run(&inv)?;
            if accounting_disabled(&out.stdout, &out.stderr) {
                return Ok(None);
            }
            out.check(&inv).map(Some)
        })?;
        let mut acc = self.accounting.lock().expect("not poisoned");
        match out {
            None => {
                if *acc != Accounting::Disabled {
                    tracing::info!(
                        "Slurm accounting is disabled: finished jobs are judged by their run manifests"
                    );
                }
                *acc = Accounting::Disabled;
                Ok(None)
            }
            Some(out) => {
                *acc = Accounting::Works;
                parse_sacct(&out.stdout).map(Some)
            }
        }
    }
}

impl Scheduler for SlurmBackend {
    fn kind(&self) -> SchedulerKind {
        SchedulerKind::Slurm
    }

    fn submit(&self, job: &JobSpec) -> Result<JobId, SchedError> {
        self.client.submit(job, &SBATCH_SUBMISSION, &self.names())
    }

    fn poll(&self, ids: &[JobId]) -> Result<BTreeMap<JobId, JobState>, SchedError> {
        let mut states = BTreeMap::new();
        if ids.is_empty() {
            return Ok(states);
        }
        let listing = self
            .client
            .run_checked(&self.squeue_all(SQUEUE_STATE_FORMAT))?;
        let rows: BTreeMap<String, SqueueRow> = parse_squeue(&listing.stdout)?
            .into_iter()
            .map(|r| (r.id.clone(), r))
            .collect();
        let mut missing = Vec::new();
        for id in ids {
            match rows.get(&id.0) {
                Some(r) => {
                    states.insert(id.clone(), job_state(&r.state, &r.reason)?);
                }
                None => missing.push(id),
            }
        }
        if !missing.is_empty()
            && let Some(rows) = self.sacct(&missing)?
        {
            // Without --duplicates sacct prints the latest record of a requeued job; keep
            // the last line per id all the same.
            let by_id: BTreeMap<&str, &SacctRow> =
                rows.iter().map(|r| (r.id.as_str(), r)).collect();
            for id in &missing {
                if let Some(r) = by_id.get(id.0.as_str()) {
                    states.insert(
                        (*id).clone(),
                        job_state(&r.state, &describe_exit_code(&r.exit_code))?,
                    );
                }
            }
        }
        for id in ids {
            // Neither squeue nor accounting knows it: the run manifests tell the story.
            states.entry(id.clone()).or_insert(JobState::Unknown);
        }
        Ok(states)
    }

    fn find_by_name(&self, names: &[String]) -> Result<BTreeMap<String, JobId>, SchedError> {
        self.client.find_by_name(names, &self.names())
    }

    fn cancel(&self, ids: &[JobId]) -> Result<(), SchedError> {
        let scancel = ("scancel", "scancel", &["--quiet"][..]);
        self.client.cancel(scancel, ids, says_job_ended)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{SAMPLE_BODY_PREAMBLE, assert_valid_bash, bare_sample_job, sample_job};
    use crate::command::Output;
    use std::sync::Mutex;
    use std::time::Duration;

    const DIRECTIVES: &str = r#"#!/bin/bash
#SBATCH --job-name=og-e1-b003
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=16
#SBATCH --cpus-per-task=6
#SBATCH --time=0-00:35:00
#SBATCH --partition=pdebug
#SBATCH --account=myproj
#SBATCH --exclusive
#SBATCH --output=slurm-%j.out
#SBATCH --error=slurm-%j.err
#SBATCH --constraint=cpu
"#;
    const RUN_LINES: &str = r#"# Run 1 of 2: b003-omp6 (arm omp6).
"$OPTGATE_BIN" exec-run '/p/lustre/me/vpic'\''s run/runs/b003-omp6' --attempt 1 -- srun -N 1 -n 16 -c 6 --export=ALL --cpu-bind=cores; og_after $?
# Run 2 of 2: b003-baseline (arm baseline).
"$OPTGATE_BIN" exec-run '/p/lustre/me/vpic'\''s run/runs/b003-baseline' --attempt 1 -- srun -N 1 -n 16 -c 1 --export=ALL; og_after $?
exit "$og_status"
"#;

    /// The whole script of the sample job, to the byte.
    fn expected() -> String {
        let opening =
            "# optgate Slurm job og-e1-b003: 2 run(s), back to back, in the recorded order.\n";
        format!("{DIRECTIVES}{opening}{SAMPLE_BODY_PREAMBLE}{RUN_LINES}")
    }

    #[test]
    fn the_script_is_exactly_this() {
        let got = render_script(&sample_job()).unwrap();
        assert_eq!(got, expected());
    }

    #[test]
    fn the_script_is_valid_bash() {
        assert_valid_bash(&render_script(&sample_job()).unwrap());
    }

    #[test]
    fn a_governor_variant_asks_srun_for_it_on_its_own_launch_line() {
        let mut job = sample_job();
        job.runs[0].governor = Some("performance".into());
        let s = render_script(&job).unwrap();
        let launches: Vec<&str> = s.lines().filter(|l| l.contains(" exec-run ")).collect();
        assert_eq!(
            launches,
            [
                r#""$OPTGATE_BIN" exec-run '/p/lustre/me/vpic'\''s run/runs/b003-omp6' --attempt 1 -- srun -N 1 -n 16 -c 6 --cpu-freq=performance --export=ALL --cpu-bind=cores; og_after $?"#,
                r#""$OPTGATE_BIN" exec-run '/p/lustre/me/vpic'\''s run/runs/b003-baseline' --attempt 1 -- srun -N 1 -n 16 -c 1 --export=ALL; og_after $?"#,
            ]
        );
        // Only the known cpufreq governors pass; anything else is refused, not quoted.
        for bad in ["performance; rm -rf ~", "turbo", "", "Performance"] {
            job.runs[0].governor = Some(bad.into());
            match render_script(&job) {
                Err(SchedError::Unrepresentable { value, .. }) => assert_eq!(value, bad),
                other => panic!("{bad:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn gpus_minute_limits_and_absent_options_render_as_expected() {
        let mut job = bare_sample_job(2);
        job.time_limit = Duration::from_secs(2 * 86_400 + 3 * 3_600 + 4 * 60 + 5);
        let s = render_script(&job).unwrap();
        let directives: Vec<&str> = s.lines().filter(|l| l.starts_with("#SBATCH")).collect();
        assert_eq!(
            directives,
            [
                "#SBATCH --job-name=og-e1-b003",
                "#SBATCH --nodes=1",
                "#SBATCH --ntasks-per-node=16",
                "#SBATCH --cpus-per-task=6",
                "#SBATCH --gpus-per-task=2",
                "#SBATCH --time=2-03:04:05",
                "#SBATCH --output=slurm-%j.out",
                "#SBATCH --error=slurm-%j.err",
            ]
        );
        assert!(
            s.contains(" -- srun -N 1 -n 16 -c 6 --gpus-per-task=2 --export=ALL; og_after $?\n")
        );
    }

    #[test]
    fn time_limits_use_days_hours_minutes_seconds() {
        for (secs, want) in [
            (60, "0-00:01:00"),
            (90, "0-00:01:30"),
            (35 * 60, "0-00:35:00"),
            (86_400 + 1, "1-00:00:01"),
        ] {
            assert_eq!(format_time_limit(Duration::from_secs(secs)).unwrap(), want);
        }
        assert!(format_time_limit(Duration::ZERO).is_err());
    }

    #[test]
    fn unrepresentable_values_are_refused_not_mangled() {
        type Edit = Box<dyn Fn(&mut JobSpec)>;
        let cases: Vec<(&str, Edit)> = vec![
            ("queue", Box::new(|j| j.queue = Some("p debug".into()))),
            ("account", Box::new(|j| j.account = Some("a#b".into()))),
            (
                "extra",
                Box::new(|j| j.extra_directives = vec!["--comment=\"x y\"".into()]),
            ),
            (
                "extra2",
                Box::new(|j| j.extra_directives = vec!["--a\n#SBATCH --b".into()]),
            ),
            ("name", Box::new(|j| j.name = "og x".into())),
            ("dir", Box::new(|j| j.dir = "relative/dir".into())),
            ("cpus", Box::new(|j| j.cpus_per_task = 0)),
            ("time", Box::new(|j| j.time_limit = Duration::ZERO)),
        ];
        for (what, edit) in cases {
            let mut job = sample_job();
            edit(&mut job);
            let err = render_script(&job).unwrap_err();
            assert!(
                matches!(err, SchedError::Unrepresentable { .. }),
                "{what}: {err}"
            );
        }
    }

    /// The script's control flow, run for real with a stand-in for the optgate binary that
    /// records each call's arguments and exits as told: a failed probe is harmless, runs go in order with their own
    /// launcher words intact, a failed run does not stop the block but fails the job, an
    /// interrupted run ends the job at once.
    #[test]
    fn runs_go_in_order_failures_continue_and_interruptions_stop() {
        let tmp = tempfile::tempdir().unwrap();
        let log = tmp.path().join("calls");
        let fake = tmp.path().join("optgate");
        std::fs::write(
            &fake,
            format!(
                "#!/bin/bash\nprintf '%s\\n' \"$*\" >> {log}\n\
                 [ \"$1\" = probe ] && exit 1\n\
                 case \"$2\" in *omp6) exit \"${{OMP6_EXIT:-0}}\" ;; esac\nexit 0\n",
                log = crate::shell::quote(&log.display().to_string())
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut job = sample_job();
        job.optgate_bin = fake.clone();
        job.dir = tmp.path().join("job dir");
        std::fs::create_dir_all(&job.dir).unwrap();
        let script = tmp.path().join("job.sh");
        std::fs::write(&script, render_script(&job).unwrap()).unwrap();
        let run = |omp6_exit: &str| {
            let _ = std::fs::remove_file(&log);
            let st = std::process::Command::new("bash")
                .arg(&script)
                .env("OMP6_EXIT", omp6_exit)
                .status()
                .unwrap();
            (st.code(), std::fs::read_to_string(&log).unwrap())
        };
        // The stand-in's probe fails: the runs go ahead all the same.
        let probe = "probe --json\n";
        let omp6 = "exec-run /p/lustre/me/vpic's run/runs/b003-omp6 --attempt 1 -- srun -N 1 -n 16 -c 6 --export=ALL --cpu-bind=cores\n";
        let base = "exec-run /p/lustre/me/vpic's run/runs/b003-baseline --attempt 1 -- srun -N 1 -n 16 -c 1 --export=ALL\n";
        assert_eq!(run("0"), (Some(0), format!("{probe}{omp6}{base}")));
        assert_eq!(run("3"), (Some(1), format!("{probe}{omp6}{base}")));
        assert_eq!(run("130"), (Some(130), format!("{probe}{omp6}")));
    }

    #[test]
    fn sbatch_parsable_output() {
        for (out, id) in [
            ("1234\n", "1234"),
            ("1234;cluster2\n", "1234"),
            ("\n  77  \n", "77"),
        ] {
            assert_eq!(parse_sbatch_parsable(out).unwrap(), JobId(id.into()));
        }
        for bad in ["", "Submitted batch job 1234\n", "12a4\n"] {
            assert!(parse_sbatch_parsable(bad).is_err(), "{bad:?}");
        }
    }

    /// `squeue --me -t all -h -o '%i %T %r'` as printed by this machine's Slurm 22.05.8 for a
    /// completed, a failed (exit 3) and a cancelled job, plus documented pending/running
    /// lines.
    const SQUEUE: &str = "\
1 COMPLETED None
2 FAILED NonZeroExitCode
3 CANCELLED None
4 PENDING Resources
5 RUNNING None
6 TIMEOUT TimeLimit
7 NODE_FAIL NodeDown
";

    #[test]
    fn squeue_lines_parse_and_map() {
        let rows = parse_squeue(SQUEUE).unwrap();
        let states: Vec<JobState> = rows
            .iter()
            .map(|r| job_state(&r.state, &r.reason).unwrap())
            .collect();
        assert_eq!(
            states,
            [
                JobState::Completed,
                JobState::Failed("FAILED: NonZeroExitCode".into()),
                JobState::Cancelled,
                JobState::Pending,
                JobState::Running,
                JobState::Timeout,
                JobState::Lost("NODE_FAIL: NodeDown".into()),
            ]
        );
        assert!(parse_squeue("justone\n").is_err());
    }

    /// `sacct -X -n -P -o JobID,State,ExitCode,Elapsed`, in the documented format.
    #[test]
    fn sacct_lines_parse_and_map() {
        let out = "\
101|COMPLETED|0:0|00:00:05
102|FAILED|3:0|00:01:10
103|CANCELLED by 1000|0:15|00:00:40
104|TIMEOUT|0:0|00:02:00
105|OUT_OF_MEMORY|0:125|1-02:03:04
106|PREEMPTED|0:0|00:10:00
";
        let rows = parse_sacct(out).unwrap();
        assert_eq!(rows[2].state, "CANCELLED by 1000");
        assert_eq!(rows[4].elapsed, "1-02:03:04");
        let states: Vec<JobState> = rows
            .iter()
            .map(|r| job_state(&r.state, &describe_exit_code(&r.exit_code)).unwrap())
            .collect();
        assert_eq!(
            states,
            [
                JobState::Completed,
                JobState::Failed("FAILED: exit code 3".into()),
                JobState::Cancelled,
                JobState::Timeout,
                JobState::Failed("OUT_OF_MEMORY: killed by signal 125".into()),
                JobState::Lost("PREEMPTED: exit code 0".into()),
            ]
        );
        assert!(parse_sacct("101|COMPLETED\n").is_err());
        assert!(accounting_disabled(
            "",
            "Slurm accounting storage is disabled\n"
        ));
    }

    #[test]
    fn every_documented_state_maps_and_unknown_ones_are_errors() {
        let table = [
            ("PENDING", JobState::Pending),
            ("CONFIGURING", JobState::Pending),
            ("REQUEUED", JobState::Pending),
            ("REQUEUE_HOLD", JobState::Pending),
            ("REQUEUE_FED", JobState::Pending),
            ("RESV_DEL_HOLD", JobState::Pending),
            ("RUNNING", JobState::Running),
            ("COMPLETING", JobState::Running),
            ("SUSPENDED", JobState::Running),
            ("STOPPED", JobState::Running),
            ("SIGNALING", JobState::Running),
            ("STAGE_OUT", JobState::Running),
            ("RESIZING", JobState::Running),
            ("COMPLETED", JobState::Completed),
            ("FAILED", JobState::Failed("FAILED".into())),
            ("SPECIAL_EXIT", JobState::Failed("SPECIAL_EXIT".into())),
            ("OUT_OF_MEMORY", JobState::Failed("OUT_OF_MEMORY".into())),
            ("CANCELLED", JobState::Cancelled),
            ("CANCELLED by 123", JobState::Cancelled),
            ("CANCELLED+", JobState::Cancelled),
            ("TIMEOUT", JobState::Timeout),
            ("DEADLINE", JobState::Timeout),
            ("NODE_FAIL", JobState::Lost("NODE_FAIL".into())),
            ("PREEMPTED", JobState::Lost("PREEMPTED".into())),
            ("BOOT_FAIL", JobState::Lost("BOOT_FAIL".into())),
            ("REVOKED", JobState::Lost("REVOKED".into())),
        ];
        for (text, want) in table {
            assert_eq!(job_state(text, "None").unwrap(), want, "{text}");
        }
        for bad in ["", "RUNNING_LATE", "running", "PD"] {
            assert!(job_state(bad, "").is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn exit_codes_read_as_words() {
        assert_eq!(describe_exit_code("0:0"), "exit code 0");
        assert_eq!(describe_exit_code("2:0"), "exit code 2");
        assert_eq!(describe_exit_code("0:9"), "killed by signal 9");
    }

    #[test]
    fn option_changing_variables_are_cleared_and_the_rest_kept() {
        let mut env = BTreeMap::new();
        for (k, v) in [
            ("SBATCH_PARTITION", "bogus"),
            ("SBATCH_TIMELIMIT", "1"),
            ("SALLOC_ACCOUNT", "x"),
            ("SRUN_CPUS_PER_TASK", "7"),
            ("SLURM_CPUS_PER_TASK", "7"),
            ("SLURM_JOB_ID", "99"),
            ("SLURM_TIME_FORMAT", "relative"),
            ("SQUEUE_FORMAT", "%all"),
            ("SACCT_FORMAT", "jobid"),
            ("SLURM_CONF", "/etc/slurm/other.conf"),
            ("PATH", "/usr/bin"),
            ("HOME", "/home/me"),
            ("MY_SBATCH_NOTES", "kept: not a prefix"),
        ] {
            env.insert(OsString::from(k), OsString::from(v));
        }
        let kept: Vec<String> = clean_env(&env)
            .into_keys()
            .map(|k| k.into_string().unwrap())
            .collect();
        assert_eq!(kept, ["HOME", "MY_SBATCH_NOTES", "PATH", "SLURM_CONF"]);
    }

    /// Answers each command by its program name with scripted output; records every call.
    struct FakeSlurm {
        answers: Mutex<BTreeMap<&'static str, Vec<Output>>>,
        calls: Mutex<Vec<Invocation>>,
    }

    impl FakeSlurm {
        fn new(answers: Vec<(&'static str, Output)>) -> Arc<FakeSlurm> {
            let mut map: BTreeMap<&'static str, Vec<Output>> = BTreeMap::new();
            for (p, o) in answers {
                map.entry(p).or_default().push(o);
            }
            Arc::new(FakeSlurm {
                answers: Mutex::new(map),
                calls: Mutex::new(Vec::new()),
            })
        }
        fn programs(&self) -> Vec<String> {
            self.calls
                .lock()
                .unwrap()
                .iter()
                .map(|i| i.program.clone())
                .collect()
        }
    }

    impl CommandRunner for FakeSlurm {
        fn run(&self, inv: &Invocation) -> Result<Output, SchedError> {
            self.calls.lock().unwrap().push(inv.clone());
            let mut a = self.answers.lock().unwrap();
            let q = a
                .get_mut(inv.program.as_str())
                .expect("an answer for this program");
            Ok(if q.len() > 1 {
                q.remove(0)
            } else {
                q[0].clone()
            })
        }
    }

    fn out(stdout: &str) -> Output {
        Output {
            code: Some(0),
            stdout: stdout.into(),
            stderr: String::new(),
        }
    }

    fn ids(n: u32) -> Vec<JobId> {
        (1..=n).map(|i| JobId(i.to_string())).collect()
    }

    #[test]
    fn a_poll_is_one_squeue_for_any_number_of_live_jobs() {
        for n in [1, 100, 1000] {
            let listing: String = (1..=n).map(|i| format!("{i} RUNNING None\n")).collect();
            let fake = FakeSlurm::new(vec![("squeue", out(&listing))]);
            let b = SlurmBackend::with_runner(fake.clone(), RetryPolicy::immediate(1));
            let states = b.poll(&ids(n)).unwrap();
            assert_eq!(states.len(), n as usize);
            assert!(states.values().all(|s| *s == JobState::Running));
            assert_eq!(fake.programs(), ["squeue"], "{n} jobs");
        }
    }

    #[test]
    fn jobs_squeue_forgot_are_asked_of_sacct_in_one_call() {
        let fake = FakeSlurm::new(vec![
            ("squeue", out("1 RUNNING None\n")),
            (
                "sacct",
                out("2|COMPLETED|0:0|00:00:05\n3|TIMEOUT|0:0|00:01:00\n"),
            ),
        ]);
        let b = SlurmBackend::with_runner(fake.clone(), RetryPolicy::immediate(1));
        let states = b.poll(&ids(4)).unwrap();
        assert_eq!(states[&JobId("1".into())], JobState::Running);
        assert_eq!(states[&JobId("2".into())], JobState::Completed);
        assert_eq!(states[&JobId("3".into())], JobState::Timeout);
        assert_eq!(states[&JobId("4".into())], JobState::Unknown);
        assert_eq!(fake.programs(), ["squeue", "sacct"]);
        let calls = fake.calls.lock().unwrap();
        assert_eq!(calls[0].args, ["--me", "-t", "all", "-h", "-o", "%i %T %r"]);
        assert_eq!(
            calls[1].args,
            [
                "-X",
                "-n",
                "-P",
                "-j",
                "2,3,4",
                "-o",
                "JobID,State,ExitCode,Elapsed"
            ]
        );
    }

    #[test]
    fn without_accounting_sacct_is_asked_once_and_forgotten_jobs_are_unknown() {
        let fake = FakeSlurm::new(vec![
            ("squeue", out("")),
            (
                "sacct",
                Output {
                    code: Some(1),
                    stdout: String::new(),
                    stderr: "Slurm accounting storage is disabled\n".into(),
                },
            ),
        ]);
        let b = SlurmBackend::with_runner(fake.clone(), RetryPolicy::immediate(3));
        for _ in 0..3 {
            let states = b.poll(&ids(5)).unwrap();
            assert!(states.values().all(|s| *s == JobState::Unknown));
        }
        assert_eq!(fake.programs(), ["squeue", "sacct", "squeue", "squeue"]);
    }

    #[test]
    fn an_unknown_state_of_a_tracked_job_is_an_error_but_other_jobs_do_not_matter() {
        let fake = FakeSlurm::new(vec![("squeue", out("1 WEIRD None\n2 RUNNING None\n"))]);
        let b = SlurmBackend::with_runner(fake, RetryPolicy::immediate(1));
        assert!(b.poll(&[JobId("2".into())]).is_ok());
        assert!(matches!(
            b.poll(&[JobId("1".into())]),
            Err(SchedError::Parse { .. })
        ));
    }

    #[test]
    fn submit_writes_the_script_clears_the_environment_and_records_the_id() {
        let tmp = tempfile::tempdir().unwrap();
        let mut job = sample_job();
        job.dir = tmp.path().join("jobs/og-e1-b003");
        let fake = FakeSlurm::new(vec![("sbatch", out("4242;cluster\n"))]);
        let mut env = BTreeMap::new();
        env.insert(OsString::from("SBATCH_PARTITION"), OsString::from("bogus"));
        env.insert(OsString::from("PATH"), OsString::from("/usr/bin"));
        let b =
            SlurmBackend::with_runner(fake.clone(), RetryPolicy::immediate(1)).with_base_env(env);
        assert_eq!(b.submit(&job).unwrap(), JobId("4242".into()));
        let script = std::fs::read_to_string(job.dir.join("job.sh")).unwrap();
        assert_eq!(script, render_script(&job).unwrap());
        assert_eq!(
            std::fs::read_to_string(job.dir.join("job-id")).unwrap(),
            "4242\n"
        );
        let calls = fake.calls.lock().unwrap();
        assert_eq!(calls[0].args[0], "--parsable");
        assert_eq!(calls[0].cwd.as_deref(), Some(job.dir.as_path()));
        let env = calls[0].env.as_ref().unwrap();
        assert!(env.contains_key(&OsString::from("PATH")));
        assert!(!env.contains_key(&OsString::from("SBATCH_PARTITION")));
    }

    #[test]
    fn a_submission_that_timed_out_is_found_by_name_instead_of_resubmitted() {
        let tmp = tempfile::tempdir().unwrap();
        let mut job = sample_job();
        job.dir = tmp.path().join("jobs/og-e1-b003");
        let fake = FakeSlurm::new(vec![
            (
                "sbatch",
                Output {
                    code: Some(1),
                    stdout: String::new(),
                    stderr: "sbatch: error: Batch job submission failed: Socket timed out on send/recv operation".into(),
                },
            ),
            ("squeue", out("17 other-job\n18 og-e1-b003\n")),
        ]);
        let b = SlurmBackend::with_runner(fake.clone(), RetryPolicy::immediate(3));
        assert_eq!(b.submit(&job).unwrap(), JobId("18".into()));
        assert_eq!(fake.programs(), ["sbatch", "squeue"]);
    }

    /// A submission whose answer was lost, while a leftover job of the same name (an
    /// earlier experiment's, say) is still listed — after it, as `squeue` may print them.
    #[test]
    fn a_lost_submission_adopts_the_newest_job_of_its_name_not_a_leftover() {
        let tmp = tempfile::tempdir().unwrap();
        let mut job = sample_job();
        job.dir = tmp.path().join("jobs/og-e1-b003");
        let lost = Output {
            code: Some(1),
            stdout: String::new(),
            stderr: "sbatch: error: Batch job submission failed: Socket timed out on send/recv operation".into(),
        };
        let fake = FakeSlurm::new(vec![
            ("sbatch", lost),
            (
                "squeue",
                out("18 og-e1-b003
3_[1-2] og-e1-b003
12 og-e1-b003
"),
            ),
        ]);
        let b = SlurmBackend::with_runner(fake.clone(), RetryPolicy::immediate(3));
        // Planted bug "last listed wins" adopts 12; "array ids count" adopts 3_[1-2].
        assert_eq!(b.submit(&job).unwrap(), JobId("18".into()));
        assert_eq!(
            std::fs::read_to_string(job.dir.join("job-id")).unwrap(),
            "18\n"
        );
        assert_eq!(fake.programs(), ["sbatch", "squeue"], "submitted once");
    }

    #[test]
    fn find_by_name_picks_the_newest_job_of_a_name() {
        let fake = FakeSlurm::new(vec![(
            "squeue",
            out("7 og-e1-b001\n12 og-e1-b002\n9 og-e1-b001\nxx\n"),
        )]);
        let b = SlurmBackend::with_runner(fake.clone(), RetryPolicy::immediate(1));
        // A line without a name is a parse error, not silently skipped.
        assert!(b.find_by_name(&["og-e1-b001".into()]).is_err());
        let fake = FakeSlurm::new(vec![(
            "squeue",
            out("7 og-e1-b001\n12 og-e1-b002\n9 og-e1-b001\n"),
        )]);
        let b = SlurmBackend::with_runner(fake.clone(), RetryPolicy::immediate(1));
        let found = b
            .find_by_name(&["og-e1-b001".into(), "og-e1-b009".into()])
            .unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(found["og-e1-b001"], JobId("9".into()));
        assert_eq!(
            fake.calls.lock().unwrap()[0].args,
            ["--me", "-t", "all", "-h", "-o", "%i %j"]
        );
    }

    #[test]
    fn cancelling_ended_jobs_is_not_an_error() {
        let fake = FakeSlurm::new(vec![(
            "scancel",
            Output {
                code: Some(1),
                stdout: String::new(),
                stderr: "scancel: error: Kill job error on job id 5: Job/step already completing or completed\n".into(),
            },
        )]);
        let b = SlurmBackend::with_runner(fake.clone(), RetryPolicy::immediate(1));
        b.cancel(&[JobId("5".into())]).unwrap();
        let fake = FakeSlurm::new(vec![(
            "scancel",
            Output {
                code: Some(1),
                stdout: String::new(),
                stderr: "scancel: error: Unable to contact slurm controller\n".into(),
            },
        )]);
        let b = SlurmBackend::with_runner(fake.clone(), RetryPolicy::immediate(2));
        assert!(b.cancel(&[JobId("5".into())]).is_err());
        assert_eq!(fake.programs().len(), 2, "a transient failure is retried");
        assert!(b.cancel(&[]).is_ok());
    }
}
