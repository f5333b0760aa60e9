//! What the Slurm and Flux backends do alike around their commands, in one place: the
//! command runner, retry policy and starting environment they hold; submitting a rendered
//! script idempotently (a lost answer is followed by a look-up by name, not a second job);
//! finding jobs by name under the one tie-break rule ([`crate::lookup::newest_by_name`]);
//! cancelling, where a scheduler's "that job already ended" is success.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::sync::Arc;

use crate::backend::{JobId, JobSpec, SchedError};
use crate::batch::{submit_idempotently, write_job_script};
use crate::command::{CommandRunner, Invocation, Output, RetryPolicy, SystemRunner, run_checked};
use crate::directive::{Dialect, render_script};
use crate::lookup::{NamedJob, newest_by_name};

/// How a backend hands a job's script to its scheduler.
pub struct Submission {
    /// How the script is written.
    pub dialect: &'static Dialect,
    /// The command for logs and retries (`sbatch`, `flux batch`).
    pub what: &'static str,
    /// The submit command: `program`, `args`, then the script's path; run from the job's
    /// directory.
    pub program: &'static str,
    pub args: &'static [&'static str],
    /// The new job's id from the command's stdout.
    pub parse_id: fn(&str) -> Result<JobId, SchedError>,
}

/// How a backend lists its user's jobs by name.
pub struct NameQuery {
    /// The listing command (`squeue … -o '%i %j'`, `flux jobs … -o '{id.dec} {name}'`).
    pub command: Invocation,
    /// Its stdout as `ID NAME` rows.
    pub parse: fn(&str) -> Result<Vec<NamedJob>, SchedError>,
}

/// `base` without the variables `cleared` names.
pub fn env_without(
    base: &BTreeMap<OsString, OsString>,
    cleared: fn(&str) -> bool,
) -> BTreeMap<OsString, OsString> {
    base.iter()
        .filter(|(k, _)| !k.to_str().is_some_and(cleared))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// The command side of a batch backend. Blocking.
pub struct BatchClient {
    pub runner: Arc<dyn CommandRunner>,
    pub retry: RetryPolicy,
    /// The environment commands start from, before the `cleared` variables go.
    pub base_env: BTreeMap<OsString, OsString>,
    /// Whether a variable of `base_env` is kept from the commands (it would change what
    /// they do or print).
    pub cleared: fn(&str) -> bool,
}

impl BatchClient {
    /// Runs the real commands, starting from this process's environment.
    pub fn system(cleared: fn(&str) -> bool) -> BatchClient {
        BatchClient::new(
            Arc::new(SystemRunner::default()),
            RetryPolicy::default(),
            cleared,
        )
    }

    pub fn new(
        runner: Arc<dyn CommandRunner>,
        retry: RetryPolicy,
        cleared: fn(&str) -> bool,
    ) -> BatchClient {
        BatchClient {
            runner,
            retry,
            base_env: std::env::vars_os().collect(),
            cleared,
        }
    }

    /// `program args…` with the environment the commands run with.
    pub fn inv(&self, program: &str, args: impl IntoIterator<Item = String>) -> Invocation {
        Invocation::new(program, args).env(env_without(&self.base_env, self.cleared))
    }

    /// The retries' pause (cut short when optgate is stopping).
    pub fn pause(&self, d: std::time::Duration) -> bool {
        self.runner.pause(d)
    }

    /// Runs `inv` with retries; a non-zero exit is an error.
    pub fn run_checked(&self, inv: &Invocation) -> Result<Output, SchedError> {
        run_checked(self.runner.as_ref(), &self.retry, inv)
    }

    /// Renders the job's script, writes it into the job's directory and submits it from
    /// there; a retry after a lost answer first looks the job up by name (`names`). The id
    /// is recorded in the job's directory.
    pub fn submit(
        &self,
        job: &JobSpec,
        how: &Submission,
        names: &NameQuery,
    ) -> Result<JobId, SchedError> {
        let path = write_job_script(job, &render_script(how.dialect, job)?)?;
        let args = how.args.iter().map(|a| a.to_string());
        let inv = self
            .inv(how.program, args.chain([path.display().to_string()]))
            .cwd(&job.dir);
        let id = submit_idempotently(
            &self.retry,
            &|d| self.pause(d),
            how.what,
            job,
            |wanted| self.find_by_name(wanted, names),
            || (how.parse_id)(&self.runner.run(&inv)?.check(&inv)?.stdout),
        )?;
        let scheduler = how.dialect.scheduler;
        tracing::info!(job = %job.name, id = %id, "submitted to {scheduler}");
        Ok(id)
    }

    /// The job each of `names` means (the newest of a name, [`newest_by_name`]), in one
    /// listing; a name no listed job carries is absent.
    pub fn find_by_name(
        &self,
        names: &[String],
        query: &NameQuery,
    ) -> Result<BTreeMap<String, JobId>, SchedError> {
        if names.is_empty() {
            return Ok(BTreeMap::new());
        }
        let out = self.run_checked(&query.command)?;
        Ok(newest_by_name(&(query.parse)(&out.stdout)?, names))
    }

    /// Cancels `ids` with `program args… IDS…` (`what` in retry logs); a failure whose
    /// stderr only says, line by line, that a job already ended (`ended`) is success: the
    /// wish is fulfilled. No ids, no command.
    pub fn cancel(
        &self,
        (what, program, args): (&str, &str, &[&str]),
        ids: &[JobId],
        ended: fn(&str) -> bool,
    ) -> Result<(), SchedError> {
        if ids.is_empty() {
            return Ok(());
        }
        let words = args.iter().map(|a| a.to_string());
        let inv = self.inv(program, words.chain(ids.iter().map(|i| i.0.clone())));
        self.retry.run_pausing(what, &|d| self.pause(d), || {
            let out = self.runner.run(&inv)?;
            if out.success() || out.stderr_only_says(ended) {
                Ok(())
            } else {
                Err(out.into_error(&inv))
            }
        })
    }
}
