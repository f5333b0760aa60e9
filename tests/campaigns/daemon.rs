//! Campaigns through the daemon: a campaign submitted with `optgate submit`, its daemon
//! killed with SIGKILL in the middle of its memory stage and started again, ends with the
//! same stages and winners as `optgate run` gives (tests/campaigns/foreground.rs), every step created
//! once and no run run twice; `status` shows its current stage, `report ID` the campaign
//! report; `cancel ID` stops a campaign and its current stage's experiment. (Short test
//! names: the state directory's socket path must fit in 107 bytes.)

use crate::campaign_common;
use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::Duration;

use campaign_common::*;
use serde_json::Value;
use support::*;

const DEADLINE: Duration = Duration::from_secs(300);

struct Daemon {
    home: PathBuf,
    child: Child,
}

impl Daemon {
    fn start(home: &Path) -> Daemon {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(home.join("test-daemon.log"))
            .unwrap();
        let child = optgate()
            .args(["daemon", "--foreground"])
            .env("OPTGATE_HOME", home)
            .env("OPTGATE_LOG", "info")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        let d = Daemon {
            home: home.to_path_buf(),
            child,
        };
        wait_for("the daemon to answer", DEADLINE, || {
            d.cli(&["status", "--json"]).status.success().then_some(())
        });
        d
    }

    fn cli(&self, args: &[&str]) -> std::process::Output {
        optgate()
            .args(args)
            .env("OPTGATE_HOME", &self.home)
            .output()
            .unwrap()
    }

    fn kill9(mut self) {
        self.child.kill().unwrap(); // SIGKILL, to our own child
        self.child.wait().unwrap();
    }

    fn stop(mut self) {
        let o = self.cli(&["daemon", "stop"]);
        assert!(o.status.success(), "{}", stderr(&o));
        self.child.wait().unwrap();
    }

    fn status(&self, id: &str) -> Value {
        let o = self.cli(&["status", id, "--json"]);
        assert!(o.status.success(), "{}", stderr(&o));
        serde_json::from_slice(&o.stdout).unwrap()
    }

    fn campaign(&self, id: &str) -> Value {
        self.status(id)["campaigns"][0].clone()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn submit(d: &Daemon, dir: &Path, name: &str) -> String {
    let p = dir.join(format!("{name}.yaml"));
    std::fs::write(&p, campaign_yaml(name, &dir.join("ledger"))).unwrap();
    let o = d.cli(&["submit", p.to_str().unwrap(), "--no-start"]);
    assert!(o.status.success(), "{}", stderr(&o));
    stdout(&o).trim().to_string()
}

#[test]
fn kill9_mid_stage() {
    let dir = tempfile::tempdir().unwrap();
    let home = private_home();
    let d = Daemon::start(&home);
    let id = submit(&d, dir.path(), "crashy");
    // Mid-stage: the memory stage has started and recorded some of its runs.
    wait_for("the memory stage to be under way", DEADLINE, || {
        let s = d.status(&id);
        let c = &s["campaigns"][0];
        let mid = c["current"] == "stage 2/3 (memory)"
            && s["experiments"].as_array()?.iter().any(|e| {
                e["name"] == "crashy-2-memory" && e["runs"]["done"].as_u64().unwrap_or(0) >= 2
            });
        mid.then_some(())
    });
    d.kill9();
    let d = Daemon::start(&home);
    let c = wait_for("the campaign to end", DEADLINE, || {
        let c = d.campaign(&id);
        (c["state"] != "running").then_some(c)
    });
    assert_eq!(c["state"], "finished", "{c:#}");
    let steps = c["experiments"].as_array().unwrap();
    assert_eq!(
        steps.len(),
        4,
        "three stages and the confirmation, each once: {c:#}"
    );
    let o = d.cli(&["report", &id, "--format", "json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    check_campaign(&report["campaign"]);
    // No run was run twice, across the kill.
    let ledger = std::fs::read_to_string(dir.path().join("ledger")).unwrap();
    let mut lines: Vec<&str> = ledger.lines().collect();
    let n = lines.len();
    lines.sort();
    lines.dedup();
    assert_eq!(lines.len(), n, "a run ran twice:\n{ledger}");
    let md = d.cli(&["report", &id, "--format", "markdown"]);
    assert!(
        stdout(&md).contains("## Chain of baselines"),
        "{}",
        stdout(&md)
    );
    // The default is the plain table, as for an experiment, not the Markdown.
    let table = stdout(&d.cli(&["report", &id]));
    assert!(
        table.contains("\nChain of baselines\n") && !table.contains("## "),
        "{table}"
    );
    d.stop();
}

#[test]
fn cancel_stops() {
    let dir = tempfile::tempdir().unwrap();
    let home = private_home();
    let d = Daemon::start(&home);
    let id = submit(&d, dir.path(), "stopped");
    wait_for("the first stage", DEADLINE, || {
        (d.campaign(&id)["current"] == "stage 1/3 (io)").then_some(())
    });
    let o = d.cli(&["cancel", &id]);
    assert!(o.status.success(), "{}", stderr(&o));
    let s = wait_for("the stage to end", DEADLINE, || {
        let s = d.status(&id);
        (s["experiments"][0]["state"] == "cancelled").then_some(s)
    });
    assert_eq!(s["campaigns"][0]["state"], "cancelled", "{s:#}");
    // No later stage is created by the passes that follow: a second campaign submitted
    // now gets its first stage and runs in them, and the cancelled one still has one step.
    let later = submit(&d, dir.path(), "later");
    wait_for(
        "passes after the cancel (the later campaign's runs)",
        DEADLINE,
        || {
            let s = d.status(&later);
            let done = s["experiments"][0]["runs"]["done"].as_u64().unwrap_or(0);
            (done >= 1).then_some(())
        },
    );
    assert_eq!(d.campaign(&id)["experiments"].as_array().unwrap().len(), 1);
    let o = d.cli(&["cancel", &later]);
    assert!(o.status.success(), "{}", stderr(&o));
    d.stop();
}
