//! `optgate submit EXP.yaml`: validate here (the same messages and pre-flight checks as
//! `validate`, so nothing invalid reaches the daemon), start the daemon if none is running
//! (unless `--no-start`), hand the experiment over, print its id — and only its id — on
//! stdout. `--every` (or the file's `recheck:`) makes it a recurrence, named on stderr.

use std::path::Path;

use anyhow::Result;

use optgate_client::ClientError;
use optgate_client::client;
use optgate_client::protocol::{Request, Response, SubmitRequest};

use super::daemon_client::{client_error, start, state_paths};
use crate::exit;

pub fn submit(path: &Path, no_start: bool, every: Option<&str>) -> Result<i32> {
    if let Some(e) = every
        && let Err(why) = optgate_experiment::parse_interval(e)
    {
        return Err(exit::with_code(
            exit::INVALID_INPUT,
            anyhow::anyhow!("--every: {why}"),
        ));
    }
    if super::common::is_campaign_file(path) {
        if every.is_some() {
            return Err(exit::with_code(
                exit::INVALID_INPUT,
                anyhow::anyhow!(
                    "--every: a campaign is not re-checked on a schedule; submit it again"
                ),
            ));
        }
        // A campaign: validated here as a whole (every stage's experiment), pre-flight on
        // its first stage's.
        let c = super::campaign::load(path)?;
        let first = optgate_experiment::campaign::load_generated(
            &c.stage_text(0, &Default::default()),
            &c.source,
        )?
        .experiment;
        return hand_over(
            &first,
            path,
            no_start,
            c.source.clone(),
            c.source_text.clone(),
            None,
        );
    }
    let loaded = super::common::load_experiment(path, super::common::ChecklistNote::Short)?;
    let exp = loaded.experiment;
    let (source, text) = (exp.source.clone(), exp.source_text.clone());
    hand_over(&exp, path, no_start, source, text, every)
}

/// Pre-flight on `exp`, then the daemon (started unless `no_start`) gets `text` as read
/// from `source`; prints the id it answers.
fn hand_over(
    exp: &optgate_experiment::Experiment,
    path: &Path,
    no_start: bool,
    source: std::path::PathBuf,
    text: String,
    every: Option<&str>,
) -> Result<i32> {
    super::validate::refuse_unknown_directives(path, exp)?;
    super::validate::refuse_preflight_errors(path, exp, "submitted")?;
    let paths = state_paths()?;
    match client::ping(&paths) {
        Ok(_) => {}
        Err(ClientError::NotRunning { .. }) if !no_start => {
            let w = start(&paths)?;
            errln!(
                "optgate: started the daemon (pid {}; log {})",
                w.pid,
                paths.log().display()
            );
        }
        Err(e) => return Err(client_error(e)),
    }
    let request = Request::Submit(SubmitRequest {
        source_path: source,
        source_text: text,
        every: every.map(str::to_string),
    });
    match client::call(&paths, &request).map_err(client_error)? {
        Response::Submitted(reply) => {
            outln!("{}", reply.id);
            if let Some(r) = &reply.recurrence {
                errln!(
                    "optgate: re-checked every {} as recurrence {} (next due {}); `optgate cancel {}` stops it",
                    r.every,
                    r.id,
                    r.next_due_at,
                    r.id
                );
            }
            Ok(exit::OK)
        }
        other => Err(anyhow::anyhow!(
            "the daemon answered {other:?} to a submission"
        )),
    }
}
