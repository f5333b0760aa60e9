//! The Flux backend: a pure `render_script` (`# flux:` directives counting slots, then one
//! `"$OPTGATE_BIN" exec-run RUN_DIR --attempt N -- flux run …` line per run counting tasks), F58 job-id
//! decoding, pure parsers of `flux batch` and `flux jobs` output, and [`FluxBackend`].
//!
//! Job ids are kept as decimal integers (`flux jobs -o '{id.dec}'` prints those; `flux
//! batch` prints F58, decoded here). Formats follow docs/SCHEDULERS.md and the output of real
//! Flux 0.88.0 quoted in the tests; `tests/cluster_flux/backend.rs` runs the backend end to end against
//! the one-node instance of `schedulers/flux/setup-one-node.sh`.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::sync::Arc;

use optgate_experiment::SchedulerKind;

use crate::backend::{JobId, JobRun, JobSpec, JobState, SchedError, Scheduler};
use crate::batch::limit_seconds;
use crate::batch_client::{BatchClient, NameQuery, Submission};
use crate::command::{CommandRunner, Invocation, RetryPolicy};
use crate::directive::{self, Carries, Dialect, last_line, launch_shape};
use crate::lookup::{NamedJob, parse_name_listing};

pub use optgate_wrapper::job_env::{f58_decode, f58_encode};

/// A job id as Flux may print it (F58 either prefix, or decimal) → its decimal form.
pub fn parse_job_id(text: &str) -> Result<JobId, SchedError> {
    let t = text.trim();
    let n = if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
        t.parse::<u64>().ok()
    } else {
        f58_decode(t)
    };
    n.map(|n| JobId(n.to_string()))
        .ok_or_else(|| SchedError::Parse {
            what: "a Flux job id",
            text: text.to_string(),
        })
}

/// `flux batch` prints the new job's id (F58) on stdout.
pub fn parse_flux_batch(stdout: &str) -> Result<JobId, SchedError> {
    parse_job_id(last_line(stdout)).map_err(|_| SchedError::Parse {
        what: "a job id from `flux batch`",
        text: stdout.to_string(),
    })
}

/// Flux's time-limit form (Flux Standard Duration): `30s`, `35m`, `2h`, `1d`.
pub fn format_time_limit(limit: std::time::Duration) -> Result<String, SchedError> {
    let s = limit_seconds(limit)?;
    Ok(if s % 86_400 == 0 {
        format!("{}d", s / 86_400)
    } else if s % 3_600 == 0 {
        format!("{}h", s / 3_600)
    } else if s % 60 == 0 {
        format!("{}m", s / 60)
    } else {
        format!("{s}s")
    })
}

/// The `flux run` words of one run: its own shape in tasks, then the arm's extra
/// arguments. The environment goes along by default.
pub fn flux_run_words(run: &JobRun) -> Vec<String> {
    let mut w: Vec<String> = vec!["flux".into(), "run".into()];
    w.extend(launch_shape(run));
    if run.gpus_per_task > 0 {
        w.push("-g".into());
        w.push(run.gpus_per_task.to_string());
    }
    w.extend(run.launcher_args.iter().cloned());
    w
}

pub use crate::directive::per_node_need;

/// What each part of a job renders to in a `# flux:` line, in the order written: the
/// allocation as one slot per node holding what the largest arm needs there
/// ([`per_node_need`]); each run's `flux run` then asks for its own shape in tasks.
pub const FLUX_BATCH: Dialect = Dialect {
    scheduler: "Flux",
    prefix: "# flux: ",
    time_limit: format_time_limit,
    launcher: |run| Ok(flux_run_words(run)),
    directives: &[
        ("--job-name", Carries::JobName),
        ("--nodes", Carries::Nodes),
        ("--nslots", Carries::Nodes),
        ("--cores-per-slot", Carries::CoresPerNode),
        ("--gpus-per-slot", Carries::GpusPerNode),
        ("--time-limit", Carries::TimeLimit),
        ("--queue", Carries::Queue),
        ("--bank", Carries::Account),
        ("--exclusive", Carries::Exclusive),
        ("--output", Carries::Fixed("flux-{{id}}.out")),
        ("--error", Carries::Fixed("flux-{{id}}.err")),
    ],
};

/// The batch script of a job (see [`FLUX_BATCH`]). Fails on values a directive line cannot
/// carry.
pub fn render_script(job: &JobSpec) -> Result<String, SchedError> {
    directive::render_script(&FLUX_BATCH, job)
}

/// One line of `flux jobs -n -o '{id.dec} {state} {result} {returncode}'`; result and
/// return code are empty while the job is active.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FluxJobRow {
    pub id: String,
    pub state: String,
    pub result: String,
    pub returncode: String,
    /// `{exception.type}`: why Flux ended the job when it did (`alloc`, `timeout`,
    /// `cancel`, `node-failure`, …), empty when no exception was raised.
    pub exception_type: String,
    /// `{exception.note}`: Flux's words for the exception (may contain spaces).
    pub exception_note: String,
}

/// Fields separated by `|`: the result and return code are empty while a job is active,
/// and the exception note has spaces, so whitespace cannot delimit them.
pub const JOBS_STATE_FORMAT: &str =
    "{id.dec}|{state}|{result}|{returncode}|{exception.type}|{exception.note}";
pub const JOBS_NAME_FORMAT: &str = "{id.dec} {name}";

pub fn parse_flux_jobs(stdout: &str) -> Result<Vec<FluxJobRow>, SchedError> {
    let mut rows = Vec::new();
    for line in stdout.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let f: Vec<&str> = line.splitn(6, '|').map(str::trim).collect();
        if f.len() != 6 || f[0].is_empty() || !f[0].bytes().all(|b| b.is_ascii_digit()) {
            return Err(SchedError::Parse {
                what: "a `flux jobs` line (id.dec|state|result|returncode|exception.type|exception.note)",
                text: line.to_string(),
            });
        }
        rows.push(FluxJobRow {
            id: f[0].to_string(),
            state: f[1].to_string(),
            result: f[2].to_string(),
            returncode: f[3].to_string(),
            exception_type: f[4].to_string(),
            exception_note: f[5].to_string(),
        });
    }
    Ok(rows)
}

/// Parses `flux jobs -n -o '{id.dec} {name}'` (see [`crate::lookup::parse_name_listing`]).
pub fn parse_flux_job_names(stdout: &str) -> Result<Vec<NamedJob>, SchedError> {
    parse_name_listing(stdout, "a `flux jobs` line (id.dec, name)")
}

/// Whether a line `flux cancel` printed says the job had already ended (or is unknown to
/// the instance): cancelling it is then not a failure.
pub fn says_job_ended(line: &str) -> bool {
    line.contains("inactive") || line.contains("unknown")
}

/// The ids `flux jobs` reported unknown on stderr (`JobID <id> unknown`), and whether
/// every stderr line was such a report.
pub fn unknown_ids(stderr: &str) -> (Vec<String>, bool) {
    let mut ids = Vec::new();
    let mut only = true;
    for line in stderr.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            [.., "JobID", id, "unknown"] => ids.push(id.to_string()),
            // Flux 0.88 warns when filtering options come with ids; optgate no longer passes
            // them, but an older caller or wrapper may: it says nothing about the jobs.
            _ if line.ends_with("WARNING: Filtering options ignored with jobid list") => {}
            _ => only = false,
        }
    }
    (ids, only)
}

/// A return code as words. Flux reports a task killed by signal N as 128 + N (`137`:
/// SIGKILL, `142`: SIGALRM at a time limit, `143`: SIGTERM), and a negative number only for
/// `-128` (cancelled before it started) and a signal the job shell itself took (`-9`).
pub fn describe_returncode(rc: &str) -> String {
    match rc.parse::<i64>() {
        Ok(-128) => "cancelled before it started".into(),
        Ok(n) if n < 0 => format!("killed by {}", signal_words(-n)),
        Ok(n) if (129..=128 + 64).contains(&n) => format!("killed by {}", signal_words(n - 128)),
        Ok(n) => format!("exit code {n}"),
        Err(_) if rc.is_empty() => "no return code".into(),
        Err(_) => format!("return code {rc}"),
    }
}

/// "signal 9 (SIGKILL)", or "signal N" for a number with no name here.
fn signal_words(n: i64) -> String {
    match i32::try_from(n)
        .ok()
        .and_then(|n| nix::sys::signal::Signal::try_from(n).ok())
    {
        Some(sig) => format!("signal {n} ({})", sig.as_str()),
        None => format!("signal {n}"),
    }
}

/// Maps a Flux state (and, when INACTIVE, its result) to a [`JobState`]. Unknown states
/// and results are errors, never "running".
pub fn job_state(row: &FluxJobRow) -> Result<JobState, SchedError> {
    let bad = |what| SchedError::Parse {
        what,
        text: format!("{} {} {}", row.state, row.result, row.returncode)
            .trim()
            .to_string(),
    };
    Ok(match row.state.as_str() {
        "NEW" | "DEPEND" | "PRIORITY" | "SCHED" => JobState::Pending,
        // CLEANUP: the job's tasks ended; epilogs run and the result follows.
        "RUN" | "CLEANUP" => JobState::Running,
        // The exception says why before the result does: an unsatisfiable request ends
        // FAILED 1 and a lost node FAILED 143, like an app's own failures would.
        "INACTIVE" if row.exception_type == "alloc" => JobState::Refused(exception_words(row)),
        "INACTIVE" if row.exception_type == "node-failure" => JobState::Lost(exception_words(row)),
        "INACTIVE" => match row.result.as_str() {
            "COMPLETED" => JobState::Completed,
            "FAILED" if row.exception_type.is_empty() || row.exception_type == "exec" => {
                JobState::Failed(describe_returncode(&row.returncode))
            }
            "FAILED" => JobState::Failed(format!(
                "{}; {}",
                describe_returncode(&row.returncode),
                exception_words(row)
            )),
            "CANCELED" | "CANCELLED" => JobState::Cancelled,
            "TIMEOUT" => JobState::Timeout,
            _ => return Err(bad("a Flux job result")),
        },
        _ => return Err(bad("a Flux job state")),
    })
}

/// "exception alloc: unsatisfiable request …": the exception as Flux names it.
fn exception_words(row: &FluxJobRow) -> String {
    let note = row.exception_note.trim();
    if note.is_empty() {
        format!("exception {}", row.exception_type)
    } else {
        format!("exception {}: {note}", row.exception_type)
    }
}

/// How a job's script goes to Flux: `flux batch job.sh`.
const FLUX_SUBMISSION: Submission = Submission {
    dialect: &FLUX_BATCH,
    what: "flux batch",
    program: "flux",
    args: &["batch"],
    parse_id: parse_flux_batch,
};

/// Flux commands run with the whole environment (tests put a stand-in on `PATH`).
fn keeps_every_variable(_: &str) -> bool {
    false
}

/// The Flux backend. Blocking; the daemon calls it from a blocking task.
pub struct FluxBackend {
    client: BatchClient,
}

impl Default for FluxBackend {
    fn default() -> Self {
        FluxBackend::new()
    }
}

impl FluxBackend {
    pub fn new() -> FluxBackend {
        FluxBackend {
            client: BatchClient::system(keeps_every_variable),
        }
    }

    pub fn with_runner(runner: Arc<dyn CommandRunner>, retry: RetryPolicy) -> FluxBackend {
        FluxBackend {
            client: BatchClient::new(runner, retry, keeps_every_variable),
        }
    }

    /// Replaces the environment the commands run with (tests put a stand-in on `PATH`).
    pub fn with_base_env(mut self, env: BTreeMap<OsString, OsString>) -> FluxBackend {
        self.client.base_env = env;
        self
    }

    fn inv(&self, args: Vec<String>) -> Invocation {
        self.client.inv("flux", args)
    }

    fn names(&self) -> NameQuery {
        let args = ["jobs", "-a", "-n", "-c", "0", "-o", JOBS_NAME_FORMAT];
        NameQuery {
            command: self.inv(args.map(String::from).to_vec()),
            parse: parse_flux_job_names,
        }
    }
}

impl Scheduler for FluxBackend {
    fn kind(&self) -> SchedulerKind {
        SchedulerKind::Flux
    }

    fn submit(&self, job: &JobSpec) -> Result<JobId, SchedError> {
        self.client.submit(job, &FLUX_SUBMISSION, &self.names())
    }

    fn poll(&self, ids: &[JobId]) -> Result<BTreeMap<JobId, JobState>, SchedError> {
        let mut states = BTreeMap::new();
        if ids.is_empty() {
            return Ok(states);
        }
        // No filtering options (`-a`, `-c`) with a list of ids: Flux ignores them then,
        // and says so on stderr.
        let mut args: Vec<String> = vec![
            "jobs".into(),
            "-n".into(),
            "-o".into(),
            JOBS_STATE_FORMAT.into(),
        ];
        args.extend(ids.iter().map(|i| i.0.clone()));
        let inv = self.inv(args);
        let c = &self.client;
        let out = c.retry.run_pausing("flux jobs", &|d| c.pause(d), || {
            let out = c.runner.run(&inv)?;
            // Unknown ids are reported on stderr; the exit status is 1 only when every id
            // is unknown, which is an answer, not a failure.
            let (_, only_unknown) = unknown_ids(&out.stderr);
            if out.success() || (out.code == Some(1) && only_unknown && !out.stderr.is_empty()) {
                Ok(out)
            } else {
                Err(out.into_error(&inv))
            }
        })?;
        let rows: BTreeMap<String, FluxJobRow> = parse_flux_jobs(&out.stdout)?
            .into_iter()
            .map(|r| (r.id.clone(), r))
            .collect();
        for id in ids {
            let state = match rows.get(&id.0) {
                Some(r) => job_state(r)?,
                None => JobState::Unknown,
            };
            states.insert(id.clone(), state);
        }
        Ok(states)
    }

    fn find_by_name(&self, names: &[String]) -> Result<BTreeMap<String, JobId>, SchedError> {
        self.client.find_by_name(names, &self.names())
    }

    fn cancel(&self, ids: &[JobId]) -> Result<(), SchedError> {
        let flux_cancel = ("flux cancel", "flux", &["cancel"][..]);
        self.client.cancel(flux_cancel, ids, says_job_ended)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{SAMPLE_BODY_PREAMBLE, assert_valid_bash, bare_sample_job, sample_job};
    use crate::command::Output;
    use std::sync::Mutex;
    use std::time::Duration;

    /// The sample block with Flux's own affinity option as the variant's extra argument.
    fn flux_job() -> JobSpec {
        let mut job = sample_job();
        job.runs[0].launcher_args = vec!["-o".into(), "cpu-affinity=per-task".into()];
        job
    }

    const DIRECTIVES: &str = r#"#!/bin/bash
# flux: --job-name=og-e1-b003
# flux: --nodes=1
# flux: --nslots=1
# flux: --cores-per-slot=96
# flux: --time-limit=35m
# flux: --queue=pdebug
# flux: --bank=myproj
# flux: --exclusive
# flux: --output=flux-{{id}}.out
# flux: --error=flux-{{id}}.err
# flux: --constraint=cpu
"#;
    const RUN_LINES: &str = r#"# Run 1 of 2: b003-omp6 (arm omp6).
"$OPTGATE_BIN" exec-run '/p/lustre/me/vpic'\''s run/runs/b003-omp6' --attempt 1 -- flux run -N 1 -n 16 -c 6 -o cpu-affinity=per-task; og_after $?
# Run 2 of 2: b003-baseline (arm baseline).
"$OPTGATE_BIN" exec-run '/p/lustre/me/vpic'\''s run/runs/b003-baseline' --attempt 1 -- flux run -N 1 -n 16 -c 1; og_after $?
exit "$og_status"
"#;

    /// The whole script of the sample job, to the byte.
    fn expected() -> String {
        let opening =
            "# optgate Flux job og-e1-b003: 2 run(s), back to back, in the recorded order.\n";
        format!("{DIRECTIVES}{opening}{SAMPLE_BODY_PREAMBLE}{RUN_LINES}")
    }

    #[test]
    fn the_script_is_exactly_this() {
        assert_eq!(render_script(&flux_job()).unwrap(), expected());
    }

    #[test]
    fn the_script_is_valid_bash() {
        assert_valid_bash(&render_script(&flux_job()).unwrap());
    }

    #[test]
    fn gpus_and_absent_options() {
        let mut job = bare_sample_job(1);
        job.nodes = 2;
        job.runs[0].nodes = 2;
        job.time_limit = Duration::from_secs(90);
        let s = render_script(&job).unwrap();
        let d: Vec<&str> = s.lines().filter(|l| l.starts_with("# flux:")).collect();
        assert_eq!(
            d,
            [
                "# flux: --job-name=og-e1-b003",
                "# flux: --nodes=2",
                "# flux: --nslots=2",
                "# flux: --cores-per-slot=96",
                "# flux: --gpus-per-slot=16",
                "# flux: --time-limit=90s",
                "# flux: --output=flux-{{id}}.out",
                "# flux: --error=flux-{{id}}.err",
            ]
        );
        assert!(s.contains(" -- flux run -N 2 -n 32 -c 6 -g 1; og_after $?\n"));
    }

    /// A 2-task × 1-core baseline and a 1-task × 2-core variant each need 2 cores
    /// on the node; the allocation used to ask for max(tasks) × max(cores) = 4, which a
    /// 2-core node refuses (exception `alloc`).
    #[test]
    fn the_allocation_holds_the_largest_arm_not_separate_maxima() {
        let mut job = flux_job();
        job.runs[0].tasks_per_node = 1;
        job.runs[0].cpus_per_task = 2;
        job.runs[1].tasks_per_node = 2;
        job.runs[1].cpus_per_task = 1;
        job.tasks_per_node = 2;
        job.cpus_per_task = 2;
        job.extra_directives.clear();
        let s = render_script(&job).unwrap();
        let d: Vec<&str> = s.lines().filter(|l| l.starts_with("# flux:")).collect();
        assert_eq!(
            d[1..4],
            [
                "# flux: --nodes=1",
                "# flux: --nslots=1",
                "# flux: --cores-per-slot=2"
            ]
        );
        // Each arm still launches its own shape inside the allocation.
        assert!(s.contains(" -- flux run -N 1 -n 1 -c 2 -o cpu-affinity=per-task; og_after"));
        assert!(s.contains(" -- flux run -N 1 -n 2 -c 1; og_after"));

        // GPUs the same way: 4 tasks × 1 GPU beside 1 task × 2 GPUs → 4 GPUs per node.
        job.runs[0].gpus_per_task = 2;
        job.runs[1].tasks_per_node = 4;
        job.runs[1].gpus_per_task = 1;
        job.gpus_per_task = 2;
        job.nodes = 2;
        job.runs[1].nodes = 2;
        let s = render_script(&job).unwrap();
        assert!(s.contains("# flux: --nodes=2\n# flux: --nslots=2\n# flux: --cores-per-slot=4\n# flux: --gpus-per-slot=4\n"), "{s}");
    }

    #[test]
    fn time_limits_in_flux_standard_duration() {
        for (secs, want) in [
            (30, "30s"),
            (90, "90s"),
            (60, "1m"),
            (35 * 60, "35m"),
            (2 * 3600, "2h"),
            (86_400, "1d"),
            (86_400 + 60, "1441m"),
        ] {
            assert_eq!(format_time_limit(Duration::from_secs(secs)).unwrap(), want);
        }
    }

    #[test]
    fn template_braces_and_spaces_cannot_reach_directives() {
        let mut job = flux_job();
        job.extra_directives = vec!["--setattr=x={{id}}".into()];
        // `{` is not shell syntax but it is harmless in a directive; spaces are not.
        assert!(render_script(&job).is_ok());
        job.extra_directives = vec!["--setattr=x=a b".into()];
        assert!(matches!(
            render_script(&job),
            Err(SchedError::Unrepresentable { .. })
        ));
    }

    /// The F58 pairs of flux-core's own unit test (src/common/libutil/test/fluid.c,
    /// `f58_tests` and `f58_alt_tests`), cross-checked by hand against RFC 19's algorithm
    /// (big-endian base 58 over the alphabet without 0, O, I, l).
    const F58_PAIRS: &[(u64, &str)] = &[
        (0, "ƒ1"),
        (1, "ƒ2"),
        (57, "ƒz"),
        (1234, "ƒNH"),
        (1888, "ƒZZ"),
        (3363, "ƒzz"),
        (3364, "ƒ211"),
        (4369, "ƒ2JL"),
        (65535, "ƒLUv"),
        (4294967295, "ƒ7YXq9G"),
        (633528662, "ƒxyzzy"),
        (6731191091817518, "ƒuZZybuNNy"),
        (18446744073709551614, "ƒjpXCZedGfVP"),
        (18446744073709551615, "ƒjpXCZedGfVQ"),
    ];

    #[test]
    fn f58_decodes_the_known_pairs_with_either_prefix() {
        for &(n, text) in F58_PAIRS {
            assert_eq!(f58_decode(text), Some(n), "{text}");
            let ascii = text.replacen('ƒ', "f", 1);
            assert_eq!(f58_decode(&ascii), Some(n), "{ascii}");
            assert_eq!(f58_encode(n, false), text);
            assert_eq!(f58_encode(n, true), ascii);
        }
        // Leading `1`s are leading zeros (flux-core accepts `f111` as 0).
        assert_eq!(f58_decode("f111"), Some(0));
        // The example id of docs/SCHEDULERS.md.
        assert_eq!(f58_decode("ƒM7Zq9AKHno"), Some(149394041430081536));
    }

    #[test]
    fn f58_refuses_what_flux_core_refuses() {
        // flux-core's invalid inputs: no prefix, bad prefix, letters outside the alphabet.
        for bad in [
            "1234", "aaa", "f", "flux", "f1230", "x1", "ƒ", "fO", "fI", "fl",
        ] {
            assert_eq!(f58_decode(bad), None, "{bad}");
        }
        // One past u64::MAX does not wrap around.
        assert_eq!(f58_decode("fjpXCZedGfVR"), None);
    }

    #[test]
    fn flux_batch_ids_become_decimal() {
        for (out, id) in [
            ("ƒM7Zq9AKHno\n", "149394041430081536"),
            ("fM7Zq9AKHno\n", "149394041430081536"),
            ("ƒ2JL\n", "4369"),
            ("4369\n", "4369"),
        ] {
            assert_eq!(parse_flux_batch(out).unwrap(), JobId(id.into()), "{out}");
        }
        assert!(parse_flux_batch("flux-batch: ERROR: 'x' is not a valid queue\n").is_err());
        assert!(parse_flux_batch("").is_err());
    }

    /// `flux jobs -a -n -c 0 -o '{id.dec} {state} {result} {returncode}'`: result and
    /// return code are empty while a job is active.
    #[test]
    fn flux_jobs_lines_parse_and_map() {
        // Lines as real Flux 0.88.0 printed them for `flux jobs -n -o JOBS_STATE_FORMAT`
        // on the one-node instance of schedulers/flux/setup-one-node.sh (ids shortened).
        let out = "\
1001|DEPEND||||\n\
1002|PRIORITY||||\n\
1003|SCHED||||\n\
1004|RUN||||\n\
1005|CLEANUP||||\n\
1006|INACTIVE|COMPLETED|0||\n\
1007|INACTIVE|FAILED|3||\n\
1008|INACTIVE|FAILED|137||\n\
1009|INACTIVE|CANCELED|-128|cancel|\n\
1010|INACTIVE|CANCELED|143|cancel|\n\
1011|INACTIVE|TIMEOUT|142|timeout|resource allocation expired\n\
1012|INACTIVE|FAILED|1|alloc|unsatisfiable request: need 1 node(s) with 8 cores each, only 0 eligible\n\
1013|INACTIVE|FAILED|143|node-failure|node died\n\
1014|INACTIVE|FAILED|-9||\n";
        let states: Vec<JobState> = parse_flux_jobs(out)
            .unwrap()
            .iter()
            .map(|r| job_state(r).unwrap())
            .collect();
        assert_eq!(
            states,
            [
                JobState::Pending,
                JobState::Pending,
                JobState::Pending,
                JobState::Running,
                JobState::Running,
                JobState::Completed,
                JobState::Failed("exit code 3".into()),
                JobState::Failed("killed by signal 9 (SIGKILL)".into()),
                JobState::Cancelled,
                JobState::Cancelled,
                JobState::Timeout,
                JobState::Refused(
                    "exception alloc: unsatisfiable request: need 1 node(s) with 8 cores \
                     each, only 0 eligible"
                        .into()
                ),
                JobState::Lost("exception node-failure: node died".into()),
                JobState::Failed("killed by signal 9 (SIGKILL)".into()),
            ]
        );
    }

    #[test]
    fn return_codes_read_as_signals_where_flux_means_signals() {
        for (rc, words) in [
            ("0", "exit code 0"),
            ("1", "exit code 1"),
            ("128", "exit code 128"),
            ("129", "killed by signal 1 (SIGHUP)"),
            ("137", "killed by signal 9 (SIGKILL)"),
            ("142", "killed by signal 14 (SIGALRM)"),
            ("143", "killed by signal 15 (SIGTERM)"),
            ("192", "killed by signal 64"),
            ("193", "exit code 193"),
            ("-128", "cancelled before it started"),
            ("-9", "killed by signal 9 (SIGKILL)"),
            ("", "no return code"),
        ] {
            assert_eq!(describe_returncode(rc), words, "{rc}");
        }
    }

    #[test]
    fn unknown_states_and_results_are_errors() {
        for line in [
            "1|RUNNING||||",
            "1|INACTIVE||||",
            "1|INACTIVE|WEIRD|0||",
            "1|run||||",
        ] {
            let rows = parse_flux_jobs(line).unwrap();
            assert!(job_state(&rows[0]).is_err(), "{line}");
        }
        for bad in [
            "ƒ2JL|RUN||||",
            "1",
            "1 INACTIVE FAILED 3",
            "|RUN||||",
            "1|RUN",
        ] {
            assert!(parse_flux_jobs(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn unknown_id_reports_are_recognised() {
        let (ids, only) = unknown_ids("JobID 123 unknown\nflux-jobs: JobID 456 unknown\n");
        assert_eq!(ids, ["123", "456"]);
        assert!(only);
        let (_, only) = unknown_ids("flux-jobs: ERROR: Unable to connect to Flux\n");
        assert!(!only);
        // Real Flux 0.88.0 with `-a -c 0` and an id list: the warning, then the reports.
        let (ids, only) = unknown_ids(
            "flux-jobs: WARNING: Filtering options ignored with jobid list\nJobID 1 unknown\nJobID 2 unknown\n",
        );
        assert_eq!(ids, ["1", "2"]);
        assert!(only);
    }

    struct Fake {
        answer: Output,
        calls: Mutex<Vec<Invocation>>,
    }

    impl CommandRunner for Fake {
        fn run(&self, inv: &Invocation) -> Result<Output, SchedError> {
            self.calls.lock().unwrap().push(inv.clone());
            Ok(self.answer.clone())
        }
    }

    fn fake(code: i32, stdout: &str, stderr: &str) -> Arc<Fake> {
        Arc::new(Fake {
            answer: Output {
                code: Some(code),
                stdout: stdout.into(),
                stderr: stderr.into(),
            },
            calls: Mutex::new(Vec::new()),
        })
    }

    #[test]
    fn a_poll_is_one_flux_jobs_call_for_any_number_of_jobs() {
        for n in [1u64, 100, 1000] {
            let listing: String = (1..=n).map(|i| format!("{i}|RUN||||\n")).collect();
            let f = fake(0, &listing, "");
            let b = FluxBackend::with_runner(f.clone(), RetryPolicy::immediate(1));
            let ids: Vec<JobId> = (1..=n).map(|i| JobId(i.to_string())).collect();
            let states = b.poll(&ids).unwrap();
            assert!(states.values().all(|s| *s == JobState::Running));
            let calls = f.calls.lock().unwrap();
            assert_eq!(calls.len(), 1, "{n} jobs");
            // No filtering options with ids (Flux would warn and ignore them).
            assert_eq!(&calls[0].args[..4], ["jobs", "-n", "-o", JOBS_STATE_FORMAT]);
            assert_eq!(calls[0].args.len(), 4 + n as usize);
        }
    }

    #[test]
    fn ids_flux_no_longer_knows_are_unknown_even_when_all_are() {
        let f = fake(1, "", "JobID 5 unknown\nJobID 6 unknown\n");
        let b = FluxBackend::with_runner(f, RetryPolicy::immediate(1));
        let states = b.poll(&[JobId("5".into()), JobId("6".into())]).unwrap();
        assert!(states.values().all(|s| *s == JobState::Unknown));

        let f = fake(0, "5|INACTIVE|COMPLETED|0||\n", "JobID 6 unknown\n");
        let b = FluxBackend::with_runner(f, RetryPolicy::immediate(1));
        let states = b.poll(&[JobId("5".into()), JobId("6".into())]).unwrap();
        assert_eq!(states[&JobId("5".into())], JobState::Completed);
        assert_eq!(states[&JobId("6".into())], JobState::Unknown);
    }

    /// What real Flux 0.88.0 prints with no broker at FLUX_URI (exit 1): every command fails
    /// at once and will keep failing, so nothing is retried — not the poll, not the
    /// submission, not the name lookup inside a submission's retry.
    const NO_BROKER: &str =
        "flux-jobs: ERROR: Unable to connect to Flux: broker socket /tmp/x/local-0 was not found\n";

    #[test]
    fn an_unreachable_broker_is_not_retried() {
        let f = fake(1, "", NO_BROKER);
        let b = FluxBackend::with_runner(f.clone(), RetryPolicy::immediate(5));
        let err = b.poll(&[JobId("5".into())]).unwrap_err();
        assert!(err.is_unreachable() && !err.is_transient(), "{err}");
        assert_eq!(f.calls.lock().unwrap().len(), 1, "retried");

        let tmp = tempfile::tempdir().unwrap();
        let mut job = flux_job();
        job.dir = tmp.path().join("jobs/og-e1-b003");
        let f = fake(1, "", &NO_BROKER.replace("flux-jobs", "flux-batch"));
        let b = FluxBackend::with_runner(f.clone(), RetryPolicy::immediate(5));
        let err = b.submit(&job).unwrap_err();
        assert!(err.is_unreachable(), "{err}");
        assert_eq!(f.calls.lock().unwrap().len(), 1, "retried");
        assert!(
            b.find_by_name(&[job.name.clone()])
                .unwrap_err()
                .is_unreachable()
        );

        // A `flux` that is not there at all is the same kind of trouble.
        let b = FluxBackend::new().with_base_env(
            [(OsString::from("PATH"), OsString::from("/nonexistent"))]
                .into_iter()
                .collect(),
        );
        let err = b.poll(&[JobId("5".into())]).unwrap_err();
        assert!(err.is_unreachable() && !err.is_transient(), "{err}");
    }

    #[test]
    fn submit_records_the_decimal_id() {
        let tmp = tempfile::tempdir().unwrap();
        let mut job = flux_job();
        job.dir = tmp.path().join("jobs/og-e1-b003");
        let f = fake(0, "ƒ2JL\n", "");
        let b = FluxBackend::with_runner(f.clone(), RetryPolicy::immediate(1));
        assert_eq!(b.submit(&job).unwrap(), JobId("4369".into()));
        assert_eq!(
            std::fs::read_to_string(job.dir.join("job-id")).unwrap(),
            "4369\n"
        );
        let calls = f.calls.lock().unwrap();
        assert_eq!(calls[0].args[0], "batch");
        assert_eq!(calls[0].cwd.as_deref(), Some(job.dir.as_path()));
    }

    /// What real Flux 0.88.0 prints (exit 1) for `flux cancel` of a job that already ended
    /// and of an id it never had.
    const CANCEL_ENDED: &str = "\
flux-cancel: ERROR: ƒ3fm7zgKh: job is inactive
flux-cancel: ERROR: ƒ3fdDtWF9: job is inactive
flux-cancel: ERROR: ƒ68GN: unknown job id
";

    #[test]
    fn cancelling_jobs_that_already_ended_is_not_an_error() {
        let f = fake(1, "", CANCEL_ENDED);
        let b = FluxBackend::with_runner(f.clone(), RetryPolicy::immediate(3));
        b.cancel(&[JobId("1".into()), JobId("2".into())]).unwrap();
        let calls = f.calls.lock().unwrap();
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].program, "flux");
        assert_eq!(calls[0].args, ["cancel", "1", "2"]);
        drop(calls);
        // Planted bug "any failure of flux cancel is fine" fails here: an unreachable
        // broker is an error, and not retried.
        let f = fake(1, "", &NO_BROKER.replace("flux-jobs", "flux-cancel"));
        let b = FluxBackend::with_runner(f.clone(), RetryPolicy::immediate(3));
        assert!(b.cancel(&[JobId("1".into())]).unwrap_err().is_unreachable());
        // One ended job beside a real error is still an error.
        let mixed = format!("{CANCEL_ENDED}flux-cancel: ERROR: Permission denied\n");
        let b = FluxBackend::with_runner(fake(1, "", &mixed), RetryPolicy::immediate(1));
        assert!(b.cancel(&[JobId("1".into())]).is_err());
        assert!(b.cancel(&[]).is_ok(), "no ids, no command");
    }

    #[test]
    fn find_by_name_reads_the_name_listing() {
        let f = fake(0, "10 og-e1-b001\n30 og-e1-b001\n20 og-e1-b002\n", "");
        let b = FluxBackend::with_runner(f, RetryPolicy::immediate(1));
        let found = b.find_by_name(&["og-e1-b001".into()]).unwrap();
        assert_eq!(found["og-e1-b001"], JobId("30".into()));
        assert_eq!(found.len(), 1);
    }
}
