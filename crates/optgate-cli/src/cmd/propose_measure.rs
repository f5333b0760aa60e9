//! `optgate propose`'s measuring: the baseline-only experiment run through the engine
//! (locally in this process, like `optgate run`; on Slurm or Flux through the daemon, so
//! its tasks are measured inside the step), then the facts its runs recorded.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};

use optgate_client::client;
use optgate_client::protocol::{Request, Response, StatusRequest, SubmitRequest};
use optgate_evidence::Layout;
use optgate_experiment::{BASELINE, CommandSpec, Experiment, SchedulerKind};
use optgate_propose::{Facts, Launcher, LauncherKind, NodeFacts, TraceTimes, Usage};

use crate::exit;

/// How often the daemon is asked whether the measuring experiment has ended.
pub const DAEMON_POLL: Duration = Duration::from_secs(1);

/// Runs `exp` (the measuring experiment, its text `text`, read as `source`) and returns
/// the root that holds its runs and report.
pub fn run_baseline(exp: &Experiment, source: &Path, text: &str, quiet: bool) -> Result<PathBuf> {
    if exp.kind == SchedulerKind::Local {
        let root = exp
            .workdir
            .join("optgate-runs")
            .join(exp.name())
            .join(chrono::Local::now().format("%Y%m%d-%H%M%S").to_string());
        return match super::run::execute(exp, source, &root, quiet)? {
            Ok(_) => Ok(root),
            Err(code) => Err(exit::with_code(
                code,
                anyhow::anyhow!("the baseline's runs were interrupted; nothing was proposed"),
            )),
        };
    }
    through_daemon(source, text)
}

/// Hands the measuring experiment to the daemon (started when none runs) and waits for it
/// to end; its root.
fn through_daemon(source: &Path, text: &str) -> Result<PathBuf> {
    let paths = super::daemon_client::state_paths()?;
    if client::ping(&paths).is_err() {
        let w = super::daemon_client::start(&paths)?;
        errln!("optgate: started the daemon (pid {})", w.pid);
    }
    let request = Request::Submit(SubmitRequest {
        source_path: source.to_path_buf(),
        source_text: text.to_string(),
        every: None,
    });
    let reply = match client::call(&paths, &request).map_err(super::daemon_client::client_error)? {
        Response::Submitted(reply) => reply,
        other => anyhow::bail!("the daemon answered {other:?} to a submission"),
    };
    errln!("optgate: measuring the baseline as experiment {}", reply.id);
    loop {
        std::thread::sleep(DAEMON_POLL);
        let ask = Request::Status(StatusRequest {
            id: Some(reply.id.clone()),
            limit: None,
        });
        let Response::Status(status) =
            client::call(&paths, &ask).map_err(super::daemon_client::client_error)?
        else {
            anyhow::bail!("the daemon gave no status of {}", reply.id);
        };
        if let Some(e) = status.experiments.first()
            && e.state.is_terminal()
        {
            return Ok(reply.root);
        }
    }
}

/// The facts of the finished measuring experiment in `root`.
pub fn facts(exp: &Experiment, root: &Path) -> Result<Facts> {
    let layout = Layout::new(root);
    let arm = exp
        .arms
        .iter()
        .find(|a| a.name == BASELINE)
        .context("the measuring experiment has no baseline")?;
    let probe = optgate_probe::probe_live();
    let tunability = optgate_probe::governor::tunability(
        &optgate_probe::sysfs_root(),
        exp.governor_helper.as_deref(),
    );
    let launcher = |kind| Launcher {
        kind,
        cpus_per_task: arm.resources.cpus_per_task,
    };
    let build = arm.build.map(|i| &exp.builds[i]);
    let report = read_report(&layout)?;
    Ok(Facts {
        usage: usage(&report),
        node: NodeFacts::from_probe(&probe, tunability),
        env: arm.env.clone(),
        launcher: match exp.kind {
            SchedulerKind::Local => None,
            SchedulerKind::Slurm => Some(launcher(LauncherKind::Slurm)),
            SchedulerKind::Flux => Some(launcher(LauncherKind::Flux)),
        },
        build: build.map(|b| command_text(b.command())),
        has_correctness: exp.correctness.is_some(),
        linked: linked_libraries(exp, &layout, build.map(|b| b.id.as_str())),
        trace: trace_times(&report),
    })
}

/// A command as one line of text.
pub fn command_text(c: &CommandSpec) -> String {
    match c {
        CommandSpec::Shell(s) => s.clone(),
        CommandSpec::Argv(v) => optgate_sched::shell::join(v),
    }
}

/// The baseline's utilisation as its report has it: its tasks measured by `optgate step`,
/// or — local runs have no tasks — its runs' `core_use`.
fn usage(report: &optgate_report::Report) -> Option<Usage> {
    report
        .utilisation
        .iter()
        .flatten()
        .find(|u| u.arm == BASELINE)
        .map(|u| Usage {
            cores_allotted: u.cores_allotted,
            cores_used: u.cores_used,
            threads: u.threads,
            runnable_threads: u.runnable_threads,
            under_load: u.under_load,
        })
}

/// The baseline's traced seconds per area: its breakdown row's categories (a DFTracer
/// metric's runs), grouped.
fn trace_times(report: &optgate_report::Report) -> Option<TraceTimes> {
    let row = report
        .breakdown
        .iter()
        .flatten()
        .find(|b| b.arm == BASELINE)?;
    TraceTimes::from_categories(row.categories.iter().map(|(c, s)| (c.as_str(), *s)))
}

/// The measuring experiment's report, as it wrote it into `layout`.
fn read_report(layout: &Layout) -> Result<optgate_report::Report> {
    let path = layout.report_json();
    let text = std::fs::read_to_string(&path).with_context(|| {
        format!(
            "the measuring experiment left no report ({})",
            path.display()
        )
    })?;
    serde_json::from_str(&text).with_context(|| format!("{} is not a report", path.display()))
}

/// The shared libraries of the app's program (`ldd`), by file name; empty when the
/// program cannot be found or `ldd` cannot read it.
fn linked_libraries(exp: &Experiment, layout: &Layout, build: Option<&str>) -> Vec<String> {
    let first = match &exp.file.app.command {
        CommandSpec::Shell(s) => s
            .split_whitespace()
            .next()
            .unwrap_or("")
            .trim_matches(|c| c == '"' || c == '\''),
        CommandSpec::Argv(v) => v.first().map_or("", String::as_str),
    }
    .to_string();
    let program = match build {
        Some(id) => {
            let dir = layout.build_dir(id).display().to_string();
            first
                .replace("${OPTGATE_BUILD_DIR}", &dir)
                .replace("$OPTGATE_BUILD_DIR", &dir)
        }
        None => first,
    };
    let program = if program.contains('/') {
        exp.workdir.join(program)
    } else {
        // A program on PATH, as the run's shell finds it.
        std::env::var_os("PATH")
            .iter()
            .flat_map(std::env::split_paths)
            .map(|d| d.join(&program))
            .find(|p| p.is_file())
            .unwrap_or_else(|| PathBuf::from(&program))
    };
    let Ok(out) = std::process::Command::new("ldd").arg(&program).output() else {
        return Vec::new();
    };
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter_map(|p| Path::new(p).file_name().and_then(|n| n.to_str()))
        .map(str::to_string)
        .collect()
}
