//! The threads of an app's process tree, counted while it runs (`ThreadSampler`: the most
//! threads of one process, the median runnable threads), and the CPUs this process may run
//! on. Shared by `optgate step` (a launched task) and the run wrapper (a run without a
//! launcher), so a local run's figures mean what a task's do.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

/// How often the app's threads are counted (`/proc/PID/stat` of the app and each of its
/// descendants). Threads that live shorter than this may be missed.
pub const THREAD_SAMPLE_INTERVAL: Duration = Duration::from_millis(100);

/// Counts the threads of the app's tree every [`THREAD_SAMPLE_INTERVAL`]: `optgate step`
/// for a task, and the run wrapper for a run without a launcher (the same sampler, so a
/// local run's figures mean what a task's do).
pub(crate) struct ThreadSampler {
    stop: Arc<AtomicBool>,
    most: Arc<AtomicU32>,
    runnable: Arc<std::sync::Mutex<Vec<u32>>>,
    thread: std::thread::JoinHandle<()>,
}

/// What the samples of a tree's threads found.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SampledThreads {
    /// The most threads one process of the tree had at any sample (None: no sample saw it).
    pub threads_max: Option<u32>,
    /// The median over the samples of the tree's runnable threads (state `R`, running or
    /// waiting for a CPU: the cores the tree asked for, whatever it got); None: no sample.
    pub runnable_median: Option<f64>,
}

impl ThreadSampler {
    pub(crate) fn start(root: i32) -> ThreadSampler {
        let stop = Arc::new(AtomicBool::new(false));
        let most = Arc::new(AtomicU32::new(0));
        let runnable = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (s, m, r) = (stop.clone(), most.clone(), runnable.clone());
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::SeqCst) {
                if let Some(sample) = sample_tree(root) {
                    m.fetch_max(sample.most_threads, Ordering::SeqCst);
                    if let Ok(mut v) = r.lock() {
                        v.push(sample.runnable);
                    }
                }
                std::thread::park_timeout(THREAD_SAMPLE_INTERVAL);
            }
        });
        ThreadSampler {
            stop,
            most,
            runnable,
            thread,
        }
    }

    /// Stops sampling and says what the samples found.
    pub(crate) fn stop(self) -> SampledThreads {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.thread().unpark();
        let _ = self.thread.join();
        let runnable = self.runnable.lock().map(|v| v.clone()).unwrap_or_default();
        SampledThreads {
            threads_max: Some(self.most.load(Ordering::SeqCst)).filter(|n| *n > 0),
            runnable_median: median_count(runnable),
        }
    }
}

/// The median of sample counts (None when there are none).
fn median_count(mut v: Vec<u32>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_unstable();
    let n = v.len();
    Some(if n % 2 == 1 {
        f64::from(v[n / 2])
    } else {
        0.5 * (f64::from(v[n / 2 - 1]) + f64::from(v[n / 2]))
    })
}

/// One sample of a tree: the most threads of one process, the runnable threads of all.
struct TreeSample {
    most_threads: u32,
    runnable: u32,
}

/// One sample of the app's tree (`root` and its descendants, found through
/// `/proc/PID/task/TID/children`): the most threads any one process has now, from each
/// one's `/proc/PID/stat`, and how many of all their threads are runnable, from each
/// thread's `/proc/PID/task/TID/stat`. The cost is the tree's size, not the node's
/// process count. None when no process of the tree was seen (it ended).
fn sample_tree(root: i32) -> Option<TreeSample> {
    let mut seen = std::collections::HashSet::new();
    let mut todo = vec![root];
    let mut most = None;
    let mut runnable = 0;
    while let Some(pid) = todo.pop() {
        if !seen.insert(pid) {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        if let Some(n) = threads_of(&stat) {
            most = most.max(Some(n));
        }
        let (children, running) = threads_children_and_runnable(pid);
        todo.extend(children);
        runnable += running;
    }
    most.map(|most_threads| TreeSample {
        most_threads,
        runnable,
    })
}

/// The children of every thread of `pid`, and how many of its threads are runnable.
fn threads_children_and_runnable(pid: i32) -> (Vec<i32>, u32) {
    let Ok(threads) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return (Vec::new(), 0);
    };
    let mut children = Vec::new();
    let mut runnable = 0;
    for t in threads.flatten() {
        if let Ok(stat) = std::fs::read_to_string(t.path().join("stat"))
            && state_of(&stat) == Some("R")
        {
            runnable += 1;
        }
        if let Ok(text) = std::fs::read_to_string(t.path().join("children")) {
            children.extend(
                text.split_whitespace()
                    .filter_map(|p| p.parse::<i32>().ok()),
            );
        }
    }
    (children, runnable)
}

/// The state letter of a `/proc/…/stat` line (after the command's closing parenthesis).
pub fn state_of(stat: &str) -> Option<&str> {
    stat.rsplit_once(')')?.1.split_whitespace().next()
}

/// The thread count of a live process's `/proc/PID/stat` line: after the command's
/// closing parenthesis, field 3 is the state, 20 the thread count. None for a zombie.
pub fn threads_of(stat: &str) -> Option<u32> {
    let (_, rest) = stat.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    if matches!(fields.first(), Some(&"Z") | Some(&"X")) {
        return None;
    }
    fields.get(17)?.parse().ok()
}

/// The CPUs this process may run on (`sched_getaffinity`): the step's, not the node's.
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: `cpu_set_t` is plain data the kernel fills in; the size passed is its own.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|c| libc::CPU_ISSET(*c, &set))
            .collect()
    }
}

/// The CPU numbers as a kernel-style list: `[0, 1, 2, 3, 8]` → `0-3,8` (the probe's
/// formatter, one home for the kernel's list syntax).
pub fn format_cpu_list(cpus: &[usize]) -> String {
    let cpus: Vec<u32> = cpus.iter().filter_map(|&c| u32::try_from(c).ok()).collect();
    optgate_probe::format_cpulist(&cpus)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_are_written_as_ranges() {
        assert_eq!(format_cpu_list(&[3, 0, 1, 2, 8, 10, 11]), "0-3,8,10-11");
        assert_eq!(format_cpu_list(&[5]), "5");
        assert_eq!(format_cpu_list(&[]), "");
    }

    #[test]
    fn the_thread_count_comes_from_after_the_command_name() {
        // A command name with spaces and a parenthesis, as /proc shows it.
        let stat = "4242 (my (app) x) S 1 4240 4240 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 6 0 \
                    123 4096 100 18446744073709551615";
        assert_eq!(threads_of(stat), Some(6));
        let zombie = "4243 (a) Z 1 4240 4240 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 1 0 0";
        assert_eq!(threads_of(zombie), None);
        assert_eq!(threads_of("garbage"), None);
    }

    #[test]
    fn this_process_is_allowed_at_least_one_cpu() {
        let cpus = allowed_cpus();
        assert!(!cpus.is_empty());
        assert!(cpus.len() <= std::thread::available_parallelism().unwrap().get());
    }
}
