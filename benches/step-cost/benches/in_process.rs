//! In-process cost of the step wrapper's work around one task (criterion): spawning and
//! reaping `/bin/true` with `std::process::Command` against `optgate_wrapper::step::run_step`
//! of the same (process group, signal forwarder, thread sampler, `wait4`, the task record
//! written atomically). Each `run_step` leaves its forwarder thread parked in `sigwait`, as
//! in `optgate step` where the process then exits; the sample count is kept small for it.

use criterion::{Criterion, criterion_group, criterion_main};

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let argv = vec!["/bin/true".to_string()];
    let mut g = c.benchmark_group("one task of /bin/true");
    g.sample_size(20);
    g.measurement_time(std::time::Duration::from_secs(3));
    g.bench_function("Command::status (bare)", |b| {
        b.iter(|| std::process::Command::new("/bin/true").status().unwrap())
    });
    g.bench_function("run_step (wrapped)", |b| {
        b.iter(|| {
            let o = optgate_wrapper::step::run_step(dir.path(), 1, &argv).unwrap();
            assert_eq!(o.record.exit_code, Some(0));
            o.written.unwrap()
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
