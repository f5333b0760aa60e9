//! The Flux backend end to end against `schedulers/flux/fake-flux` — a test double on PATH as
//! `flux`, not Flux (flux-core cannot be installed here). It checks what the double can
//! tell: the rendered script is accepted by a parser of `# flux:` directives that rejects
//! unknown options, `flux batch` ids (F58) become the decimal ids `flux jobs` reports, each
//! arm's `flux run` asks for its own cores, values survive into the app's environment, and
//! completion, cancellation, time limits and app failures end in the right state with the
//! manifests telling the story. Rendering and parsing against the documented formats are
//! tested in `optgate-sched` itself.

mod support;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use optgate_experiment::Plan;
use optgate_runner::Layout;
use optgate_runner::jobs::jobs_for_block;
use optgate_sched::batch::JOB_ID_FILE;
use optgate_sched::flux::FluxBackend;
use optgate_sched::replan::{read_manifests, runs_to_replan};
use optgate_sched::{JobId, JobSpec, JobState, Outcome, RunManifest, Scheduler};

struct Fake {
    tmp: tempfile::TempDir,
    backend: FluxBackend,
}

/// A backend whose `flux` is the fake, with its state in a fresh directory.
fn fake() -> Fake {
    let has_python = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join("python3").is_file()))
        .unwrap_or(false);
    assert!(
        has_python,
        "python3 is not on PATH; schedulers/flux/fake-flux needs it"
    );
    let tmp = tempfile::tempdir().unwrap();
    let bin = tmp.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(
        support::repo_root().join("schedulers/flux/fake-flux"),
        bin.join("flux"),
    )
    .unwrap();
    let mut env: BTreeMap<OsString, OsString> = std::env::vars_os().collect();
    let mut path = OsString::from(&bin);
    path.push(":");
    path.push(std::env::var_os("PATH").unwrap_or_default());
    env.insert("PATH".into(), path);
    env.insert("FAKE_FLUX_DIR".into(), tmp.path().join("state").into());
    Fake {
        backend: FluxBackend::new().with_base_env(env),
        tmp,
    }
}

/// Block 1's jobs of `yaml`, planned under the fake's directory.
fn jobs(f: &Fake, yaml: &str) -> Vec<JobSpec> {
    let path = support::write_experiment(f.tmp.path(), yaml);
    let exp = optgate_experiment::load(&path)
        .unwrap_or_else(|e| panic!("{e}"))
        .experiment;
    let plan = Plan::for_experiment(&exp);
    let layout = Layout::new(f.tmp.path().join("exec"));
    optgate_runner::drive::prepare(&exp, &plan, &layout).unwrap();
    jobs_for_block(
        &exp,
        &plan.blocks[0],
        &layout,
        "fx1",
        Path::new(env!("CARGO_BIN_EXE_optgate")),
    )
    .unwrap()
}

fn wait_for(b: &FluxBackend, id: &JobId, done: impl Fn(&JobState) -> bool) -> JobState {
    let give_up = Instant::now() + Duration::from_secs(300);
    loop {
        let s = b
            .poll(std::slice::from_ref(id))
            .unwrap()
            .remove(id)
            .unwrap();
        if done(&s) {
            return s;
        }
        assert!(Instant::now() < give_up, "job {id}: last state {s:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn manifest(dir: &Path) -> RunManifest {
    RunManifest::read(dir)
        .unwrap()
        .unwrap_or_else(|| panic!("no manifest in {}", dir.display()))
}

const HOSTILE: &str = "it's \"q\" $HOME `id` $(id)\nline two\t\\";

fn experiment(app: &str, allocation: &str) -> String {
    format!(
        r#"name: flux-fake
app:
  command: [bash, -c, '{app}']
metric:
  pattern: 'epoch (?P<epoch>\d+) took (?P<seconds>[0-9.]+) s'
scheduler:
  kind: flux
  tasks_per_node: 1
  cpus_per_task: 1
  time_limit: {allocation}
replicates: 5
baseline:
  env: {{ HOSTILE: {hostile} }}
variants:
  - name: wide
    dimension: l2_threading_model
    launcher: {{ cpus_per_task: 2 }}
    env: {{ OMP_NUM_THREADS: "2" }}
"#,
        hostile = serde_json::to_string(HOSTILE).unwrap()
    )
}

#[test]
fn a_block_completes_with_each_arms_own_launch_line() {
    let f = fake();
    let app = r#"printf "%s" "${HOSTILE-}" > hostile.out; printf "%s" "$FAKE_FLUX_CORES_PER_TASK" > cores.out; echo "epoch 1 took 0.01 s""#;
    let jobs = jobs(&f, &experiment(app, "10m"));
    let job = &jobs[0];
    let b = &f.backend;
    let id = b.submit(job).unwrap();
    assert!(id.0.bytes().all(|c| c.is_ascii_digit()), "decimal id: {id}");
    assert_eq!(
        std::fs::read_to_string(job.dir.join(JOB_ID_FILE)).unwrap(),
        format!("{id}\n")
    );
    assert_eq!(
        b.find_by_name(std::slice::from_ref(&job.name)).unwrap()[&job.name],
        id
    );
    assert_eq!(wait_for(b, &id, JobState::is_finished), JobState::Completed);
    for run in &job.runs {
        let m = manifest(&run.run_dir);
        assert_eq!(m.outcome, Outcome::Completed);
        assert_eq!(m.scheduler_job_id.as_deref(), Some(id.0.as_str()));
        let cores = std::fs::read_to_string(run.run_dir.join("cores.out")).unwrap();
        let hostile = std::fs::read_to_string(run.run_dir.join("hostile.out")).unwrap();
        // Variants inherit the baseline's environment: both arms see the value intact.
        assert_eq!(hostile, HOSTILE, "{}", run.run_id);
        assert_eq!(
            cores,
            if run.arm == "wide" { "2" } else { "1" },
            "{}",
            run.run_id
        );
    }
    // `flux batch` wrote the job's output where the directive said, named by the F58 id.
    let f58 = optgate_sched::flux::f58_encode(id.0.parse().unwrap(), false);
    let ascii = optgate_sched::flux::f58_encode(id.0.parse().unwrap(), true);
    assert!(
        job.dir.join(format!("flux-{f58}.out")).exists()
            || job.dir.join(format!("flux-{ascii}.out")).exists()
    );
}

#[test]
fn cancel_time_limit_and_app_failure_end_in_the_right_states() {
    let f = fake();
    let b = &f.backend;
    let sleeping = r#"echo "epoch 1 took 0.01 s"; sleep 600"#;

    // Cancelled mid-way: the first run was interrupted, the second never started.
    let cancelled: Vec<JobSpec> = jobs(&f, &experiment(sleeping, "10m"));
    let job = &cancelled[0];
    let id = b.submit(job).unwrap();
    let stdout: PathBuf = job.runs[0].run_dir.join("stdout");
    let give_up = Instant::now() + Duration::from_secs(120);
    while !std::fs::read_to_string(&stdout)
        .unwrap_or_default()
        .contains("epoch 1")
    {
        assert!(Instant::now() < give_up, "the first run never started");
        std::thread::sleep(Duration::from_millis(100));
    }
    b.cancel(std::slice::from_ref(&id)).unwrap();
    assert_eq!(wait_for(b, &id, JobState::is_finished), JobState::Cancelled);
    assert_eq!(manifest(&job.runs[0].run_dir).outcome, Outcome::Interrupted);
    assert_eq!(runs_to_replan(job, &read_manifests(job).unwrap()).len(), 2);
    // Cancelling it again is not an error.
    b.cancel(std::slice::from_ref(&id)).unwrap();
    std::fs::remove_dir_all(f.tmp.path().join("exec")).unwrap();

    // A 3-second allocation against a 10-minute app: TIMEOUT, run interrupted.
    let timed: Vec<JobSpec> = jobs(&f, &experiment(sleeping, "3s"));
    let job = &timed[0];
    let id = b.submit(job).unwrap();
    assert_eq!(wait_for(b, &id, JobState::is_finished), JobState::Timeout);
    assert_eq!(manifest(&job.runs[0].run_dir).outcome, Outcome::Interrupted);
    std::fs::remove_dir_all(f.tmp.path().join("exec")).unwrap();

    // The baseline's app fails: its run failed, the variant still ran, the job FAILED.
    let failing = r#"echo "epoch 1 took 0.01 s"; [ "$OPTGATE_ARM" != baseline ] || exit 4"#;
    let failed: Vec<JobSpec> = jobs(&f, &experiment(failing, "10m"));
    let job = &failed[0];
    let id = b.submit(job).unwrap();
    let end = wait_for(b, &id, JobState::is_finished);
    assert_eq!(end, JobState::Failed("exit code 1".into()));
    for run in &job.runs {
        let m = manifest(&run.run_dir);
        if run.arm == "baseline" {
            assert_eq!((m.outcome, m.exit_code), (Outcome::Failed, Some(4)));
        } else {
            assert_eq!(m.outcome, Outcome::Completed);
        }
    }

    // All three in one batched query; an id Flux never knew is Unknown.
    let mut ids: Vec<JobId> = Vec::new();
    for dir in std::fs::read_dir(f.tmp.path().join("state/jobs")).unwrap() {
        ids.push(JobId(dir.unwrap().file_name().into_string().unwrap()));
    }
    ids.push(JobId("12345".into()));
    let states = b.poll(&ids).unwrap();
    assert_eq!(states.len(), 4);
    assert_eq!(states[&JobId("12345".into())], JobState::Unknown);
}
