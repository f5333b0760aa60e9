//! What the Slurm and Flux job scripts share: the checks on values that go into directive
//! lines (which no shell ever parses, so quoting cannot protect them), the time-limit
//! arithmetic, and the script body — the probe, then one `exec-run` line per run in the
//! job's recorded order. Pure functions; each backend supplies its directives and launcher.

use std::path::Path;
use std::time::Duration;

use crate::backend::{JobId, JobSpec, SchedError};
use crate::shell::quote;

/// The job script's file name inside the job's directory.
pub const JOB_SCRIPT: &str = "job.sh";
/// Where the job writes `optgate probe --json` (the compute node's facts).
pub const PROBE_FILE: &str = "probe.json";
/// Written after a successful submission: the scheduler's job id, one line.
pub const JOB_ID_FILE: &str = "job-id";

/// Exit status `optgate exec-run` uses when its run was interrupted (the job is being
/// stopped): the script must not start the next run on a dying allocation.
const EXEC_RUN_INTERRUPTED: i32 = 130;

fn unrepresentable(field: &str, value: &str, reason: &str) -> SchedError {
    SchedError::Unrepresentable {
        field: field.to_string(),
        value: value.to_string(),
        reason: reason.to_string(),
    }
}

/// Checks a value that goes into a directive line. Directives are read by `sbatch` or
/// `flux batch`, not by a shell: a quote, a space, a `#` or a backslash would be taken
/// by their own little parsers, so such values are rejected instead of mangled.
/// `also_forbidden` adds characters a backend gives a meaning of its own.
pub fn check_directive_value(
    field: &str,
    value: &str,
    also_forbidden: &[char],
) -> Result<(), SchedError> {
    if value.is_empty() {
        return Err(unrepresentable(field, value, "it is empty"));
    }
    if let Some(c) = value.chars().find(|c| {
        c.is_whitespace()
            || c.is_control()
            || matches!(c, '\'' | '"' | '`' | '\\' | '#' | '$')
            || also_forbidden.contains(c)
    }) {
        return Err(unrepresentable(
            field,
            value,
            &format!(
                "{} cannot be written into a scheduler directive line (no shell quotes those)",
                match c {
                    ' ' => "a space".to_string(),
                    '\t' => "a tab".to_string(),
                    '\n' | '\r' => "a line break".to_string(),
                    c => format!("`{}`", c.escape_debug()),
                }
            ),
        ));
    }
    Ok(())
}

/// Checks the job's directory. It never goes into a directive (output paths there are
/// relative to it: the backends submit from it), only into quoted script lines, so any
/// characters are fine; it must be absolute and valid UTF-8 for those lines to be exact.
pub fn check_job_dir(dir: &Path) -> Result<(), SchedError> {
    let Some(text) = dir.to_str() else {
        return Err(unrepresentable(
            "job directory",
            &dir.display().to_string(),
            "it is not valid UTF-8",
        ));
    };
    if !dir.is_absolute() {
        return Err(unrepresentable(
            "job directory",
            text,
            "it must be absolute (the job may start in another directory)",
        ));
    }
    Ok(())
}

/// Checks one `extra_directives` entry: a single option starting with `-`.
pub fn check_extra_directive(value: &str, also_forbidden: &[char]) -> Result<(), SchedError> {
    check_directive_value("extra directive", value, also_forbidden)?;
    if !value.starts_with('-') {
        return Err(unrepresentable(
            "extra directive",
            value,
            "it must be one option starting with `-`, e.g. `--constraint=cpu`",
        ));
    }
    Ok(())
}

/// Long options of `sbatch` (Slurm 22.05–24.x) an `extra_directives` entry may use.
#[rustfmt::skip]
pub const SBATCH_LONG_OPTIONS: &[&str] = &[
    "account", "acctg-freq", "array", "batch", "bb", "bbf", "begin", "chdir",
    "cluster-constraint", "clusters", "comment", "constraint", "container", "container-id",
    "contiguous", "core-spec", "cores-per-socket", "cpu-freq", "cpus-per-gpu", "cpus-per-task",
    "deadline", "delay-boot", "dependency", "distribution", "error", "exclude", "exclusive",
    "export", "export-file", "extra", "extra-node-info", "get-user-env", "gid", "gpu-bind",
    "gpu-freq", "gpus", "gpus-per-node", "gpus-per-socket", "gpus-per-task", "gres",
    "gres-flags", "hint", "hold", "ignore-pbs", "input", "job-name", "kill-on-invalid-dep",
    "licenses", "mail-type", "mail-user", "mcs-label", "mem", "mem-bind", "mem-per-cpu",
    "mem-per-gpu", "mincpus", "network", "nice", "no-kill", "no-requeue", "nodefile",
    "nodelist", "nodes", "ntasks", "ntasks-per-core", "ntasks-per-gpu", "ntasks-per-node",
    "ntasks-per-socket", "open-mode", "output", "overcommit", "oversubscribe", "partition",
    "power", "prefer", "priority", "profile", "propagate", "qos", "quiet", "reboot", "requeue",
    "reservation", "signal", "sockets-per-node", "spread-job", "switches", "test-only",
    "thread-spec", "threads-per-core", "time", "time-min", "tmp", "tres-bind", "tres-per-task",
    "uid", "use-min-nodes", "verbose", "wait", "wait-all-nodes", "wckey",
];
/// Short options of `sbatch` (`-C cpu` is written `-Ccpu` or `--constraint=cpu`).
pub const SBATCH_SHORT_OPTIONS: &str = "AaBbCcDdeFGHhiJkLMmNnOopQqSsTtVvWwx";

/// Long options `flux batch` of flux-core 0.88.0 accepts (read from its `--help` and
/// checked one by one against the real command).
#[rustfmt::skip]
pub const FLUX_BATCH_LONG_OPTIONS: &[&str] = &[
    "add-brokers", "add-file", "bank", "begin-time", "broker-opts", "conf", "cores-per-slot",
    "cwd", "dependency", "dump", "env", "env-file", "env-remove", "error", "exclusive", "flags",
    "gpus-per-slot", "input", "job-name", "label-io", "nodes", "nslots", "output", "queue",
    "requires", "resources-json", "resources-shape", "rlimit", "setattr", "setopt", "signal",
    "time-limit", "unbuffered", "urgency",
];
/// Short options of `flux batch`.
pub const FLUX_BATCH_SHORT_OPTIONS: &str = "BNSacgnoqtux";

/// Options of the other scheduler a person may reach for, and what to write instead.
const FLUX_INSTEAD: &[(&str, &str)] = &[
    (
        "constraint",
        "--requires=… (RFC 35 constraints, e.g. `--requires=host:node[1-4]`)",
    ),
    (
        "partition",
        "the experiment's `scheduler.queue` (Flux's `--queue`)",
    ),
    (
        "account",
        "the experiment's `scheduler.account` (Flux's `--bank`)",
    ),
    (
        "time",
        "the experiment's `scheduler.time_limit` (Flux's `--time-limit`)",
    ),
    ("ntasks", "the arms' `tasks_per_node` (Flux's `--nslots`)"),
    (
        "cpus-per-task",
        "the arms' `cpus_per_task` (Flux's `--cores-per-slot`)",
    ),
];
const SBATCH_INSTEAD: &[(&str, &str)] = &[
    ("requires", "--constraint=… (node features)"),
    (
        "bank",
        "the experiment's `scheduler.account` (Slurm's `--account`)",
    ),
    (
        "queue",
        "the experiment's `scheduler.queue` (Slurm's `--partition`)",
    ),
    (
        "time-limit",
        "the experiment's `scheduler.time_limit` (Slurm's `--time`)",
    ),
];

/// Why `directive` (one `extra_directives` entry) is not an option of the `kind` backend's
/// batch command, or `None` when it is one. Only the option's name is checked (up to `=`);
/// its value is the scheduler's business.
pub fn unknown_directive(
    kind: optgate_experiment::SchedulerKind,
    directive: &str,
) -> Option<String> {
    use optgate_experiment::SchedulerKind;
    let (command, long, short, instead): (&str, &[&str], &str, &[(&str, &str)]) = match kind {
        SchedulerKind::Slurm => (
            "sbatch",
            SBATCH_LONG_OPTIONS,
            SBATCH_SHORT_OPTIONS,
            SBATCH_INSTEAD,
        ),
        SchedulerKind::Flux => (
            "flux batch",
            FLUX_BATCH_LONG_OPTIONS,
            FLUX_BATCH_SHORT_OPTIONS,
            FLUX_INSTEAD,
        ),
        SchedulerKind::Local => return None,
    };
    let (option, known) = if let Some(rest) = directive.strip_prefix("--") {
        let name = rest.split('=').next().unwrap_or("");
        (format!("--{name}"), long.contains(&name))
    } else if let Some(c) = directive.strip_prefix('-').and_then(|r| r.chars().next()) {
        (format!("-{c}"), short.contains(c))
    } else {
        (directive.to_string(), false)
    };
    if known {
        return None;
    }
    let hint = instead
        .iter()
        .find(|(name, _)| option == format!("--{name}"))
        .map(|(_, use_this)| format!("; use {use_this} instead"))
        .unwrap_or_default();
    Some(format!(
        "`{option}` is not an option of `{command}`{hint}; the {kind} backend passes each \
         `extra_directives` entry to `{command}` as written, which would refuse the job"
    ))
}

/// Whole seconds, rounded up: a limit is never shortened. Zero is refused because both
/// schedulers read a zero limit as "no limit".
pub fn limit_seconds(limit: Duration) -> Result<u64, SchedError> {
    let secs = limit.as_secs() + u64::from(limit.subsec_nanos() > 0);
    if secs == 0 {
        return Err(unrepresentable(
            "time limit",
            "0",
            "a zero time limit means \"unlimited\" to the scheduler",
        ));
    }
    Ok(secs)
}

/// Checks the parts of a job that every backend writes into directives.
pub fn check_common(job: &JobSpec, also_forbidden: &[char]) -> Result<(), SchedError> {
    check_directive_value("job name", &job.name, also_forbidden)?;
    for (field, v) in [("queue", &job.queue), ("account", &job.account)] {
        if let Some(v) = v {
            check_directive_value(field, v, also_forbidden)?;
        }
    }
    for d in &job.extra_directives {
        check_extra_directive(d, also_forbidden)?;
    }
    for (field, n) in [
        ("nodes", job.nodes),
        ("tasks per node", job.tasks_per_node),
        ("cpus per task", job.cpus_per_task),
    ] {
        if n == 0 {
            return Err(unrepresentable(field, "0", "it must be at least 1"));
        }
    }
    if job.runs.is_empty() {
        return Err(unrepresentable("runs", "[]", "a job must run something"));
    }
    limit_seconds(job.time_limit)?;
    Ok(())
}

/// The script body after the directives: the optgate binary, the probe, one line per run
/// with its own launcher, and an exit status that says whether every run completed.
/// `launches` holds each run's launcher words (already quoted), in the order of `job.runs`,
/// e.g. `srun -N 1 -n 4 -c 6 --export=ALL`.
pub fn render_body(job: &JobSpec, backend: &str, launches: &[String]) -> String {
    let mut s = String::new();
    let n = job.runs.len();
    s.push_str(&format!(
        "# optgate {backend} job {}: {n} run(s), back to back, in the recorded order.\n",
        job.name
    ));
    s.push_str("# Generated by optgate; every value from the experiment file is quoted.\n");
    s.push_str(&format!(
        "OPTGATE_BIN={}\n",
        quote(&job.optgate_bin.display().to_string())
    ));
    s.push_str(
        "# The facts of the node this job landed on; a failed probe must not stop the runs.\n",
    );
    s.push_str(&format!(
        "\"$OPTGATE_BIN\" probe --json > {} || true\n",
        quote(&job.dir.join(PROBE_FILE).display().to_string())
    ));
    s.push_str(&format!(
        "# Each run writes its own outputs and manifest. A failed run is recorded and the\n\
         # others still run; an interrupted one (exit {EXEC_RUN_INTERRUPTED}: time limit, cancel) ends the job.\n\
         og_status=0\n\
         og_after() {{\n\
         \x20   case \"$1\" in\n\
         \x20       0) ;;\n\
         \x20       {EXEC_RUN_INTERRUPTED}) exit {EXEC_RUN_INTERRUPTED} ;;\n\
         \x20       *) og_status=1 ;;\n\
         \x20   esac\n\
         }}\n"
    ));
    for (i, run) in job.runs.iter().enumerate() {
        s.push_str(&format!(
            "# Run {} of {n}: {} (arm {}).\n",
            i + 1,
            run.run_id,
            run.arm
        ));
        s.push_str(&format!(
            "\"$OPTGATE_BIN\" exec-run {} --attempt {} -- {}; og_after $?\n",
            quote(&run.run_dir.display().to_string()),
            quote(&job.attempt.to_string()),
            launches.get(i).map_or("", String::as_str)
        ));
    }
    s.push_str("exit \"$og_status\"\n");
    s
}

/// A VPIC-style block shared by the backends' snapshot tests: the 1-thread baseline and
/// the 6-thread variant with its own launcher shape, under a directory whose name needs
/// quoting.
/// The environment variable that names the `optgate` batch jobs run on the compute nodes.
pub const OPTGATE_BIN_VAR: &str = "OPTGATE_BIN";

/// The `optgate` that batch scripts call (`optgate exec-run`, `optgate probe`): the value
/// of `$OPTGATE_BIN` when set and not empty — an absolute path the compute nodes see (a
/// shared file system), or a bare name their `PATH` resolves — else `current`, the binary
/// running now (the one the user's `PATH` found, wherever it was installed).
pub fn optgate_for_jobs(
    optgate_bin: Option<std::ffi::OsString>,
    current: std::path::PathBuf,
) -> std::path::PathBuf {
    match optgate_bin.filter(|v| !v.is_empty()) {
        Some(v) => std::path::PathBuf::from(v),
        None => current,
    }
}

#[cfg(test)]
pub(crate) fn sample_job() -> JobSpec {
    let root = std::path::PathBuf::from("/p/lustre/me/vpic's run");
    let run = |arm: &str, cpus: u32, args: &[&str]| crate::backend::JobRun {
        run_id: format!("b003-{arm}"),
        arm: arm.into(),
        block: 3,
        replicate: 3,
        run_dir: root.join("runs").join(format!("b003-{arm}")),
        nodes: 1,
        tasks_per_node: 16,
        cpus_per_task: cpus,
        gpus_per_task: 0,
        launcher_args: args.iter().map(|s| s.to_string()).collect(),
        time_limit: Some(Duration::from_secs(600)),
        governor: None,
    };
    JobSpec {
        name: "og-e1-b003".into(),
        dir: root.join("jobs/og-e1-b003"),
        runs: vec![
            run("omp6", 6, &["--cpu-bind=cores"]),
            run("baseline", 1, &[]),
        ],
        nodes: 1,
        tasks_per_node: 16,
        cpus_per_task: 6,
        gpus_per_task: 0,
        time_limit: Duration::from_secs(35 * 60),
        queue: Some("pdebug".into()),
        account: Some("myproj".into()),
        exclusive: true,
        extra_directives: vec!["--constraint=cpu".into()],
        optgate_bin: "/opt/optgate/bin/optgate".into(),
        attempt: 1,
    }
}

/// [`sample_job`] cut to one run asking `gpus` GPUs per task, with no launcher arguments,
/// queue, account, exclusivity or extra directives: what the backends write when the
/// experiment leaves everything optional out.
#[cfg(test)]
pub(crate) fn bare_sample_job(gpus: u32) -> JobSpec {
    let mut job = sample_job();
    job.runs.truncate(1);
    job.runs[0].gpus_per_task = gpus;
    job.runs[0].launcher_args.clear();
    job.gpus_per_task = gpus;
    job.queue = None;
    job.account = None;
    job.exclusive = false;
    job.extra_directives.clear();
    job
}

/// What every rendered script of [`sample_job`] holds between its opening comment and its
/// run lines, as the snapshot tests of both batch backends expect it.
#[cfg(test)]
pub(crate) const SAMPLE_BODY_PREAMBLE: &str = r#"# Generated by optgate; every value from the experiment file is quoted.
OPTGATE_BIN=/opt/optgate/bin/optgate
# The facts of the node this job landed on; a failed probe must not stop the runs.
"$OPTGATE_BIN" probe --json > '/p/lustre/me/vpic'\''s run/jobs/og-e1-b003/probe.json' || true
# Each run writes its own outputs and manifest. A failed run is recorded and the
# others still run; an interrupted one (exit 130: time limit, cancel) ends the job.
og_status=0
og_after() {
    case "$1" in
        0) ;;
        130) exit 130 ;;
        *) og_status=1 ;;
    esac
}
"#;

/// Fails unless `bash -n` accepts `script`.
#[cfg(test)]
pub(crate) fn assert_valid_bash(script: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join(JOB_SCRIPT);
    std::fs::write(&path, script).unwrap();
    let st = std::process::Command::new("bash")
        .arg("-n")
        .arg(&path)
        .status()
        .unwrap();
    assert!(st.success(), "bash -n refused:\n{script}");
}

/// Writes a job's rendered script into its (new) directory; returns the script's path.
pub fn write_job_script(job: &JobSpec, script: &str) -> Result<std::path::PathBuf, SchedError> {
    std::fs::create_dir_all(&job.dir).map_err(|source| SchedError::Io {
        op: "create job directory",
        path: job.dir.clone(),
        source,
    })?;
    let path = job.dir.join(JOB_SCRIPT);
    optgate_wrapper::manifest::write_atomic(&path, script.as_bytes()).map_err(|source| {
        SchedError::Io {
            op: "write",
            path: path.clone(),
            source,
        }
    })?;
    Ok(path)
}

/// Submits `job` with `retry`, idempotently: a submission that timed out may still have
/// created the job, so every retry first looks for it by name (`find`) before calling
/// `submit_once` again. The id is then recorded in the job's directory.
pub fn submit_idempotently(
    retry: &crate::command::RetryPolicy,
    pause: &dyn Fn(std::time::Duration) -> bool,
    what: &str,
    job: &JobSpec,
    find: impl Fn(&[String]) -> Result<std::collections::BTreeMap<String, JobId>, SchedError>,
    mut submit_once: impl FnMut() -> Result<JobId, SchedError>,
) -> Result<JobId, SchedError> {
    let mut attempt = 0;
    let id = retry.run_pausing(what, pause, || {
        attempt += 1;
        if attempt > 1
            && let Some(id) = find(std::slice::from_ref(&job.name))?.remove(&job.name)
        {
            return Ok(id);
        }
        submit_once()
    })?;
    let id_path = job.dir.join(JOB_ID_FILE);
    optgate_wrapper::manifest::write_atomic(&id_path, format!("{id}\n").as_bytes()).map_err(
        |source| SchedError::Io {
            op: "write",
            path: id_path.clone(),
            source,
        },
    )?;
    Ok(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_run_line_names_the_jobs_attempt() {
        let mut job = sample_job();
        job.attempt = 2;
        let body = render_body(&job, "test", &vec!["launch".to_string(); job.runs.len()]);
        let lines: Vec<&str> = body.lines().filter(|l| l.contains(" exec-run ")).collect();
        assert_eq!(lines.len(), job.runs.len());
        for l in lines {
            assert!(l.contains("' --attempt 2 -- launch;"), "{l}");
        }
    }

    #[test]
    fn directive_values_with_shell_or_parser_syntax_are_refused() {
        for bad in [
            "a b", "a'b", "a\"b", "a#b", "a\\b", "a\nb", "a$b", "a`b`", "", "a\tb",
        ] {
            assert!(
                check_directive_value("queue", bad, &[]).is_err(),
                "{bad:?} was accepted"
            );
        }
        for good in ["debug", "pbatch.2", "my-proj_1", "--constraint=cpu&big"] {
            check_directive_value("queue", good, &[]).unwrap();
        }
        assert!(check_directive_value("x", "a{b", &['{']).is_err());
    }

    #[test]
    fn extra_directives_must_be_options() {
        assert!(check_extra_directive("constraint=cpu", &[]).is_err());
        check_extra_directive("--constraint=cpu", &[]).unwrap();
    }

    #[test]
    fn extra_directives_are_checked_against_the_backends_options() {
        use optgate_experiment::SchedulerKind::{Flux, Local, Slurm};
        // Real Flux 0.88.0 refuses `--constraint` (`argument parsing failed`).
        let e = unknown_directive(Flux, "--constraint=cpu").unwrap();
        assert!(
            e.contains("`--constraint`") && e.contains("`flux batch`"),
            "{e}"
        );
        assert!(e.contains("--requires"), "{e}");
        assert_eq!(unknown_directive(Slurm, "--constraint=cpu"), None);
        for ok in [
            "--requires=host:vm",
            "--setattr=user.x=1",
            "--urgency=0",
            "-N2",
            "--exclusive",
        ] {
            assert_eq!(unknown_directive(Flux, ok), None, "{ok}");
        }
        for ok in [
            "--qos=debug",
            "-Ccpu",
            "--mem=4G",
            "--gres=gpu:1",
            "--exclusive",
        ] {
            assert_eq!(unknown_directive(Slurm, ok), None, "{ok}");
        }
        let e = unknown_directive(Slurm, "--requires=x").unwrap();
        assert!(e.contains("--constraint") && e.contains("`sbatch`"), "{e}");
        assert!(unknown_directive(Flux, "--qos=debug").is_some());
        assert!(unknown_directive(Flux, "-C").is_some());
        assert!(unknown_directive(Slurm, "--no-such-option").is_some());
        assert_eq!(unknown_directive(Local, "--anything"), None);
        // The lists stay sorted, so a reader finds an option at a glance.
        for list in [SBATCH_LONG_OPTIONS, FLUX_BATCH_LONG_OPTIONS] {
            assert!(list.windows(2).all(|w| w[0] < w[1]), "{list:?}");
        }
    }

    #[test]
    fn time_limits_round_up_and_zero_is_refused() {
        assert_eq!(limit_seconds(Duration::from_millis(60_001)).unwrap(), 61);
        assert_eq!(limit_seconds(Duration::from_secs(90)).unwrap(), 90);
        assert!(limit_seconds(Duration::ZERO).is_err());
    }

    #[test]
    fn job_directory_must_be_absolute() {
        assert!(check_job_dir(Path::new("jobs/x")).is_err());
        check_job_dir(Path::new("/my jobs/it's here")).unwrap();
    }
}
