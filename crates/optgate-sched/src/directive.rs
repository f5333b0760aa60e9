//! Batch scripts from one directive table per scheduler: a [`Dialect`] names the
//! scheduler, the prefix of its directive lines, its time-limit form and its table — which
//! option carries which part of the job ([`Carries`]). [`render_script`] is the
//! one renderer both batch backends use: it checks the job, writes the rows in table order
//! (then the job's extra directives) behind the prefix, then the shared body
//! ([`crate::batch::render_body`]). Pure.

use std::time::Duration;

use crate::backend::{JobRun, JobSpec, SchedError};
use crate::batch::{check_common, check_job_dir, render_body};
use crate::shell::join;

/// The part of a job one directive carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Carries {
    /// The job's name (the key [`crate::lookup::newest_by_name`] finds it by).
    JobName,
    Nodes,
    TasksPerNode,
    CpusPerTask,
    /// GPUs per task; no line without GPUs.
    GpusPerTask,
    /// The cores one node must hold: the largest arm's need there ([`per_node_need`]).
    CoresPerNode,
    /// The GPUs one node must hold, likewise; no line without GPUs.
    GpusPerNode,
    /// The job's time limit, in the dialect's own form.
    TimeLimit,
    /// `scheduler.queue`; no line when unset.
    Queue,
    /// `scheduler.account`; no line when unset.
    Account,
    /// `scheduler.exclusive`: the option alone, when set.
    Exclusive,
    /// A fixed value (the log files' names, relative to the job's directory the backends
    /// submit from: directive lines cannot be quoted, so a job directory of any name works).
    Fixed(&'static str),
}

/// How one scheduler's batch scripts are written.
pub struct Dialect {
    /// The scheduler's name in the script's opening comment (`Slurm`, `Flux`).
    pub scheduler: &'static str,
    /// What opens each directive line (`#SBATCH `, `# flux: `).
    pub prefix: &'static str,
    /// The scheduler's form of a time limit.
    pub time_limit: fn(Duration) -> Result<String, SchedError>,
    /// A run's launcher words (`srun …`, `flux run …`), or why the run cannot be launched.
    pub launcher: fn(&JobRun) -> Result<Vec<String>, SchedError>,
    /// The directive table: each option and what it carries, in the order written.
    pub directives: &'static [(&'static str, Carries)],
}

/// What one node of a job's allocation must hold: the cores and GPUs of the largest arm on
/// a node (each arm's tasks per node × its cores or GPUs per task), not the largest task
/// count times the largest cores per task taken from different arms (a 2-task × 1-core
/// baseline and a 1-task × 2-core variant need 2 cores, not 4). A `flux batch` job is a
/// Flux instance of its own: each arm's `flux run` places its tasks in whatever cores the
/// allocation holds, so the slot shape does not constrain them.
pub fn per_node_need(job: &JobSpec) -> (u64, u64) {
    let need = |per_task: fn(&JobRun) -> u32| {
        job.runs
            .iter()
            .map(|r| u64::from(r.tasks_per_node) * u64::from(per_task(r)))
            .max()
            .unwrap_or(0)
    };
    (need(|r| r.cpus_per_task).max(1), need(|r| r.gpus_per_task))
}

/// A run's own shape as launcher words, the same for `srun` and `flux run` (both count
/// tasks): `-N` nodes, `-n` tasks in all, `-c` cores per task — always explicit (Slurm
/// 22.05/23.02 `srun` does not inherit the job's `--cpus-per-task`).
pub fn launch_shape(run: &JobRun) -> [String; 6] {
    [
        "-N".into(),
        run.nodes.to_string(),
        "-n".into(),
        // In u64: two u32 fields' product wraps (65536 × 65536 would say `-n 0`).
        (u64::from(run.nodes) * u64::from(run.tasks_per_node)).to_string(),
        "-c".into(),
        run.cpus_per_task.to_string(),
    ]
}

/// The last line of `stdout` that is not blank, trimmed ("" when there is none): where
/// `sbatch --parsable` and `flux batch` print the new job's id.
pub fn last_line(stdout: &str) -> &str {
    stdout
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .unwrap_or("")
}

/// What a directive writes for one job.
enum Written {
    /// No line: the scheduler's default holds.
    Nothing,
    /// The option alone (`--exclusive`).
    Alone,
    /// `--option=value`.
    Value(String),
}

/// What the directive carrying `carries` writes for `job`.
fn written(dialect: &Dialect, job: &JobSpec, carries: Carries) -> Result<Written, SchedError> {
    let count = |n: u64| Written::Value(n.to_string());
    let if_any = |n: u64| if n > 0 { count(n) } else { Written::Nothing };
    let if_set = |v: &Option<String>| v.clone().map_or(Written::Nothing, Written::Value);
    Ok(match carries {
        Carries::JobName => Written::Value(job.name.clone()),
        Carries::Nodes => count(job.nodes.into()),
        Carries::TasksPerNode => count(job.tasks_per_node.into()),
        Carries::CpusPerTask => count(job.cpus_per_task.into()),
        Carries::GpusPerTask => if_any(job.gpus_per_task.into()),
        Carries::CoresPerNode => count(per_node_need(job).0),
        Carries::GpusPerNode => if_any(per_node_need(job).1),
        Carries::TimeLimit => Written::Value((dialect.time_limit)(job.time_limit)?),
        Carries::Queue => if_set(&job.queue),
        Carries::Account => if_set(&job.account),
        Carries::Exclusive if job.exclusive => Written::Alone,
        Carries::Exclusive => Written::Nothing,
        Carries::Fixed(v) => Written::Value(v.to_string()),
    })
}

/// The directive lines' options for `job`: the dialect's table, then the extra directives.
pub fn directive_options(dialect: &Dialect, job: &JobSpec) -> Result<Vec<String>, SchedError> {
    let mut options = Vec::with_capacity(dialect.directives.len() + job.extra_directives.len());
    for &(option, carries) in dialect.directives {
        match written(dialect, job, carries)? {
            Written::Nothing => {}
            Written::Alone => options.push(option.to_string()),
            Written::Value(v) => options.push(format!("{option}={v}")),
        }
    }
    options.extend(job.extra_directives.iter().cloned());
    Ok(options)
}

/// The batch script of `job` in `dialect`. Fails on values a directive line cannot carry
/// and runs the dialect's launcher refuses, before anything is written. Directives come first: both schedulers stop reading them at the first line
/// that is neither a comment nor blank.
pub fn render_script(dialect: &Dialect, job: &JobSpec) -> Result<String, SchedError> {
    check_common(job, &[])?;
    check_job_dir(&job.dir)?;
    let options = directive_options(dialect, job)?;
    let mut launches = Vec::with_capacity(job.runs.len());
    for run in &job.runs {
        launches.push(join((dialect.launcher)(run)?));
    }
    let mut s = String::from("#!/bin/bash\n");
    for option in options {
        s.push_str(dialect.prefix);
        s.push_str(&option);
        s.push('\n');
    }
    s.push_str(&render_body(job, dialect.scheduler, &launches));
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{sample_job, unknown_directive};
    use crate::{flux::FLUX_BATCH, slurm::SBATCH};
    use optgate_experiment::SchedulerKind;

    #[test]
    fn every_option_in_a_table_is_an_option_of_its_batch_command() {
        // Planted bug: a row `("--partiton", Carries::Queue)` in SBATCH fails here (sbatch
        // would refuse every job), as would a Slurm option in the Flux table.
        for (dialect, kind) in [
            (&SBATCH, SchedulerKind::Slurm),
            (&FLUX_BATCH, SchedulerKind::Flux),
        ] {
            for (option, _) in dialect.directives {
                assert_eq!(unknown_directive(kind, option), None, "{kind}: {option}");
            }
        }
    }

    #[test]
    fn both_tables_carry_what_every_scheduler_must_be_told() {
        // Planted bug: dropping the `--bank` row from FLUX_BATCH (a job charged to the
        // wrong bank) or `--time` from SBATCH (the partition's default limit) fails here.
        let must = [
            Carries::JobName,
            Carries::Nodes,
            Carries::TimeLimit,
            Carries::Queue,
            Carries::Account,
            Carries::Exclusive,
        ];
        for dialect in [&SBATCH, &FLUX_BATCH] {
            for part in must {
                let carried = dialect.directives.iter().any(|(_, c)| *c == part);
                assert!(carried, "{}: {part:?}", dialect.scheduler);
            }
            // The name comes first, so a person reading `job.sh` sees it at once.
            assert_eq!(dialect.directives[0].1, Carries::JobName);
        }
    }

    const TEST: Dialect = Dialect {
        scheduler: "Test",
        prefix: "#T ",
        time_limit: |d| Ok(format!("{}s", d.as_secs())),
        launcher: |r| Ok(vec!["go".into(), r.arm.clone()]),
        directives: &[
            ("--name", Carries::JobName),
            ("--gpus", Carries::GpusPerTask),
            ("--excl", Carries::Exclusive),
            ("--queue", Carries::Queue),
            ("--limit", Carries::TimeLimit),
            ("--log", Carries::Fixed("t-%j.log")),
        ],
    };

    #[test]
    fn values_flags_and_absent_parts_are_written_as_such() {
        let mut job = sample_job();
        // Planted bugs: a flag written `--excl=`, zero GPUs written as `--gpus=0`, an unset
        // queue written at all, the extra directives dropped or put first.
        assert_eq!(
            directive_options(&TEST, &job).unwrap(),
            [
                "--name=og-e1-b003",
                "--excl",
                "--queue=pdebug",
                "--limit=2100s",
                "--log=t-%j.log",
                "--constraint=cpu"
            ]
        );
        job.gpus_per_task = 2;
        job.exclusive = false;
        job.queue = None;
        job.extra_directives.clear();
        assert_eq!(
            directive_options(&TEST, &job).unwrap(),
            [
                "--name=og-e1-b003",
                "--gpus=2",
                "--limit=2100s",
                "--log=t-%j.log"
            ]
        );
        let script = render_script(&TEST, &job).unwrap();
        assert!(
            script.starts_with("#!/bin/bash\n#T --name=og-e1-b003\n#T --gpus=2\n"),
            "{script}"
        );
        assert!(
            script.contains("# optgate Test job og-e1-b003: 2 run(s)"),
            "{script}"
        );
        assert!(script.contains(" -- go omp6; og_after $?\n"), "{script}");
        assert!(
            script.contains(" -- go baseline; og_after $?\n"),
            "{script}"
        );
    }

    #[test]
    fn a_launcher_that_refuses_a_run_refuses_the_script() {
        const REFUSING: Dialect = Dialect {
            launcher: |r| {
                Err(SchedError::Unrepresentable {
                    field: "governor".into(),
                    value: r.arm.clone(),
                    reason: "test".into(),
                })
            },
            ..TEST
        };
        // Planted bug: a refused run rendered as an empty launch line (the job would run
        // `exec-run … --` with nothing to launch) fails here.
        assert!(matches!(
            render_script(&REFUSING, &sample_job()),
            Err(SchedError::Unrepresentable { value, .. }) if value == "omp6"
        ));
    }

    #[test]
    fn both_launchers_ask_for_the_runs_own_shape_in_tasks() {
        let mut job = sample_job();
        job.runs[0].nodes = 3;
        job.runs[0].tasks_per_node = 4;
        job.runs[0].cpus_per_task = 2;
        // Planted bug: `-n` as tasks per node (not nodes × tasks per node) fails here.
        assert_eq!(
            launch_shape(&job.runs[0]),
            ["-N", "3", "-n", "12", "-c", "2"]
        );
        let srun = crate::slurm::srun_words(&job.runs[0]).unwrap();
        let flux_run = crate::flux::flux_run_words(&job.runs[0]);
        assert_eq!(srun[1..7], launch_shape(&job.runs[0]));
        assert_eq!(flux_run[2..8], launch_shape(&job.runs[0]));
        // Planted bug: the product in u32 (wrapping to 0, or panicking in a debug build).
        job.runs[0].nodes = 65536;
        job.runs[0].tasks_per_node = 65536;
        assert_eq!(launch_shape(&job.runs[0])[3], "4294967296");
    }

    #[test]
    fn the_submitted_id_is_read_from_the_last_line_that_is_not_blank() {
        assert_eq!(last_line("sbatch: note\n  4242;c1  \n\n"), "4242;c1");
        assert_eq!(last_line("\n \n"), "");
    }
}
