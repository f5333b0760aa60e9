//! Writes a deterministic synthetic multi-rank DFTracer 2.x trace (`.pfw.gz`, one file
//! per rank) for the benchmark in `benches/dftracer/run.sh`.
//!
//! Usage: gen_trace OUT_DIR [--ranks N] [--mb-per-rank M] [--seed S] [--random-hashes]
//!
//! Each rank writes what `pip install dftracer` writes with `DFTRACER_INC_METADATA=1`:
//! metadata records, `start`, then epochs of data loading (POSIX reads, lseek64, open/
//! close) and compute steps with `args.epoch`/`args.step`, an `epoch` marker per
//! epoch, and `end`. The same arguments always give byte-identical files.
//! `--random-hashes` gives every POSIX event its own random `fhash` (as pydftracer writes
//! a hash per file touched), so the text has a realistic entropy and compresses ~4x, not
//! ~13x.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;

use flate2::Compression;
use flate2::write::GzEncoder;
use rayon::prelude::*;

/// splitmix64: tiny, fast and fully determined by its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

struct Rank<W: Write> {
    out: W,
    rng: Rng,
    pid: u64,
    id: u64,
    now: u64,
    bytes: u64,
    /// A fresh random `fhash` per POSIX event instead of one per opened file.
    random_hashes: bool,
}

const HHASH: &str = "6882804a826580cd";

impl<W: Write> Rank<W> {
    fn line(&mut self, s: &str) -> std::io::Result<()> {
        self.bytes += s.len() as u64 + 1;
        self.out.write_all(s.as_bytes())?;
        self.out.write_all(b"\n")
    }

    fn meta(&mut self, name: &str, key: &str, value: &str) -> std::io::Result<()> {
        let pid = self.pid;
        self.line(&format!(
            r#"{{"name":"{name}","cat":"dftracer","type":1,"pid":{pid},"tid":{pid},"ph":4,"args":{{"hhash":"{HHASH}","name":"{key}","value":"{value}"}}}}"#
        ))
    }

    /// A complete event that starts now and lasts `dur` microseconds.
    fn event(
        &mut self,
        name: &str,
        cat: &str,
        ty: u32,
        dur: u64,
        args: &str,
    ) -> std::io::Result<u64> {
        self.id += 1;
        let (id, pid, ts) = (self.id, self.pid, self.now);
        self.line(&format!(
            r#"{{"id":{id},"name":"{name}","cat":"{cat}","type":{ty},"pid":{pid},"tid":{pid},"ts":{ts},"dur":{dur},"ph":1,"args":{{"hhash":"{HHASH}"{args}}}}}"#
        ))?;
        Ok(ts)
    }

    fn posix(&mut self, name: &str, dur: u64, fhash: u64, extra: &str) -> std::io::Result<()> {
        let fhash = if self.random_hashes {
            self.rng.next()
        } else {
            fhash
        };
        let args = format!(r#","fhash":"{fhash:016x}","level":2{extra}"#);
        self.event(name, "POSIX", 3, dur, &args)?;
        self.now += dur + 1 + self.rng.below(3);
        Ok(())
    }

    /// The metadata records and the `start` event that open every rank's trace.
    fn header(&mut self) -> std::io::Result<()> {
        let pid = self.pid.to_string();
        self.meta("HH", "vm", HHASH)?;
        self.meta("thread_name", &pid, "thread_name")?;
        self.meta("CM", "time_metric", "US")?;
        self.meta("FH", "/lustre/data/train", "7c7be5ce41ad79d3")?;
        self.meta("SH", "python;train.py", "d1e3d2722594601a")?;
        self.event(
            "start",
            "dftracer",
            1,
            0,
            r#","ppid":1,"cmd_hash":"d1e3d2722594601a""#,
        )?;
        self.now += 50;
        Ok(())
    }

    /// Data loading of one step: open, a run of lseek64/read pairs, close, all inside one
    /// `TorchDataset.__getitem__` event carrying the step's `args` (`ea`).
    fn load(&mut self, ea: &str) -> std::io::Result<()> {
        let load_start = self.now;
        let fhash = self.rng.next();
        let dur = 20 + self.rng.below(200);
        self.posix("open64", dur, fhash, r#","ret":3,"flags":0"#)?;
        for _ in 0..(40 + self.rng.below(24)) {
            let off = self.rng.below(1 << 30);
            let dur = 1 + self.rng.below(3);
            self.posix(
                "lseek64",
                dur,
                fhash,
                &format!(r#","offset":{off},"whence":0"#),
            )?;
            let size = 4096 * (1 + self.rng.below(64));
            let dur = 5 + self.rng.below(400);
            self.posix(
                "read",
                dur,
                fhash,
                &format!(r#","size":{size},"ret":{size}"#),
            )?;
        }
        let dur = 3 + self.rng.below(30);
        self.posix("close", dur, fhash, r#","ret":0"#)?;
        let load_dur = self.now - load_start;
        self.now = load_start;
        self.event("TorchDataset.__getitem__", "data", 6, load_dur, ea)?;
        self.now += load_dur + 2;
        Ok(())
    }

    /// One epoch of 64 steps (load, forward, backward), then its `epoch` marker.
    fn epoch(&mut self, epoch: u32) -> std::io::Result<()> {
        let epoch_start = self.now;
        for step in 0..64u32 {
            let ea = format!(r#","epoch":{epoch},"step":{step}"#);
            self.load(&ea)?;
            // Compute: forward and backward.
            for (name, base) in [("forward", 2_000), ("backward", 4_000)] {
                let dur = base + self.rng.below(base / 4);
                self.event(name, "compute", 6, dur, &ea)?;
                self.now += dur + 1;
            }
        }
        // The marker is written when the epoch ends, stamped with its start.
        let end = self.now;
        self.now = epoch_start;
        self.event(
            "epoch",
            "app",
            6,
            end - epoch_start,
            &format!(r#","epoch":{epoch}"#),
        )?;
        self.now = end + 5;
        Ok(())
    }
}

fn write_rank(
    path: &PathBuf,
    rank: u64,
    seed: u64,
    target: u64,
    random_hashes: bool,
) -> std::io::Result<u64> {
    let gz = GzEncoder::new(
        BufWriter::with_capacity(1 << 20, File::create(path)?),
        Compression::default(),
    );
    let mut r = Rank {
        out: BufWriter::with_capacity(1 << 20, gz),
        rng: Rng(seed ^ rank.wrapping_mul(0x2545_f491_4f6c_dd1d)),
        pid: 40_000 + rank,
        id: 0,
        now: 1_795_975_471_000_000 + rank * 17,
        bytes: 0,
        random_hashes,
    };
    r.header()?;
    // Epochs of 64 steps until the file is big enough (always finishing an epoch).
    let mut epoch = 0u32;
    while r.bytes < target {
        epoch += 1;
        r.epoch(epoch)?;
    }
    let n = r.id;
    r.event("end", "dftracer", 1, 0, &format!(r#","num_events":{n}"#))?;
    let bytes = r.bytes;
    let gz = r.out.into_inner().map_err(|e| e.into_error())?;
    gz.finish()?.flush()?;
    Ok(bytes)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mut out: Option<PathBuf> = None;
    let (mut ranks, mut mb, mut seed) = (32u64, 34u64, 42u64);
    let mut random_hashes = false;
    while let Some(a) = args.next() {
        let mut num = |name: &str| -> u64 {
            args.next()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{name} needs a number"))
        };
        match a.as_str() {
            "--ranks" => ranks = num("--ranks"),
            "--mb-per-rank" => mb = num("--mb-per-rank"),
            "--seed" => seed = num("--seed"),
            "--random-hashes" => random_hashes = true,
            _ if out.is_none() => out = Some(PathBuf::from(a)),
            _ => panic!(
                "usage: gen_trace OUT_DIR [--ranks N] [--mb-per-rank M] [--seed S] [--random-hashes]"
            ),
        }
    }
    let out = out.expect(
        "usage: gen_trace OUT_DIR [--ranks N] [--mb-per-rank M] [--seed S] [--random-hashes]",
    );
    std::fs::create_dir_all(&out).expect("create output directory");
    let total: u64 = (0..ranks)
        .into_par_iter()
        .map(|rank| {
            let path = out.join(format!("train-{rank:04}-app.pfw.gz"));
            write_rank(&path, rank, seed, mb * 1_000_000, random_hashes)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        })
        .sum();
    println!("{total}");
}
