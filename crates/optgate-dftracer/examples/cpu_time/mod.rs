//! CPU-time measurement shared by the benchmark examples (`inflate_compare`, `scan_cost`):
//! this thread's CPU seconds from `/proc/thread-self/schedstat`, and the best of N runs.

/// CPU seconds this thread has run so far.
pub fn thread_cpu_seconds() -> f64 {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").expect("schedstat");
    let ns: u64 = text
        .split_whitespace()
        .next()
        .and_then(|f| f.parse().ok())
        .expect("schedstat's first field");
    ns as f64 / 1e9
}

/// The least CPU time of `repeat` calls of `f`, and what the last call returned.
pub fn best_of(repeat: usize, mut f: impl FnMut() -> u64) -> (f64, u64) {
    let mut best = f64::INFINITY;
    let mut value = 0;
    for _ in 0..repeat {
        let t0 = thread_cpu_seconds();
        value = f();
        best = best.min(thread_cpu_seconds() - t0);
    }
    (best, value)
}
