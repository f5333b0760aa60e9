//! Helpers shared by the end-to-end tests: the real `optgate` binary, the repository root,
//! and experiment files written into temporary directories.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The real binary, with a private state directory for the calling test (see
/// [`private_home`]); a test that runs a daemon sets its own `OPTGATE_HOME` after this.
pub fn optgate() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_optgate"));
    c.env_remove("OPTGATE_LOG")
        .env_remove("RUST_LOG")
        .env("OPTGATE_HOME", private_home())
        // A daemon it starts asks Slurm and Flux every second, not every 10: the tests'
        // clusters are this machine's own, and their jobs last seconds.
        .env("OPTGATE_CLUSTER_POLL", "1s");
    c
}

/// A state directory of the calling test alone, named after it, under Cargo's scratch
/// directory for integration tests: a test never takes the real user's
/// `~/.local/state/optgate` (its machine-wide lock, its daemon) nor another test's.
pub fn private_home() -> PathBuf {
    use std::os::unix::fs::DirBuilderExt;
    let test = std::thread::current()
        .name()
        .unwrap_or("main")
        .replace("::", "-");
    let exe = std::env::current_exe().unwrap();
    let binary = exe.file_stem().unwrap().to_string_lossy().into_owned();
    let home = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("optgate-home")
        .join(format!("{binary}-{test}"));
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&home)
        .unwrap();
    home
}

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

pub fn run(args: &[&str]) -> Output {
    optgate().args(args).output().expect("optgate starts")
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Writes `yaml` as `exp.yaml` in `dir` and returns its path.
pub fn write_experiment(dir: &Path, yaml: &str) -> PathBuf {
    let p = dir.join("exp.yaml");
    std::fs::write(&p, yaml).unwrap();
    p
}

/// A tiny app in bash that prints `epochs` epoch lines; extra shell code runs first.
pub fn fake_app_experiment(name: &str, extra: &str) -> String {
    format!(
        r#"name: {name}
app:
  command: [bash, -c, 'for e in 1 2 3; do echo "epoch $e took 0.0$e s"; done']
metric:
  pattern: 'epoch (?P<epoch>\d+) took (?P<seconds>[0-9.]+) s'
replicates: 5
variants:
  - name: v1
    dimension: l2_threading_model
    env: {{ X: "1" }}
{extra}"#
    )
}

/// Writes `yaml` as `dir/exp.yaml` and runs `optgate run` on it into `dir/exec` (quietly),
/// with `extra` arguments; returns what the binary printed and the execution's root.
pub fn run_experiment(dir: &Path, yaml: &str, extra: &[&str]) -> (Output, PathBuf) {
    let p = write_experiment(dir, yaml);
    let root = dir.join("exec");
    let mut args = vec![
        "run",
        p.to_str().unwrap(),
        "--out",
        root.to_str().unwrap(),
        "--quiet",
    ];
    args.extend_from_slice(extra);
    (run(&args), root)
}

/// `optgate ARGS` against the daemon of state directory `home`.
pub fn cli(home: &Path, args: &[&str]) -> Output {
    optgate()
        .args(args)
        .env("OPTGATE_HOME", home)
        .output()
        .unwrap()
}

/// Stops the background daemon of `home` when the test ends, passed or not.
pub struct StopOnDrop(pub PathBuf);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        let _ = cli(&self.0, &["daemon", "stop"]);
    }
}

/// `optgate status ID --json` of the daemon of `home`: the experiment's object.
pub fn status(home: &Path, id: &str) -> serde_json::Value {
    let o = cli(home, &["status", id, "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap()["experiments"][0].clone()
}

/// `optgate submit EXP` (starting the daemon when none runs): the experiment's id.
pub fn submit(home: &Path, exp: &Path) -> String {
    let o = cli(home, &["submit", exp.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    stdout(&o).trim().to_string()
}

/// Polls `optgate status ID --json` every 500 ms until `done` holds for the experiment,
/// and returns its status; fails naming `what` and the last status after 10 minutes.
pub fn wait_until(
    home: &Path,
    id: &str,
    what: &str,
    done: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(600);
    loop {
        let s = status(home, id);
        if done(&s) {
            return s;
        }
        assert!(
            std::time::Instant::now() < give_up,
            "gave up waiting for {what}: {s:#}"
        );
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
}

/// Whether an experiment's status is one of the states it ends in.
pub fn ended(s: &serde_json::Value) -> bool {
    ["decided", "failed", "budget_exhausted", "cancelled"]
        .contains(&s["state"].as_str().unwrap_or(""))
}

/// A process a test may signal although it did not spawn it: its pid and the start time
/// `/proc/PID/stat` gave when the test found it, with what it was checked to be. Every
/// signal re-reads that start time first and is not sent when it changed (the pid now
/// names another process) — the check the product makes with a job's `job.pid`.
///
/// The rule for every test: signal a child it spawned (`Child::kill`, or its
/// `child.id()`), or a `CheckedProcess`; signal process groups only through
/// [`CheckedProcess::signal_group`] (`optgate_wrapper::signal::signal_group`), never by running
/// `kill` with a negative number — procps `kill -KILL -1234` may read the number as options
/// and become `kill(-1)`, which as root reaches every process on the machine.
/// `tests/no-stray-signals.sh` (run by `tests/run-all.sh`) fails on any other signal.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CheckedProcess {
    pub pid: i32,
    pub start_time: u64,
}

/// Start time of `pid` (field 22 of `/proc/PID/stat`, clock ticks since boot) and whether
/// it is still running (not a zombie); `None` when there is no such process.
pub fn proc_start_time(pid: i32) -> Option<(u64, bool)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: count from the last `)`.
    let fields: Vec<&str> = text[text.rfind(')')? + 1..].split_whitespace().collect();
    let state = fields.first()?.chars().next()?;
    let start = fields.get(19)?.parse().ok()?;
    Some((start, !matches!(state, 'Z' | 'X')))
}

/// The start time of this test process: whatever the test started began no earlier.
pub fn own_start_time() -> u64 {
    proc_start_time(std::process::id() as i32)
        .expect("/proc/self/stat")
        .0
}

impl CheckedProcess {
    /// The process a product's pid file recorded as `PID START` (a local job's `job.pid`):
    /// `None` unless that pid still runs with that start time.
    pub fn recorded(pid: i32, start_time: u64) -> Option<Self> {
        let me = Self { pid, start_time };
        me.is_alive().then_some(me)
    }

    /// The running process `pid`, found now (from a pid file without a start time): it
    /// must have started no earlier than `not_before` (the start time of what the test
    /// spawned, see [`proc_start_time`]) and its command line must contain `cmdline_has`.
    pub fn found(pid: i32, not_before: u64, cmdline_has: &str) -> Result<Self, String> {
        let (start_time, running) =
            proc_start_time(pid).ok_or_else(|| format!("no process {pid}"))?;
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline"))
            .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
            .unwrap_or_default();
        if !running || start_time < not_before || !cmdline.contains(cmdline_has) {
            return Err(format!(
                "process {pid} (started at tick {start_time}, running: {running}, command \
                 line {cmdline:?}) is not the one expected: started from tick {not_before}, \
                 running `{cmdline_has}`"
            ));
        }
        Ok(Self { pid, start_time })
    }

    /// The daemon of state directory `home` that `optgate submit` or `optgate daemon`
    /// started: its pid from `daemon.pid` (waited for), checked to be the `optgate` binary
    /// of this build, started during this test. Call it right after the command returns.
    pub fn daemon_of(home: &Path) -> Self {
        let file = home.join("daemon.pid");
        let pid: i32 = wait_for(
            &format!("the daemon's pid in {}", file.display()),
            std::time::Duration::from_secs(30),
            || std::fs::read_to_string(&file).ok()?.trim().parse().ok(),
        );
        let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap_or_default();
        let ours = Path::new(env!("CARGO_BIN_EXE_optgate"))
            .canonicalize()
            .unwrap();
        assert_eq!(
            exe,
            ours,
            "process {pid} of {} is not optgate",
            file.display()
        );
        Self::found(pid, own_start_time(), "daemon").unwrap()
    }

    /// Whether the process still runs and is the one found (same start time).
    pub fn is_alive(&self) -> bool {
        proc_start_time(self.pid) == Some((self.start_time, true))
    }

    /// Sends `signal` to the process; `false` (nothing sent) when it is gone or its pid
    /// now names another process.
    pub fn signal(&self, signal: nix::sys::signal::Signal) -> bool {
        self.is_alive()
            && nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.pid), signal).is_ok()
    }

    /// Sends `signal` to the process group this process leads (through
    /// `optgate_wrapper::signal::signal_group`); `false` when it is gone, its pid names
    /// another process, or it leads no group.
    pub fn signal_group(&self, signal: nix::sys::signal::Signal) -> bool {
        let pid = nix::unistd::Pid::from_raw(self.pid);
        self.is_alive()
            && nix::unistd::getpgid(Some(pid)) == Ok(pid)
            && optgate_wrapper::signal::signal_group(pid, signal).is_ok()
    }

    /// Waits (bounded) until the process has ended.
    pub fn wait_gone(&self, what: &str) {
        wait_for(what, std::time::Duration::from_secs(30), || {
            (!self.is_alive()).then_some(())
        })
    }
}

/// Polls `probe` every 50 ms until it returns `Some`, and returns that; fails the test
/// with `what` when `deadline` passes first. The one way a test waits for a condition
/// (never a sleep before an assertion).
pub fn wait_for<T>(
    what: &str,
    deadline: std::time::Duration,
    mut probe: impl FnMut() -> Option<T>,
) -> T {
    let give_up = std::time::Instant::now() + deadline;
    loop {
        if let Some(v) = probe() {
            return v;
        }
        assert!(
            std::time::Instant::now() < give_up,
            "gave up after {deadline:?} waiting for {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Polls `backend` (one batched query every 300 ms, gentle on a real scheduler) until job
/// `id`'s state satisfies `done`, and returns that state; fails naming `what` and the last
/// state seen after 10 minutes, a limit that only guards against hanging forever.
pub fn wait_for_job(
    backend: &dyn optgate_sched::Scheduler,
    id: &optgate_sched::JobId,
    what: &str,
    done: impl Fn(&optgate_sched::JobState) -> bool,
) -> optgate_sched::JobState {
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(600);
    loop {
        let s = backend
            .poll(std::slice::from_ref(id))
            .unwrap()
            .remove(id)
            .unwrap();
        if done(&s) {
            return s;
        }
        assert!(
            std::time::Instant::now() < give_up,
            "job {id} never became {what}; last state {s:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
}

/// The manifest of the run in `dir`, once it is there (a scheduler may report a job ended a
/// moment before its last file lands on a shared file system).
pub fn run_manifest(dir: &Path) -> optgate_wrapper::manifest::RunManifest {
    wait_for_file(&dir.join("manifest.json"));
    optgate_wrapper::manifest::RunManifest::read(dir)
        .unwrap()
        .unwrap()
}

/// Waits (up to 2 minutes) until `path` exists.
pub fn wait_for_file(path: &Path) {
    let what = format!("{} to appear", path.display());
    wait_for(&what, std::time::Duration::from_secs(120), || {
        path.exists().then_some(())
    });
}

/// Each run of `job` with the outcome its `manifest.json` says (`None`: no manifest), in
/// the job's order. This is what the engine reads when a job ends (`jobplan::outcomes`):
/// a run whose outcome is final (completed, failed, timed out) is kept; every other run
/// goes back to pending and runs again in the job's next attempt.
pub fn run_outcomes(
    job: &optgate_sched::JobSpec,
) -> Vec<(String, Option<optgate_wrapper::manifest::Outcome>)> {
    job.runs
        .iter()
        .map(|r| {
            let m = optgate_wrapper::manifest::RunManifest::read(&r.run_dir)
                .unwrap_or_else(|e| panic!("{}: {e}", r.run_dir.display()));
            (r.run_id.clone(), m.map(|m| m.outcome))
        })
        .collect()
}

/// The runs of `job` the engine would run again after it ended: those without a final
/// outcome in their manifest (see [`run_outcomes`]).
pub fn runs_left_to_run(job: &optgate_sched::JobSpec) -> Vec<String> {
    run_outcomes(job)
        .into_iter()
        .filter(|(_, o)| !o.is_some_and(|o| o.is_final()))
        .map(|(id, _)| id)
        .collect()
}

/// The jobs of block 1 of `exp` as the engine submits them first: `plan` recorded as
/// `optgate submit` records it (`work::plan_rows`), the experiment loaded as the engine
/// loads it (`Work::load`, id `id`, runs under `layout`, prepared already), its jobs
/// planned by `jobplan::plan_jobs` with every run of block 1 pending and no job yet, and
/// each job's run files written by `jobs::write_job_files` as just before `submit`. The
/// backend tests submit these themselves.
pub fn first_block_jobs(
    exp: &optgate_experiment::Experiment,
    plan: &optgate_experiment::Plan,
    layout: &optgate_evidence::Layout,
    id: &str,
) -> Vec<optgate_sched::JobSpec> {
    use optgate_daemon::work::{Work, plan_rows};
    use optgate_store::{ExperimentRow, ExperimentState};
    let row = ExperimentRow {
        id: id.to_string(),
        name: exp.name().to_string(),
        source_path: exp.source.display().to_string(),
        source_sha256: exp.source_sha256.clone(),
        root: layout.root.display().to_string(),
        scheduler: exp.kind,
        state: ExperimentState::Running,
        state_reason: None,
        replicates: exp.replicates,
        max_replicates: exp.max_replicates,
        created_at: String::new(),
        updated_at: String::new(),
    };
    let backend = optgate_sched::factory::backend_for(
        exp.kind,
        &layout.root,
        tokio_util::sync::CancellationToken::new(),
    );
    let work = Work::load(&row, &exp.source_text, backend).unwrap_or_else(|e| panic!("{e}"));
    let (blocks, runs) = plan_rows(plan, 0, |_| false);
    let pending: std::collections::BTreeSet<String> = runs
        .into_iter()
        .filter(|r| r.block == 1)
        .map(|r| r.run_id)
        .collect();
    let bin = Path::new(env!("CARGO_BIN_EXE_optgate"));
    let (_, specs, already) =
        optgate_daemon::jobplan::plan_jobs(&work, &blocks, &[], &pending, bin);
    assert!(already.is_empty(), "nothing has run yet: {already:?}");
    for spec in &specs {
        optgate_evidence::jobs::write_job_files(&work.exp, &work.layout, spec)
            .unwrap_or_else(|e| panic!("{}: {e}", spec.name));
    }
    specs
}

/// Brokers the multi-node Flux tests' instance must have: 2 for an experiment's nodes, 2
/// more so that blocks can queue and run side by side as on a real cluster.
pub const BROKERS: u32 = 4;

pub const FOUR_BROKER_SETUP: &str = "run `eval \"$(sudo schedulers/flux/setup-one-node.sh --brokers 4)\"` (it \
                     starts a 4-broker test instance and prints `export OPTGATE_FLUX_URI_4=…`; \
                     tests/run-all.sh does this, and installs mpich/libmpich-dev) and try again";

/// The URI of the 4-broker instance; fails (never skips) when none answers there.
pub fn require_four_brokers() -> String {
    let uri = std::env::var("OPTGATE_FLUX_URI_4")
        .unwrap_or_else(|_| panic!("OPTGATE_FLUX_URI_4 is not set: {FOUR_BROKER_SETUP}"));
    let out = std::process::Command::new("flux")
        .args(["getattr", "size"])
        .env("FLUX_URI", &uri)
        .output()
        .unwrap_or_else(|e| panic!("`flux` does not run ({e}): {FOUR_BROKER_SETUP}"));
    assert!(
        out.status.success(),
        "no Flux instance answers at OPTGATE_FLUX_URI_4={uri:?} ({}): {FOUR_BROKER_SETUP}",
        String::from_utf8_lossy(&out.stderr).trim()
    );
    let size = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert_eq!(
        size,
        BROKERS.to_string(),
        "the instance at {uri} has {size} brokers"
    );
    let mpicc = std::process::Command::new("mpicc").arg("-show").output();
    assert!(
        mpicc.is_ok_and(|o| o.status.success()),
        "`mpicc` is missing (apt-get install mpich libmpich-dev): {FOUR_BROKER_SETUP}"
    );
    uri
}

/// Fails (never skips) unless `cmd ARGS` succeeds: the cluster tier's check that what
/// `tests/run-all.sh` sets up is there, saying `how` to set it up.
fn require(cmd: &str, args: &[&str], how: &str) {
    let out = std::process::Command::new(cmd).args(args).output();
    let ok = out.as_ref().is_ok_and(|o| o.status.success());
    assert!(ok, "`{cmd} {}` failed ({out:?}): {how}", args.join(" "));
}

/// A running Slurm (`sinfo -h` answers), or the test fails saying how to start one.
pub fn require_slurm() {
    require(
        "sinfo",
        &["-h"],
        "these tests need a running Slurm: run `sudo schedulers/slurm/setup-one-node.sh` \
         (tests/run-all.sh does)",
    );
}

/// A Flux instance at FLUX_URI (`flux getattr size` answers), or the test fails saying how.
pub fn require_flux() {
    require(
        "flux",
        &["getattr", "size"],
        &format!(
            "these tests need a Flux instance (FLUX_URI={:?}): run `eval \"$(schedulers/flux/setup-one-node.sh)\"` \
             (tests/run-all.sh does)",
            std::env::var("FLUX_URI").unwrap_or_default()
        ),
    );
}

/// Two arms on scheduler `kind` whose runs take `sleep` seconds; the variant v1 is ~30 %
/// faster in every block, so it must be accepted. `extra` adds `scheduler` settings
/// (`, key: value` pairs).
pub fn two_arm_experiment(name: &str, kind: &str, sleep: &str, extra: &str) -> String {
    format!(
        r#"name: {name}
app:
  command: [bash, -c, 'sleep {sleep}; if [ "${{X:-0}}" = 1 ]; then b=$((700 + OPTGATE_BLOCK * 7)); else b=$((1000 + OPTGATE_BLOCK * 3)); fi; for e in 1 2 3; do echo "epoch $e took $((b + e * 11)).0 s"; done']
  time_limit: 2m
metric:
  pattern: 'epoch (?P<epoch>\d+) took (?P<seconds>[0-9.]+) s'
scheduler: {{ kind: {kind}, time_limit: 10m{extra} }}
replicates: 5
variants:
  - name: v1
    dimension: l2_threading_model
    env: {{ X: "1" }}
"#
    )
}

/// The machine, taken alone: a test that measures (a real OpenMP baseline it expects to
/// be fast, the load other work puts on the node) holds this for its whole run, so the
/// tests of its binary that measure take the machine in turn rather than share its cores.
static MEASURING: std::sync::Mutex<()> = std::sync::Mutex::new(());

pub fn measuring() -> std::sync::MutexGuard<'static, ()> {
    MEASURING.lock().unwrap_or_else(|p| p.into_inner())
}

/// Tests at once, per CPU, in a binary whose tests mostly wait — on a daemon's polls, on a
/// recurrence's due times, on a stall they planted — rather than compute.
pub const WAITING_TESTS_PER_CPU: usize = 2;

/// Sets `RUST_TEST_THREADS` to [`WAITING_TESTS_PER_CPU`] × this machine's CPUs unless the
/// caller set it (`--test-threads` still wins over both). libtest reads the variable when
/// `main` starts, so [`waiting_tests_at_once!`] runs this just before, as an ELF
/// constructor: one thread, no other code yet running, so setting the variable races with
/// nothing.
pub extern "C" fn run_waiting_tests_at_once() {
    if std::env::var_os("RUST_TEST_THREADS").is_none() {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        // SAFETY: before `main`, on the only thread; nothing reads the environment yet.
        unsafe {
            std::env::set_var(
                "RUST_TEST_THREADS",
                (WAITING_TESTS_PER_CPU * cpus).to_string(),
            )
        };
    }
}

/// Said once at the root of a test binary whose tests mostly wait: runs
/// [`run_waiting_tests_at_once`] before `main` (an `.init_array` entry).
#[allow(unused_macros)]
macro_rules! waiting_tests_at_once {
    () => {
        #[used]
        #[unsafe(link_section = ".init_array")]
        static WAITING_TESTS_AT_ONCE: extern "C" fn() = $crate::support::run_waiting_tests_at_once;
    };
}
#[allow(unused_imports)]
pub(crate) use waiting_tests_at_once;
