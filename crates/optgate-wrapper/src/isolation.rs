//! Keeping replicates from helping each other, applied by the run wrapper right before
//! each timed run: the arm's shared compile cache warmed once by an untimed run
//! (`caches: warm`), and the page cache of the declared inputs evicted, read or dropped
//! (`page_cache:`). What was done goes into the run's manifest.
//!
//! Why here: every backend runs its runs through `execute_prepared`, so local, Slurm and
//! Flux runs get the same treatment on the node where they run.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::manifest::{Outcome, PageCacheMode, PageCacheRecord, WarmupRecord};
use crate::process::{ProcessEnd, run_command};

/// The most files the page-cache handling visits under all `inputs` together before each
/// run: 100,000 (the limit `optgate_experiment::limits::MAX_INPUT_FILES` documents). Past it
/// the rest are left alone and the manifest says so.
pub const MAX_INPUT_FILES: usize = 100_000;

/// The script of an arm's warm-up run, beside `run.sh` (`caches: warm` only).
pub const WARMUP_SCRIPT: &str = "warmup.sh";
/// The folder of the arm's cache directory the warm-up runs in.
pub const WARMUP_DIR: &str = "warmup";
/// Present in an arm's cache directory once a warm-up run completed there.
pub const WARMED_MARKER: &str = ".optgate-warmed";
/// Held (flock) while a warm-up runs, so two runs of one arm never warm it together.
pub const WARMUP_LOCK: &str = ".optgate-warmup.lock";
/// How often a run waiting for another run's warm-up checks the lock again.
const WARMUP_LOCK_POLL: Duration = Duration::from_millis(200);

/// The files under `inputs` (folders walked), at most [`MAX_INPUT_FILES`]; the notes say
/// what was missing or left out.
fn input_files(inputs: &[PathBuf]) -> (Vec<PathBuf>, Vec<String>) {
    let mut files = Vec::new();
    let mut notes = Vec::new();
    let mut stack: Vec<PathBuf> = inputs.iter().rev().cloned().collect();
    while let Some(p) = stack.pop() {
        if files.len() >= MAX_INPUT_FILES {
            notes.push(format!(
                "more than {MAX_INPUT_FILES} input files: the rest were left alone"
            ));
            break;
        }
        match std::fs::metadata(&p) {
            Ok(m) if m.is_dir() => match std::fs::read_dir(&p) {
                Ok(entries) => {
                    let mut children: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
                    children.sort();
                    stack.extend(children.into_iter().rev());
                }
                Err(e) => notes.push(format!("cannot list {}: {e}", p.display())),
            },
            Ok(m) if m.is_file() => files.push(p),
            Ok(_) => {}
            Err(e) => notes.push(format!("input {}: {e}", p.display())),
        }
    }
    (files, notes)
}

/// Evicts one file's pages: `posix_fadvise(POSIX_FADV_DONTNEED)` over the whole file.
/// Clean pages go at once; dirty ones are written first by the kernel only when flushed,
/// so the file is synced first (an input just written by a build).
fn evict(path: &Path) -> std::io::Result<u64> {
    let f = std::fs::File::open(path)?;
    let _ = f.sync_data();
    let len = f.metadata()?.len();
    nix::fcntl::posix_fadvise(
        &f,
        0,
        0,
        nix::fcntl::PosixFadviseAdvice::POSIX_FADV_DONTNEED,
    )
    .map_err(std::io::Error::from)?;
    Ok(len)
}

/// Reads one file through, so its pages are cached.
fn read_through(path: &Path) -> std::io::Result<u64> {
    let mut f = std::fs::File::open(path)?;
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0u64;
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            return Ok(total);
        }
        total += n as u64;
    }
}

/// Drops the whole page cache (clean pages): `sync`, then `1` into
/// `/proc/sys/vm/drop_caches`. Root only.
fn drop_all() -> std::io::Result<()> {
    nix::unistd::sync();
    std::fs::write("/proc/sys/vm/drop_caches", "1\n")
}

/// Applies `mode` to the inputs' page cache. Blocking (file I/O).
pub fn apply_page_cache(mode: PageCacheMode, inputs: &[PathBuf]) -> PageCacheRecord {
    let mut record = PageCacheRecord {
        mode,
        files: 0,
        bytes: 0,
        note: None,
    };
    if mode == PageCacheMode::Leave {
        return record;
    }
    let (files, mut notes) = input_files(inputs);
    let mut per_file: fn(&Path) -> std::io::Result<u64> = match mode {
        PageCacheMode::Warm => read_through,
        _ => evict,
    };
    if mode == PageCacheMode::Drop {
        match nix::unistd::geteuid().is_root().then(drop_all) {
            Some(Ok(())) => return record_with(record, files.len(), 0, notes),
            Some(Err(e)) => notes.push(format!(
                "cannot drop the page cache: {e}; evicted the inputs instead"
            )),
            None => notes.push(
                "not root: cannot drop the page cache; evicted the inputs instead".to_string(),
            ),
        }
        per_file = evict;
    }
    let mut bytes = 0u64;
    let mut done = 0usize;
    for f in &files {
        match per_file(f) {
            Ok(b) => {
                bytes += b;
                done += 1;
            }
            Err(e) => notes.push(format!("{}: {e}", f.display())),
        }
    }
    record.bytes = bytes;
    record_with(record, done, bytes, notes)
}

fn record_with(
    mut record: PageCacheRecord,
    files: usize,
    bytes: u64,
    notes: Vec<String>,
) -> PageCacheRecord {
    record.files = files;
    record.bytes = bytes;
    record.note = (!notes.is_empty()).then(|| notes.join("; "));
    record
}

/// Waits for the arm's warm-up lock without blocking the runtime; None when cancelled.
async fn lock_warmup(
    cache_dir: &Path,
    cancel: &CancellationToken,
) -> Option<nix::fcntl::Flock<std::fs::File>> {
    let path = cache_dir.join(WARMUP_LOCK);
    loop {
        // Opened close-on-exec (std's default): the app never inherits the lock.
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .ok()?;
        match nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock) {
            Ok(lock) => return Some(lock),
            Err((_, nix::errno::Errno::EWOULDBLOCK)) => {}
            Err(_) => return None,
        }
        tokio::select! {
            _ = tokio::time::sleep(WARMUP_LOCK_POLL) => {}
            _ = cancel.cancelled() => return None,
        }
    }
}

/// `caches: warm`: runs the arm's warm-up once, untimed, in `<cache_dir>/warmup`, unless
/// another run of the arm already did (the marker), so that the timed runs find the
/// compile caches filled. None when this run did not warm up.
pub async fn warm_up_once(
    run_dir: &Path,
    cache_dir: &Path,
    launcher: &[String],
    time_limit: Option<Duration>,
    cancel: &CancellationToken,
) -> Option<WarmupRecord> {
    let warm_dir = cache_dir.join(WARMUP_DIR);
    std::fs::create_dir_all(&warm_dir).ok()?;
    let _lock = lock_warmup(cache_dir, cancel).await?;
    if cache_dir.join(WARMED_MARKER).exists() {
        return None;
    }
    let mut argv: Vec<String> = launcher.to_vec();
    argv.push("bash".into());
    argv.push(run_dir.join(WARMUP_SCRIPT).display().to_string());
    let t0 = std::time::Instant::now();
    let end = run_command(
        &argv,
        &warm_dir,
        &warm_dir.join("stdout"),
        &warm_dir.join("stderr"),
        time_limit,
        cancel,
    )
    .await
    .map(|f| f.end)
    .unwrap_or(ProcessEnd::Exited(-1));
    let outcome = match end {
        ProcessEnd::Exited(0) => Outcome::Completed,
        ProcessEnd::TimedOut => Outcome::TimedOut,
        ProcessEnd::Cancelled => Outcome::Interrupted,
        _ => Outcome::Failed,
    };
    if outcome == Outcome::Completed {
        let _ = std::fs::write(cache_dir.join(WARMED_MARKER), b"");
    }
    Some(WarmupRecord {
        outcome,
        elapsed_s: t0.elapsed().as_secs_f64(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether every page of `path` is resident, by `mincore` over a mapping of it.
    fn resident_pages(path: &Path) -> (usize, usize) {
        use std::os::fd::AsRawFd;
        let f = std::fs::File::open(path).unwrap();
        let len = f.metadata().unwrap().len() as usize;
        let page = 4096usize;
        let pages = len.div_ceil(page);
        let mut vec = vec![0u8; pages];
        // SAFETY: a read-only shared mapping of a file we hold open, unmapped below;
        // mincore writes one byte per page into `vec`, which has that many.
        unsafe {
            let addr = libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                f.as_raw_fd(),
                0,
            );
            assert_ne!(addr, libc::MAP_FAILED);
            assert_eq!(libc::mincore(addr, len, vec.as_mut_ptr()), 0);
            libc::munmap(addr, len);
        }
        (vec.iter().filter(|b| **b & 1 == 1).count(), pages)
    }

    /// A folder on the disk the repository is on (under its ignored `target/`), not a
    /// tmpfs `/tmp`, where pages cannot be evicted because they are the storage.
    fn disk_dir() -> tempfile::TempDir {
        let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/test-page-cache");
        std::fs::create_dir_all(&base).unwrap();
        tempfile::tempdir_in(base).unwrap()
    }

    #[test]
    fn cold_evicts_the_inputs_and_warm_reads_them_in() {
        let dir = disk_dir();
        let data = dir.path().join("data");
        std::fs::create_dir_all(data.join("sub")).unwrap();
        let big = data.join("sub/input.bin");
        std::fs::write(&big, vec![7u8; 4 << 20]).unwrap();
        std::fs::write(data.join("small.txt"), "x").unwrap();

        let cold = apply_page_cache(PageCacheMode::Cold, std::slice::from_ref(&data));
        assert_eq!(cold.files, 2, "{cold:?}");
        assert_eq!(cold.bytes, (4 << 20) + 1);
        assert_eq!(cold.note, None);
        let (resident, pages) = resident_pages(&big);
        assert!(
            resident < pages / 4,
            "{resident} of {pages} pages still cached"
        );

        let warm = apply_page_cache(PageCacheMode::Warm, std::slice::from_ref(&data));
        assert_eq!(warm.files, 2);
        let (resident, pages) = resident_pages(&big);
        assert_eq!(resident, pages);
    }

    #[test]
    fn leave_touches_nothing_and_missing_inputs_are_noted() {
        let r = apply_page_cache(PageCacheMode::Leave, &[PathBuf::from("/nonexistent")]);
        assert_eq!((r.files, r.note), (0, None));
        let r = apply_page_cache(PageCacheMode::Cold, &[PathBuf::from("/nonexistent/x")]);
        assert_eq!(r.files, 0);
        assert!(r.note.unwrap().contains("/nonexistent/x"));
    }

    #[tokio::test]
    async fn the_warm_up_runs_once_per_cache_dir() {
        let dir = tempfile::tempdir().unwrap();
        let run_dir = dir.path().join("run");
        let cache = dir.path().join("cache");
        std::fs::create_dir_all(&run_dir).unwrap();
        std::fs::create_dir_all(&cache).unwrap();
        let count = dir.path().join("count");
        std::fs::write(
            run_dir.join(WARMUP_SCRIPT),
            format!("echo warm >> '{}'\n", count.display()),
        )
        .unwrap();
        let cancel = CancellationToken::new();
        let first = warm_up_once(&run_dir, &cache, &[], None, &cancel).await;
        assert_eq!(first.map(|w| w.outcome), Some(Outcome::Completed));
        let second = warm_up_once(&run_dir, &cache, &[], None, &cancel).await;
        assert_eq!(second, None);
        assert_eq!(std::fs::read_to_string(&count).unwrap(), "warm\n");
    }
}
