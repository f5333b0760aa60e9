//! The Flux backend: a pure `render_script` (`# flux:` directives counting slots, then one
//! `"$OPTGATE_BIN" exec-run RUN_DIR -- flux run …` line per run counting tasks), F58 job-id
//! decoding, pure parsers of `flux batch` and `flux jobs` output, and [`FluxBackend`].
//!
//! Job ids are kept as decimal integers (`flux jobs -o '{id.dec}'` prints those; `flux
//! batch` prints F58, decoded here). Formats follow SCHEDULERS.md; Flux itself cannot be
//! installed here, so the end-to-end path is exercised against `schedulers/flux/fake-flux`.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::sync::Arc;

use crate::backend::{JobId, JobRun, JobSpec, JobState, SchedError, Scheduler};
use crate::batch::{
    JOB_ID_FILE, JOB_SCRIPT, check_common, check_job_dir, limit_seconds, render_body,
};
use crate::command::{CommandRunner, Invocation, RetryPolicy, SystemRunner, run_checked};
use crate::manifest::write_atomic;
use crate::shell::join;

/// The F58 alphabet (RFC 19, FLUID): base 58 without `0`, `O`, `I` and `l`.
const F58_ALPHABET: &[u8; 58] = b"123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";

/// Decodes an F58 job id: `ƒ` (U+0192) or ASCII `f`, then base-58 digits, most significant
/// first. `None` for anything else, or a value beyond 64 bits.
pub fn f58_decode(text: &str) -> Option<u64> {
    let digits = text.strip_prefix('ƒ').or_else(|| text.strip_prefix('f'))?;
    if digits.is_empty() {
        return None;
    }
    digits.bytes().try_fold(0u64, |n, c| {
        let d = F58_ALPHABET.iter().position(|&a| a == c)? as u64;
        n.checked_mul(58)?.checked_add(d)
    })
}

/// Encodes a job id as F58 (`ƒ…`, or `f…` when `ascii`), as `flux batch` prints it.
pub fn f58_encode(mut id: u64, ascii: bool) -> String {
    let mut digits = Vec::new();
    loop {
        digits.push(F58_ALPHABET[(id % 58) as usize] as char);
        id /= 58;
        if id == 0 {
            break;
        }
    }
    let mut s = String::from(if ascii { "f" } else { "ƒ" });
    s.extend(digits.iter().rev());
    s
}

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
    let line = stdout
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .unwrap_or("");
    parse_job_id(line).map_err(|_| SchedError::Parse {
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
    let mut w: Vec<String> = vec![
        "flux".into(),
        "run".into(),
        "-N".into(),
        run.nodes.to_string(),
        "-n".into(),
        (run.nodes * run.tasks_per_node).to_string(),
        "-c".into(),
        run.cpus_per_task.to_string(),
    ];
    if run.gpus_per_task > 0 {
        w.push("-g".into());
        w.push(run.gpus_per_task.to_string());
    }
    w.extend(run.launcher_args.iter().cloned());
    w
}

/// The batch script of a job: the allocation in slots (one slot per task of the largest
/// arm). Fails on values a directive line cannot carry.
pub fn render_script(job: &JobSpec) -> Result<String, SchedError> {
    check_common(job, &[])?;
    check_job_dir(&job.dir)?;
    let mut d: Vec<String> = vec![
        format!("--job-name={}", job.name),
        format!("--nodes={}", job.nodes),
        format!("--nslots={}", job.nodes * job.tasks_per_node),
        format!("--cores-per-slot={}", job.cpus_per_task),
    ];
    if job.gpus_per_task > 0 {
        d.push(format!("--gpus-per-slot={}", job.gpus_per_task));
    }
    d.push(format!(
        "--time-limit={}",
        format_time_limit(job.time_limit)?
    ));
    if let Some(q) = &job.queue {
        d.push(format!("--queue={q}"));
    }
    if let Some(a) = &job.account {
        d.push(format!("--bank={a}"));
    }
    if job.exclusive {
        d.push("--exclusive".into());
    }
    // Relative to the job's working directory, its job directory: submit() runs from
    // there, so a job directory of any name works (directive lines cannot be quoted).
    d.push("--output=flux-{{id}}.out".into());
    d.push("--error=flux-{{id}}.err".into());
    d.extend(job.extra_directives.iter().cloned());
    // Directives must come before any other non-blank line.
    let mut s = String::from("#!/bin/bash\n");
    for line in d {
        s.push_str("# flux: ");
        s.push_str(&line);
        s.push('\n');
    }
    s.push_str(&render_body(job, "Flux", &|run| join(flux_run_words(run))));
    Ok(s)
}

/// One line of `flux jobs -n -o '{id.dec} {state} {result} {returncode}'`; result and
/// return code are empty while the job is active.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FluxJobRow {
    pub id: String,
    pub state: String,
    pub result: String,
    pub returncode: String,
}

pub const JOBS_STATE_FORMAT: &str = "{id.dec} {state} {result} {returncode}";
pub const JOBS_NAME_FORMAT: &str = "{id.dec} {name}";

pub fn parse_flux_jobs(stdout: &str) -> Result<Vec<FluxJobRow>, SchedError> {
    let mut rows = Vec::new();
    for line in stdout.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 2 || f.len() > 4 || !f[0].bytes().all(|b| b.is_ascii_digit()) {
            return Err(SchedError::Parse {
                what: "a `flux jobs` line (id.dec, state, result, returncode)",
                text: line.to_string(),
            });
        }
        rows.push(FluxJobRow {
            id: f[0].to_string(),
            state: f[1].to_string(),
            result: f.get(2).unwrap_or(&"").to_string(),
            returncode: f.get(3).unwrap_or(&"").to_string(),
        });
    }
    Ok(rows)
}

/// Parses `flux jobs -n -o '{id.dec} {name}'`.
pub fn parse_flux_job_names(stdout: &str) -> Result<Vec<(String, String)>, SchedError> {
    stdout
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|line| match line.split_once(' ') {
            Some((id, name)) => Ok((id.to_string(), name.trim().to_string())),
            None => Err(SchedError::Parse {
                what: "a `flux jobs` line (id.dec, name)",
                text: line.to_string(),
            }),
        })
        .collect()
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
            _ => only = false,
        }
    }
    (ids, only)
}

/// A return code as words: negative numbers are signals (`-128`: cancelled before start).
pub fn describe_returncode(rc: &str) -> String {
    match rc.parse::<i64>() {
        Ok(-128) => "cancelled before it started".into(),
        Ok(n) if n < 0 => format!("killed by signal {}", -n),
        Ok(n) => format!("exit code {n}"),
        Err(_) if rc.is_empty() => "no return code".into(),
        Err(_) => format!("return code {rc}"),
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
        "INACTIVE" => match row.result.as_str() {
            "COMPLETED" => JobState::Completed,
            "FAILED" => JobState::Failed(describe_returncode(&row.returncode)),
            "CANCELED" | "CANCELLED" => JobState::Cancelled,
            "TIMEOUT" => JobState::Timeout,
            _ => return Err(bad("a Flux job result")),
        },
        _ => return Err(bad("a Flux job state")),
    })
}

/// The Flux backend. Blocking; the daemon calls it from a blocking task.
pub struct FluxBackend {
    runner: Arc<dyn CommandRunner>,
    retry: RetryPolicy,
    base_env: BTreeMap<OsString, OsString>,
}

impl Default for FluxBackend {
    fn default() -> Self {
        FluxBackend::new()
    }
}

impl FluxBackend {
    pub fn new() -> FluxBackend {
        FluxBackend::with_runner(Arc::new(SystemRunner::default()), RetryPolicy::default())
    }

    pub fn with_runner(runner: Arc<dyn CommandRunner>, retry: RetryPolicy) -> FluxBackend {
        FluxBackend {
            runner,
            retry,
            base_env: std::env::vars_os().collect(),
        }
    }

    /// Replaces the environment the commands run with (tests put a stand-in on `PATH`).
    pub fn with_base_env(mut self, env: BTreeMap<OsString, OsString>) -> FluxBackend {
        self.base_env = env;
        self
    }

    fn inv(&self, args: Vec<String>) -> Invocation {
        Invocation::new("flux", args).env(self.base_env.clone())
    }

    fn find_once(&self, names: &[String]) -> Result<BTreeMap<String, JobId>, SchedError> {
        let wanted: BTreeSet<&str> = names.iter().map(String::as_str).collect();
        let inv = self.inv(vec![
            "jobs".into(),
            "-a".into(),
            "-n".into(),
            "-c".into(),
            "0".into(),
            "-o".into(),
            JOBS_NAME_FORMAT.into(),
        ]);
        let out = run_checked(self.runner.as_ref(), &self.retry, &inv)?;
        let mut found: BTreeMap<String, JobId> = BTreeMap::new();
        for (id, name) in parse_flux_job_names(&out.stdout)? {
            if wanted.contains(name.as_str()) {
                // Flux ids grow with submission time: the highest is the newest.
                let newer = found
                    .get(&name)
                    .is_none_or(|old| id.parse::<u64>().ok() > old.0.parse::<u64>().ok());
                if newer {
                    found.insert(name, JobId(id));
                }
            }
        }
        Ok(found)
    }
}

impl Scheduler for FluxBackend {
    fn kind(&self) -> &'static str {
        "flux"
    }

    fn submit(&self, job: &JobSpec) -> Result<JobId, SchedError> {
        let script = render_script(job)?;
        std::fs::create_dir_all(&job.dir).map_err(|source| SchedError::Io {
            op: "create job directory",
            path: job.dir.clone(),
            source,
        })?;
        let path = job.dir.join(JOB_SCRIPT);
        write_atomic(&path, script.as_bytes()).map_err(|source| SchedError::Io {
            op: "write",
            path: path.clone(),
            source,
        })?;
        let inv = self
            .inv(vec!["batch".into(), path.display().to_string()])
            .cwd(&job.dir);
        let mut attempt = 0;
        let id = self.retry.run("flux batch", || {
            attempt += 1;
            if attempt > 1
                && let Some(id) = self
                    .find_once(std::slice::from_ref(&job.name))?
                    .remove(&job.name)
            {
                return Ok(id);
            }
            parse_flux_batch(&self.runner.run(&inv)?.check(&inv)?.stdout)
        })?;
        let id_path = job.dir.join(JOB_ID_FILE);
        write_atomic(&id_path, format!("{id}\n").as_bytes()).map_err(|source| SchedError::Io {
            op: "write",
            path: id_path.clone(),
            source,
        })?;
        tracing::info!(job = %job.name, id = %id, "submitted to Flux");
        Ok(id)
    }

    fn poll(&self, ids: &[JobId]) -> Result<BTreeMap<JobId, JobState>, SchedError> {
        let mut states = BTreeMap::new();
        if ids.is_empty() {
            return Ok(states);
        }
        let mut args: Vec<String> = vec![
            "jobs".into(),
            "-a".into(),
            "-n".into(),
            "-c".into(),
            "0".into(),
            "-o".into(),
            JOBS_STATE_FORMAT.into(),
        ];
        args.extend(ids.iter().map(|i| i.0.clone()));
        let inv = self.inv(args);
        let out = self.retry.run("flux jobs", || {
            let out = self.runner.run(&inv)?;
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
        if names.is_empty() {
            return Ok(BTreeMap::new());
        }
        self.find_once(names)
    }

    fn cancel(&self, ids: &[JobId]) -> Result<(), SchedError> {
        if ids.is_empty() {
            return Ok(());
        }
        let mut args = vec!["cancel".to_string()];
        args.extend(ids.iter().map(|i| i.0.clone()));
        let inv = self.inv(args);
        self.retry.run("flux cancel", || {
            let out = self.runner.run(&inv)?;
            // A job that already ended cannot be cancelled, and need not be.
            let lines: Vec<&str> = out
                .stderr
                .lines()
                .filter(|l| !l.trim().is_empty())
                .collect();
            let benign = !lines.is_empty()
                && lines
                    .iter()
                    .all(|l| l.contains("inactive") || l.contains("unknown"));
            if out.success() || benign {
                Ok(())
            } else {
                Err(out.into_error(&inv))
            }
        })
    }
}
