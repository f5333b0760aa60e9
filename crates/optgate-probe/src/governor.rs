//! CPU governor control that always puts things back: [`tunability`] says whether (and
//! how) this process can change the governor, [`GovernorGuard`] changes it and restores
//! the previous governors on [`GovernorGuard::restore`] or on drop, and a restore file
//! written *before* any change lets [`restore_from_file`] undo the change after the
//! process was killed outright (`kill -9`, OOM killer, node reboot of the daemon).
//!
//! ## Helper protocol
//! Where sysfs is not writable but the site provides a privileged helper (configured as
//! a command such as `["sudo", "-n", "/usr/local/sbin/optgate-governor"]`), each change
//! runs `HELPER... CPU GOVERNOR` once per cpufreq policy (CPU being the first selected
//! CPU of that policy), and must exit 0 after writing `GOVERNOR` to that CPU's `scaling_governor`. The
//! result is checked by reading the file back.

use std::collections::BTreeSet;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::cpufreq::{cpu_cpufreq_dir, policy_groups};
use crate::cpulist::format_cpulist;
use crate::fsread::{may_write, read_opt};
use crate::gpu::{find_on_path, run_with_limit};
use crate::topology::online_cpus;

/// How long the privileged helper may take for one CPU.
const HELPER_LIMIT: Duration = Duration::from_secs(30);

/// Marks restore files so that a wrong path is recognised instead of misread.
const RESTORE_FORMAT: &str = "optgate-governor-restore";
const RESTORE_VERSION: u32 = 1;

/// How a governor change would be made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TuneVia {
    /// Writing `scaling_governor` directly.
    Sysfs,
    /// Running the configured privileged helper (see the module docs for its protocol).
    Helper(Vec<String>),
}

/// Whether the governor can be changed on this node by this process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Tunability {
    /// It can, this way.
    Tunable {
        /// Direct sysfs writes, or the helper.
        via: TuneVia,
    },
    /// It cannot; the variant is *not applicable — admin-only* (or has no cpufreq).
    NotTunable {
        /// Why, in words fit for a report, naming the host and the file concerned.
        reason: String,
    },
}

/// Which CPUs a governor change covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CpuSelection {
    /// Every online CPU (what a whole-node experiment wants).
    AllOnline,
    /// These CPUs only (an allocation's cores). Every CPU sharing a cpufreq policy with
    /// one of them changes too: the hardware switches them together.
    Only(Vec<u32>),
}

/// One governor change, kept for provenance and for restoring.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GovernorChange {
    /// The policy's name (`policy0`, or `cpuN` on kernels without policies).
    pub policy: String,
    /// The selected CPUs this policy governs, ascending.
    pub cpus: Vec<u32>,
    /// The `scaling_governor` file that was written.
    pub path: PathBuf,
    /// The governor before the change.
    pub previous: String,
    /// The governor set.
    pub new: String,
}

/// Why a governor change or restore failed.
#[derive(Debug, thiserror::Error)]
pub enum GovernorError {
    /// A file could not be read, written or removed.
    #[error("cannot {op} {}", path.display())]
    Io {
        /// "read", "write", "create", "remove", "rename", "sync".
        op: &'static str,
        /// The file concerned.
        path: PathBuf,
        /// The operating system's answer.
        #[source]
        source: std::io::Error,
    },
    /// The online CPUs could not be determined.
    #[error("cannot list the online CPUs")]
    Probe(#[from] crate::ProbeError),
    /// A selected CPU has no cpufreq.
    #[error("CPU {cpu} has no cpufreq ({} does not exist)", path.display())]
    NoCpufreq {
        /// The CPU.
        cpu: u32,
        /// Its missing cpufreq directory.
        path: PathBuf,
    },
    /// The driver does not offer the requested governor.
    #[error("governor {target:?} is not offered for CPUs {cpus} (available: {})", available.join(" "))]
    Unavailable {
        /// The requested governor.
        target: String,
        /// The policy's CPUs, as a CPU list.
        cpus: String,
        /// What `scaling_available_governors` lists.
        available: Vec<String>,
    },
    /// A restore file is already there: an earlier change has not been undone yet, and
    /// recording the current (changed) governors as "previous" would lose the originals.
    #[error("restore file {} exists: restore it (restore_from_file) before changing governors again", path.display())]
    RestorePending {
        /// The restore file.
        path: PathBuf,
    },
    /// The restore file is not one this crate wrote.
    #[error("{} is not a governor restore file: {detail}", path.display())]
    RestoreFileInvalid {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        detail: String,
    },
    /// The process that wrote the restore file is still running and owns the change.
    #[error("governor change in {} belongs to running process {pid}; not restoring under it", path.display())]
    OwnerAlive {
        /// The restore file.
        path: PathBuf,
        /// Its owner.
        pid: u32,
    },
    /// The privileged helper failed.
    #[error("governor helper `{command}` failed: {detail}")]
    Helper {
        /// The command line run.
        command: String,
        /// What happened.
        detail: String,
    },
    /// After writing, the file reads back something else.
    #[error("{} reads {found:?} after setting {expected:?}", path.display())]
    NotApplied {
        /// The `scaling_governor` file.
        path: PathBuf,
        /// What was written.
        expected: String,
        /// What it now says.
        found: String,
    },
    /// Some policies could not be put back; the restore file is kept so a later
    /// [`restore_from_file`] can try again.
    #[error("could not restore {} governor(s): {}", failures.len(), failures.join("; "))]
    RestoreIncomplete {
        /// One description per policy not restored.
        failures: Vec<String>,
    },
}

fn io_err(op: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> GovernorError {
    let path = path.to_path_buf();
    move |source| GovernorError::Io { op, path, source }
}

/// What a run's step records when none of its CPUs has cpufreq (no `scaling_governor`).
pub const NO_CPUFREQ: &str = "none";

/// The governor in force on `cpus` under `root` (`/` on a real node): each CPU's
/// `scaling_governor`, [`NO_CPUFREQ`] for a CPU without one; one name when all agree,
/// else the distinct names sorted and joined by `,` (e.g. `none,performance`). Used inside
/// a scheduler's step, after the scheduler applied (or failed to apply) a governor.
pub fn governor_in_force(root: &Path, cpus: &BTreeSet<u32>) -> String {
    let seen: BTreeSet<String> = cpus
        .iter()
        .map(|&cpu| {
            read_opt(&cpu_cpufreq_dir(root, cpu).join("scaling_governor"))
                .map(|g| g.trim().to_string())
                .filter(|g| !g.is_empty())
                .unwrap_or_else(|| NO_CPUFREQ.to_string())
        })
        .collect();
    if seen.is_empty() {
        return NO_CPUFREQ.to_string();
    }
    seen.into_iter().collect::<Vec<_>>().join(",")
}

/// Says whether the governor can be changed under `root` (`/` on a real node), and how.
///
/// Tunable when every online CPU has cpufreq and either every `scaling_governor` is
/// writable by this process (checked with `access(W_OK)`, nothing is written) or a
/// `helper` command is configured and its program exists. Direct writes are preferred
/// when both would work: they need no second program to behave. Otherwise not tunable, with a
/// reason such as `admin-only: no write access to cpufreq on node17 (…/scaling_governor
/// is not writable by uid 1000)` or `no cpufreq on node17 (…/cpu0/cpufreq does not
/// exist)`.
pub fn tunability(root: &Path, helper: Option<&[String]>) -> Tunability {
    let host = crate::node_name(root).unwrap_or_else(|| "this node".to_string());
    let not = |reason: String| Tunability::NotTunable { reason };
    let online = match online_cpus(root) {
        Ok(o) if !o.is_empty() => o,
        Ok(_) => return not(format!("no online CPU found on {host}")),
        Err(e) => {
            let cause = std::error::Error::source(&e)
                .map(|c| format!(": {c}"))
                .unwrap_or_default();
            return not(format!(
                "cannot tell which CPUs are online on {host}: {e}{cause}"
            ));
        }
    };
    let (groups, without) = policy_groups(root, &online);
    if groups.is_empty() {
        let first = online.first().copied().unwrap_or(0);
        return not(format!(
            "no cpufreq on {host} ({} does not exist)",
            cpu_cpufreq_dir(root, first).display()
        ));
    }
    if let Some(&cpu) = without.first() {
        return not(format!(
            "cpufreq missing for CPUs {} on {host} ({} does not exist)",
            format_cpulist(&without),
            cpu_cpufreq_dir(root, cpu).display()
        ));
    }
    let blocked: Vec<PathBuf> = groups
        .keys()
        .map(|dir| dir.join("scaling_governor"))
        .filter(|f| !(f.is_file() && may_write(f)))
        .collect();
    let Some(first_blocked) = blocked.first() else {
        return Tunability::Tunable {
            via: TuneVia::Sysfs,
        };
    };
    if let Some(missing) = blocked.iter().find(|f| !f.is_file()) {
        return not(format!(
            "no governor control on {host} ({} does not exist)",
            missing.display()
        ));
    }
    match helper.filter(|h| !h.is_empty()) {
        Some(cmd) if helper_program(&cmd[0]).is_some() => Tunability::Tunable {
            via: TuneVia::Helper(cmd.to_vec()),
        },
        Some(cmd) => not(format!(
            "admin-only: no write access to cpufreq on {host}, and the governor helper `{}` was not found",
            cmd[0]
        )),
        None => not(format!(
            "admin-only: no write access to cpufreq on {host} ({} is not writable by uid {})",
            first_blocked.display(),
            nix::unistd::geteuid()
        )),
    }
}

/// Resolves a helper program: a path containing `/` as given, else through `PATH`.
fn helper_program(program: &str) -> Option<PathBuf> {
    if program.contains('/') {
        let p = PathBuf::from(program);
        return nix::unistd::access(&p, nix::unistd::AccessFlags::X_OK)
            .is_ok()
            .then_some(p);
    }
    find_on_path(program, &std::env::var("PATH").unwrap_or_default())
}

/// What is written to the restore file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct RestoreRecord {
    format: String,
    version: u32,
    /// The process holding the change, and its start time (clock ticks after boot, from
    /// `/proc/PID/stat`), so a recycled pid is not taken for the owner.
    owner_pid: u32,
    owner_start_ticks: Option<u64>,
    root: PathBuf,
    via: TuneVia,
    changes: Vec<GovernorChange>,
}

/// Start time of a process in clock ticks after boot, field 22 of `/proc/PID/stat`,
/// and whether it is a zombie (dead, only waiting to be reaped).
fn process_start(pid: u32) -> Option<(u64, bool)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may contain spaces and parentheses; fields after its
    // closing parenthesis are plain.
    let after = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    let state = fields.first()?;
    let start: u64 = fields.get(19)?.parse().ok()?;
    Some((start, *state == "Z" || *state == "X"))
}

fn owner_alive(record: &RestoreRecord) -> bool {
    match process_start(record.owner_pid) {
        None => false,
        Some((_, true)) => false,
        Some((start, false)) => record.owner_start_ticks.is_none_or(|s| s == start),
    }
}

/// Writes the restore file without ever replacing one that exists: the record goes to
/// a per-process temporary sibling, is synced, then hard-linked into place (a link
/// fails if the name is taken, atomically, so two processes racing cannot both win).
fn write_restore_file(path: &Path, record: &RestoreRecord) -> Result<(), GovernorError> {
    let json =
        serde_json::to_vec_pretty(record).map_err(|e| GovernorError::RestoreFileInvalid {
            path: path.to_path_buf(),
            detail: format!("cannot encode: {e}"),
        })?;
    let mut tmp_name = path.file_name().unwrap_or_default().to_os_string();
    tmp_name.push(format!(".{}.tmp", std::process::id()));
    let tmp = path.with_file_name(tmp_name);
    let written = (|| {
        let mut f = std::fs::File::create(&tmp).map_err(io_err("create", &tmp))?;
        f.write_all(&json).map_err(io_err("write", &tmp))?;
        f.sync_all().map_err(io_err("sync", &tmp))
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    let placed = match std::fs::hard_link(&tmp, path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            Err(GovernorError::RestorePending {
                path: path.to_path_buf(),
            })
        }
        // A file system without hard links: fall back to check-then-rename.
        Err(_) if path.exists() => Err(GovernorError::RestorePending {
            path: path.to_path_buf(),
        }),
        Err(_) => std::fs::rename(&tmp, path).map_err(io_err("rename", &tmp)),
    };
    let _ = std::fs::remove_file(&tmp);
    placed?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        // The new name is durable only once the directory is synced.
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
    }
    Ok(())
}

fn read_governor(path: &Path) -> Result<String, GovernorError> {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .map_err(io_err("read", path))
}

/// Writes one governor (directly or through the helper) and checks it took.
fn apply(via: &TuneVia, change_path: &Path, cpu: u32, governor: &str) -> Result<(), GovernorError> {
    match via {
        TuneVia::Sysfs => {
            std::fs::write(change_path, governor).map_err(io_err("write", change_path))?;
        }
        TuneVia::Helper(cmd) => {
            let program = helper_program(&cmd[0]).ok_or_else(|| GovernorError::Helper {
                command: cmd.join(" "),
                detail: "program not found".to_string(),
            })?;
            let cpu_arg = cpu.to_string();
            let mut args: Vec<&str> = cmd[1..].iter().map(String::as_str).collect();
            args.push(&cpu_arg);
            args.push(governor);
            run_with_limit(&program, &args, HELPER_LIMIT).map_err(|e| GovernorError::Helper {
                command: format!("{} {cpu} {governor}", cmd.join(" ")),
                detail: e.to_string(),
            })?;
        }
    }
    let found = read_governor(change_path)?;
    if found != governor {
        return Err(GovernorError::NotApplied {
            path: change_path.to_path_buf(),
            expected: governor.to_string(),
            found,
        });
    }
    Ok(())
}

/// Puts back the previous governors of `changes`, last first; returns one description
/// per policy that could not be restored.
fn put_back(via: &TuneVia, changes: &[GovernorChange]) -> Vec<String> {
    let mut failures = Vec::new();
    for c in changes.iter().rev() {
        if read_governor(&c.path).ok().as_deref() == Some(c.previous.as_str()) {
            continue;
        }
        let cpu = c.cpus.first().copied().unwrap_or(0);
        if let Err(e) = apply(via, &c.path, cpu, &c.previous) {
            failures.push(format!(
                "{} back to {:?}: {e}",
                c.path.display(),
                c.previous
            ));
        }
    }
    failures
}

fn remove_restore_file(path: &Path) -> Result<(), GovernorError> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(GovernorError::Io {
            op: "remove",
            path: path.to_path_buf(),
            source: e,
        }),
    }
}

/// Holds a governor change; restores the previous governors on [`restore`] or drop.
///
/// Give every change on a node the same restore file (e.g. one in the node-local state
/// directory): a second change is then refused while the first is held or not yet
/// undone, instead of recording already-changed governors as the originals.
///
/// [`restore`]: GovernorGuard::restore
#[derive(Debug)]
pub struct GovernorGuard {
    via: TuneVia,
    restore_file: PathBuf,
    changes: Vec<GovernorChange>,
    restored: bool,
}

impl GovernorGuard {
    /// Sets `target` on the selected CPUs by writing sysfs under `root`, after recording
    /// every policy's current governor in `restore_file`. See [`GovernorGuard::set_via`].
    pub fn set(
        root: &Path,
        target: &str,
        cpus: &CpuSelection,
        restore_file: &Path,
    ) -> Result<GovernorGuard, GovernorError> {
        Self::set_via(root, target, cpus, restore_file, &TuneVia::Sysfs)
    }

    /// Sets `target` on the selected CPUs, the way `via` says.
    ///
    /// Order of work: check every selected CPU has cpufreq and offers `target`; refuse
    /// if `restore_file` already exists (an undone change); write the restore file with
    /// the current governors; then change policy after policy, checking each. If one
    /// fails, those already changed are put back and the restore file removed before
    /// the error is returned.
    pub fn set_via(
        root: &Path,
        target: &str,
        cpus: &CpuSelection,
        restore_file: &Path,
        via: &TuneVia,
    ) -> Result<GovernorGuard, GovernorError> {
        let changes = Self::plan_changes(root, target, cpus)?;

        if restore_file.exists() {
            return Err(GovernorError::RestorePending {
                path: restore_file.to_path_buf(),
            });
        }
        let pid = std::process::id();
        let record = RestoreRecord {
            format: RESTORE_FORMAT.to_string(),
            version: RESTORE_VERSION,
            owner_pid: pid,
            owner_start_ticks: process_start(pid).map(|(s, _)| s),
            root: root.to_path_buf(),
            via: via.clone(),
            changes: changes.clone(),
        };
        write_restore_file(restore_file, &record)?;

        for (i, c) in changes.iter().enumerate() {
            if c.previous == c.new {
                continue;
            }
            let cpu = c.cpus.first().copied().unwrap_or(0);
            if let Err(e) = apply(via, &c.path, cpu, &c.new) {
                let failures = put_back(via, &changes[..i]);
                if failures.is_empty() {
                    let _ = remove_restore_file(restore_file);
                }
                return Err(e);
            }
        }
        Ok(GovernorGuard {
            via: via.clone(),
            restore_file: restore_file.to_path_buf(),
            changes,
            restored: false,
        })
    }

    /// The change each cpufreq policy of the selected CPUs would get, in CPU order;
    /// refuses a CPU without cpufreq and a policy that does not offer `target`.
    fn plan_changes(
        root: &Path,
        target: &str,
        cpus: &CpuSelection,
    ) -> Result<Vec<GovernorChange>, GovernorError> {
        let selected: BTreeSet<u32> = match cpus {
            CpuSelection::AllOnline => online_cpus(root)?,
            CpuSelection::Only(list) => list.iter().copied().collect(),
        };
        let (groups, without) = policy_groups(root, &selected);
        if let Some(&cpu) = without.first() {
            return Err(GovernorError::NoCpufreq {
                cpu,
                path: cpu_cpufreq_dir(root, cpu),
            });
        }
        let mut changes = Vec::new();
        for (dir, group_cpus) in &groups {
            let path = dir.join("scaling_governor");
            let previous = read_governor(&path)?;
            let available: Vec<String> = read_opt(&dir.join("scaling_available_governors"))
                .map(|s| s.split_whitespace().map(str::to_string).collect())
                .unwrap_or_default();
            // Some drivers list nothing; the kernel then judges the write itself.
            if !available.is_empty() && !available.iter().any(|g| g == target) {
                return Err(GovernorError::Unavailable {
                    target: target.to_string(),
                    cpus: format_cpulist(group_cpus),
                    available,
                });
            }
            let policy = dir
                .file_name()
                .and_then(|n| n.to_str())
                .filter(|n| n.starts_with("policy"))
                .map(str::to_string)
                .unwrap_or_else(|| format!("cpu{}", group_cpus.first().copied().unwrap_or(0)));
            changes.push(GovernorChange {
                policy,
                cpus: group_cpus.iter().copied().collect(),
                path,
                previous,
                new: target.to_string(),
            });
        }
        changes.sort_by_key(|c| c.cpus.first().copied());
        Ok(changes)
    }

    /// The changes made (previous and new governor per policy), for provenance.
    pub fn changes(&self) -> &[GovernorChange] {
        &self.changes
    }

    /// Puts every previous governor back and removes the restore file. Safe to call
    /// more than once. On failure the restore file stays, for [`restore_from_file`].
    pub fn restore(&mut self) -> Result<(), GovernorError> {
        if self.restored {
            return Ok(());
        }
        let failures = put_back(&self.via, &self.changes);
        if !failures.is_empty() {
            return Err(GovernorError::RestoreIncomplete { failures });
        }
        remove_restore_file(&self.restore_file)?;
        self.restored = true;
        Ok(())
    }
}

impl Drop for GovernorGuard {
    /// Restores on scope exit, unwinding included, so a failing or panicking run leaves
    /// the governors as it found them. Errors cannot be reported from here; the restore
    /// file then stays for [`restore_from_file`].
    fn drop(&mut self) {
        let _ = self.restore();
    }
}

/// Undoes the change recorded in `path` by a process that did not get to restore it
/// (killed, crashed). The daemon and `optgate run` call this at start-up.
///
/// Returns the changes that were undone; no file means nothing to undo (`Ok(vec![])`).
/// Refuses while the recording process is still running ([`GovernorError::OwnerAlive`]):
/// its guard will restore. On success the file is removed.
pub fn restore_from_file(path: &Path) -> Result<Vec<GovernorChange>, GovernorError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(GovernorError::Io {
                op: "read",
                path: path.to_path_buf(),
                source,
            });
        }
    };
    let invalid = |detail: String| GovernorError::RestoreFileInvalid {
        path: path.to_path_buf(),
        detail,
    };
    let record: RestoreRecord = serde_json::from_str(&text).map_err(|e| invalid(e.to_string()))?;
    if record.format != RESTORE_FORMAT || record.version != RESTORE_VERSION {
        return Err(invalid(format!(
            "format {:?} version {}, expected {RESTORE_FORMAT:?} version {RESTORE_VERSION}",
            record.format, record.version
        )));
    }
    if owner_alive(&record) {
        return Err(GovernorError::OwnerAlive {
            path: path.to_path_buf(),
            pid: record.owner_pid,
        });
    }
    let failures = put_back(&record.via, &record.changes);
    if !failures.is_empty() {
        return Err(GovernorError::RestoreIncomplete { failures });
    }
    remove_restore_file(path)?;
    Ok(record.changes)
}
