//! The measuring side of the step-cost benchmark: launches a bare command and its wrapped
//! twin in alternation (so the machine's load falls on both alike) and summarises, per
//! launch, the wall time start to reap and the CPU time (user + system, the launched
//! process and every descendant it reaped, from `wait4`).

use std::process::Command;
use std::time::Instant;

/// One launch: wall seconds from spawn to reap, CPU seconds of the launched tree.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Launch {
    pub wall_s: f64,
    pub cpu_s: f64,
}

/// Runs `argv` once (its stdout discarded) and reaps it with `wait4`; panics when it does
/// not exit 0.
pub fn launch(argv: &[String]) -> Launch {
    let started = Instant::now();
    let child = Command::new(&argv[0])
        .args(&argv[1..])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", argv[0]));
    let pid = child.id() as libc::pid_t;
    // Reaped below with wait4 (for its rusage), not through `Child::wait`.
    drop(child);
    let mut status = 0;
    // SAFETY: rusage is plain data the kernel fills in; pid is our own unreaped child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let got = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let wall_s = started.elapsed().as_secs_f64();
    assert_eq!(got, pid, "wait4 failed");
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "{argv:?} failed: status {status}"
    );
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Launch {
        wall_s,
        cpu_s: secs(usage.ru_utime) + secs(usage.ru_stime),
    }
}

/// Median, 10th and 90th percentile (nearest rank) of `xs`.
pub fn quantiles(xs: &[f64]) -> (f64, f64, f64) {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
    (at(0.5), at(0.1), at(0.9))
}

/// The arithmetic mean of `xs`.
pub fn mean(xs: &[f64]) -> f64 {
    xs.iter().sum::<f64>() / xs.len() as f64
}

/// `runs` launches of each of `bare` and `wrapped`, alternating, after one of each to warm
/// the page cache.
pub fn compare(runs: usize, bare: &[String], wrapped: &[String]) -> (Vec<Launch>, Vec<Launch>) {
    launch(bare);
    launch(wrapped);
    let (mut b, mut w) = (Vec::with_capacity(runs), Vec::with_capacity(runs));
    for _ in 0..runs {
        b.push(launch(bare));
        w.push(launch(wrapped));
    }
    (b, w)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_nearest_rank() {
        // Catches: an unsorted pick or an off-by-one rank.
        let xs: Vec<f64> = (1..=11).rev().map(f64::from).collect();
        assert_eq!(quantiles(&xs), (6.0, 2.0, 10.0));
        assert_eq!(mean(&[1.0, 2.0, 6.0]), 3.0);
    }

    #[test]
    fn a_launch_counts_the_cpu_of_what_it_reaped() {
        // Catches: CPU of the launched process alone (a wrapper's app would be missed).
        let burn = [
            "sh",
            "-c",
            "sh -c 'i=0; while [ $i -lt 30000 ]; do i=$((i+1)); done'",
        ];
        let l = launch(&burn.map(String::from));
        assert!(l.cpu_s > 0.0 && l.wall_s > 0.0, "{l:?}");
    }
}
