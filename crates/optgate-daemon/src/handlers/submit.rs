//! `submit`: validate the experiment file's text again (the protocol is an interface of
//! its own), give the experiment an id and a run-directory root, write the experiment copy
//! and the plan there, record everything in one transaction, and wake the engine. The text
//! is checked for size and nesting before it is parsed (`precheck`), and parsed off the
//! async workers, at most [`MAX_PARSES`] at a time, each given [`PARSE_TIMEOUT`].

use std::path::{Path, PathBuf};

use optgate_client::protocol::{
    ErrorKind, ErrorReply, RecurrenceStatus, Response, SubmitReply, SubmitRequest,
};
use optgate_evidence::Layout;
use optgate_experiment::{Experiment, Loaded, Plan, SchedulerKind};
use std::time::Duration;

use optgate_store::{BlockRow, NewExperiment, NewRecurrence, NewRun};

use super::HandlerResult;
use crate::context::Daemon;
use crate::error::DaemonError;
use crate::ids::new_root;

pub async fn submit(ctx: &Daemon, req: SubmitRequest) -> HandlerResult {
    if ctx.shutdown.is_cancelled() {
        return Ok(Response::Error(ErrorReply::new(
            ErrorKind::ShuttingDown,
            "the daemon is stopping; submit again once it is restarted",
        )));
    }
    let (text, path) = (req.source_text, req.source_path);
    let loaded = match parse_bounded(text, path).await {
        Ok(Submitted::Experiment(l)) => *l,
        Ok(Submitted::Campaign(c)) => return super::campaign::submit(ctx, *c).await,
        Err(why) => return Ok(Response::Error(why)),
    };
    let exp = loaded.experiment;
    let every = match recurs(req.every.as_deref(), &exp) {
        Ok(every) => every,
        Err(why) => return Ok(Response::Error(why)),
    };
    let (id, root) = new_root(&exp);
    let kind = exp.kind;
    let recurrence = match every {
        None => {
            record_new(ctx, &exp, &id, &root, kind).await?;
            None
        }
        Some(every) => Some(Box::new(
            record_recurring(ctx, &exp, &id, &root, every).await?,
        )),
    };
    tracing::info!(
        "experiment {id} (`{}`) submitted; runs under {}",
        exp.name(),
        root.display()
    );
    ctx.wake.notify_one();
    Ok(Response::Submitted(SubmitReply {
        id,
        root,
        recurrence,
    }))
}

/// The interval a submission recurs at: `--every` (parsed as the file's key is), else
/// the file's `recheck.every`, else none.
fn recurs(flag: Option<&str>, exp: &Experiment) -> Result<Option<Duration>, ErrorReply> {
    match flag {
        Some(f) => optgate_experiment::parse_interval(f)
            .map(Some)
            .map_err(|e| ErrorReply::new(ErrorKind::InvalidExperiment, format!("--every: {e}"))),
        None => Ok(exp.recheck.as_ref().map(|r| r.every)),
    }
}

/// Records a new experiment as the first execution of a recurrence submitting it again
/// every `every` (due times anchored at now), in one transaction; its status.
async fn record_recurring(
    ctx: &Daemon,
    exp: &Experiment,
    id: &str,
    root: &Path,
    every: Duration,
) -> Result<RecurrenceStatus, DaemonError> {
    let (new, blocks, runs) = prepare_new(exp, id, root, exp.kind).await?;
    let anchor = chrono::Utc::now().timestamp();
    let interval_secs = every.as_secs();
    let recurrence = NewRecurrence {
        name: exp.name().to_string(),
        source_path: exp.source.display().to_string(),
        source_text: exp.source_text.clone(),
        interval_secs,
        anchor_at: anchor,
        next_due_at: crate::recheck::next_multiple_after(anchor, interval_secs, anchor),
        notify: exp
            .recheck
            .as_ref()
            .map(|r| r.notify.clone())
            .unwrap_or_default(),
    };
    ctx.db
        .call(move |s| {
            let rid = s.start_recurrence(&new, &blocks, &runs, &recurrence)?;
            let row = s.recurrences(false)?.into_iter().find(|r| r.id == rid);
            Ok(row.map(|r| optgate_client::answers::recurrence::recurrence_status(&r)))
        })
        .await?
        .ok_or_else(|| DaemonError::Experiment {
            id: id.to_string(),
            message: "the recurrence just recorded cannot be read back".into(),
        })
}

/// Submissions parsed at once. A parse that outlives [`PARSE_TIMEOUT`] keeps its slot until
/// it ends, so hostile texts can keep at most this many threads busy.
pub const MAX_PARSES: usize = 2;
/// How long a submission's text may take to parse and validate, waiting for a parse slot
/// included; past it the submission is refused (the parse ends on its own, unwaited for,
/// and never holds up a stop). A real file takes milliseconds.
pub const PARSE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

static PARSES: std::sync::LazyLock<std::sync::Arc<tokio::sync::Semaphore>> =
    std::sync::LazyLock::new(|| std::sync::Arc::new(tokio::sync::Semaphore::new(MAX_PARSES)));

/// What a submitted text is: an experiment, or a campaign (a `stages:` key).
enum Submitted {
    Experiment(Box<Loaded>),
    Campaign(Box<optgate_experiment::campaign::Campaign>),
}

/// Loads a submitted text as a campaign when it is one, else as an experiment.
fn load_submitted(text: &str, path: &Path) -> Result<Submitted, optgate_experiment::LoadError> {
    use optgate_experiment::campaign;
    if campaign::is_campaign_text(text) {
        campaign::load_str(text, path).map(|c| Submitted::Campaign(Box::new(c)))
    } else {
        optgate_experiment::load_str(text, path).map(|l| Submitted::Experiment(Box::new(l)))
    }
}

/// Loads the experiment (or campaign) text of a submission: refused unparsed when too
/// large or too deep (`precheck`), else parsed and validated on the blocking pool within
/// [`PARSE_TIMEOUT`].
async fn parse_bounded(text: String, path: PathBuf) -> Result<Submitted, ErrorReply> {
    if let Some(why) = super::precheck::refuse_before_parsing(&text) {
        return Err(ErrorReply::new(
            ErrorKind::InvalidExperiment,
            format!("{}: {why}", path.display()),
        ));
    }
    parse_within(text, path, load_submitted, PARSE_TIMEOUT).await
}

/// Runs `parse` on the blocking pool holding one of [`MAX_PARSES`] slots (kept until the
/// parse ends, answered or not), and gives up on it after `deadline`.
async fn parse_within<T: Send + 'static>(
    text: String,
    path: PathBuf,
    parse: fn(&str, &Path) -> Result<T, optgate_experiment::LoadError>,
    deadline: std::time::Duration,
) -> Result<T, ErrorReply> {
    let invalid = |message: String| ErrorReply::new(ErrorKind::InvalidExperiment, message);
    let parse = async {
        let slot = PARSES.clone().acquire_owned().await.ok();
        tokio::task::spawn_blocking(move || {
            let parsed = parse(&text, &path);
            drop(slot);
            parsed
        })
        .await
    };
    match tokio::time::timeout(deadline, parse).await {
        Ok(Ok(Ok(parsed))) => Ok(parsed),
        Ok(Ok(Err(e))) => Err(invalid(e.to_string())),
        Ok(Err(e)) => Err(ErrorReply::new(
            ErrorKind::Internal,
            crate::error::join_error(e).to_string(),
        )),
        Err(_) => Err(invalid(format!(
            "the experiment file did not parse within {:?}; refused",
            deadline
        ))),
    }
}

/// The blocks an experiment starts with: `replicates` of them, or under the staged rule
/// (which plans no look the exact test cannot reach) those of its first look (7 for three
/// variants at `replicates: 5`).
pub fn first_plan(exp: &Experiment) -> Plan {
    let mut plan = Plan::for_experiment(exp);
    if let Ok(Some(staged)) = optgate_policy::decide::staged_plan(exp)
        && let Some(first) = staged.next_look_after(0)
    {
        plan.extend(first.saturating_sub(plan.blocks.len() as u32));
    }
    plan
}

/// Records a new experiment under `id` with its runs under `root`, run by `kind`'s
/// backend: writes the experiment copy and the first plan into `root` (created 0700), then
/// records the experiment, its blocks and runs in one transaction. The daemon's `submit`
/// and `optgate run` (which runs the engine in its own process) both come here.
pub async fn record_new(
    ctx: &Daemon,
    exp: &Experiment,
    id: &str,
    root: &Path,
    kind: SchedulerKind,
) -> Result<(), DaemonError> {
    record_new_stage(ctx, exp, id, root, kind, None).await
}

/// [`record_new`], and when `step` is `(campaign, k)` the experiment recorded as that
/// campaign's step `k` in the same transaction.
pub async fn record_new_stage(
    ctx: &Daemon,
    exp: &Experiment,
    id: &str,
    root: &Path,
    kind: SchedulerKind,
    step: Option<(String, u32)>,
) -> Result<(), DaemonError> {
    let (new, blocks, runs) = prepare_new(exp, id, root, kind).await?;
    ctx.db
        .call(move |s| match &step {
            None => s.insert_experiment(&new, &blocks, &runs),
            Some((c, k)) => s.insert_campaign_stage(c, *k, &new, &blocks, &runs),
        })
        .await?;
    record_build_identity(ctx, exp, id).await
}

/// The rows of a new experiment `id` with its runs under `root`, run by `kind`'s backend,
/// after writing the experiment copy and the first plan into `root` (created 0700). What
/// [`record_new_stage`] records, and a recurrence's re-submission (`engine/recurring.rs`).
pub async fn prepare_new(
    exp: &Experiment,
    id: &str,
    root: &Path,
    kind: SchedulerKind,
) -> Result<(NewExperiment, Vec<BlockRow>, Vec<NewRun>), DaemonError> {
    let plan = first_plan(exp);
    let layout = Layout::new(root);
    {
        let (exp, plan, layout) = (exp.clone(), plan.clone(), layout.clone());
        tokio::task::spawn_blocking(move || optgate_evidence::root::prepare(&exp, &plan, &layout))
            .await
            .map_err(crate::error::join_error)?
            .map_err(|e| DaemonError::Experiment {
                id: id.to_string(),
                message: e.to_string(),
            })?;
    }
    let (blocks, runs) = crate::work::plan_rows(&plan, 0, |_| false);
    let new = NewExperiment {
        id: id.to_string(),
        name: exp.name().to_string(),
        source_path: exp.source.display().to_string(),
        source_text: exp.source_text.clone(),
        source_sha256: exp.source_sha256.clone(),
        root: root.display().to_string(),
        scheduler: kind,
        replicates: exp.replicates,
        max_replicates: exp.max_replicates,
    };
    Ok((new, blocks, runs))
}

/// Records the build's identity of experiment `id` (the workdir's git commit and dirty
/// flag), for the history: asked of git with a bound, never an error.
pub async fn record_build_identity(
    ctx: &Daemon,
    exp: &Experiment,
    id: &str,
) -> Result<(), DaemonError> {
    let workdir = exp.workdir.clone();
    let build = tokio::task::spawn_blocking(move || crate::history::build_identity(&workdir))
        .await
        .map_err(crate::error::join_error)?;
    let id = id.to_string();
    ctx.db
        .call(move |s| s.set_build_identity(&id, &build))
        .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    static STARTED: AtomicUsize = AtomicUsize::new(0);
    static RELEASE: AtomicBool = AtomicBool::new(false);

    /// A parse that never ends until the test lets it.
    fn stuck(_: &str, _: &Path) -> Result<(), optgate_experiment::LoadError> {
        STARTED.fetch_add(1, Ordering::SeqCst);
        while !RELEASE.load(Ordering::SeqCst) {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        Ok(())
    }

    /// Three submissions whose parse never ends: each is refused at its deadline, and only
    /// two parses ever started (the stuck ones keep their slots). Planted bugs caught: no
    /// deadline (the test hangs), or no parse slots (three parses start).
    #[tokio::test]
    async fn a_stuck_parse_is_refused_at_its_deadline_and_parses_are_bounded() {
        let deadline = std::time::Duration::from_millis(200);
        for _ in 0..3 {
            let refused = parse_within(String::new(), PathBuf::from("/x"), stuck, deadline).await;
            let e = refused.unwrap_err();
            assert_eq!(e.kind, ErrorKind::InvalidExperiment);
            assert!(
                e.message.contains("did not parse within 200ms"),
                "{}",
                e.message
            );
        }
        assert_eq!(STARTED.load(Ordering::SeqCst), MAX_PARSES);
        RELEASE.store(true, Ordering::SeqCst);
    }
}
