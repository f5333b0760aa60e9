//! Times gzip inflate alone on one `.pfw.gz` file: the reader's inflater (ISA-L's igzip,
//! streaming), flate2 + zlib-rs streaming and whole-member, and libdeflate whole-member,
//! for `benches/dftracer/RESULTS.md`.
//!
//! Usage: inflate_compare FILE.gz [REPEAT]   (prints one line per decoder, best of REPEAT)
//!
//! Times are this thread's CPU time (`/proc/thread-self/schedstat`, nanoseconds), not
//! wall time: the benchmark machine is shared and wall time there measures the load.

use std::io::Read;

use flate2::bufread::MultiGzDecoder;

/// Streams `gz` through flate2 in 256 KiB reads; returns the text bytes.
fn zlib_rs_streaming(gz: &[u8]) -> u64 {
    let mut dec = MultiGzDecoder::new(std::io::BufReader::with_capacity(256 * 1024, gz));
    let mut buf = vec![0u8; 256 * 1024];
    let mut total = 0u64;
    loop {
        match dec.read(&mut buf).expect("inflate") {
            0 => return total,
            n => total += n as u64,
        }
    }
}

/// Streams `gz` through the reader's inflater (igzip where built) in 256 KiB reads.
fn reader_inflater(gz: &[u8]) -> u64 {
    let input = std::io::BufReader::with_capacity(256 * 1024, gz);
    optgate_dftracer::__private::with_fast_gzip(input, |dec| {
        let mut buf = vec![0u8; 256 * 1024];
        let mut total = 0u64;
        loop {
            match dec.read(&mut buf).expect("inflate") {
                0 => return total,
                n => total += n as u64,
            }
        }
    })
}

/// Inflates every member of `gz` in one call each with flate2's low-level zlib-rs
/// stream (gzip header and trailer checked by zlib-rs), into one buffer sized by the
/// last member's ISIZE and grown when short.
fn zlib_rs_whole(gz: &[u8], out: &mut Vec<u8>) -> u64 {
    let isize = u32::from_le_bytes(gz[gz.len() - 4..].try_into().expect("trailer")) as usize;
    out.clear();
    out.reserve(isize.max(1 << 20));
    let mut input = gz;
    while !input.is_empty() {
        let mut d = flate2::Decompress::new_gzip(15);
        loop {
            let before = d.total_in();
            let status = d
                .decompress_vec(input, out, flate2::FlushDecompress::Finish)
                .expect("inflate");
            input = &input[(d.total_in() - before) as usize..];
            match status {
                flate2::Status::StreamEnd => break,
                _ => out.reserve(out.capacity()),
            }
        }
    }
    out.len() as u64
}

/// Inflates a single-member `gz` whole with libdeflate, sized by its ISIZE trailer.
fn libdeflate_whole(gz: &[u8], out: &mut Vec<u8>) -> u64 {
    let isize = u32::from_le_bytes(gz[gz.len() - 4..].try_into().expect("trailer")) as usize;
    out.resize(isize, 0);
    let n = libdeflater::Decompressor::new()
        .gzip_decompress(gz, out)
        .expect("libdeflate inflate");
    n as u64
}

mod cpu_time;
use cpu_time::best_of;

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args
        .next()
        .expect("usage: inflate_compare FILE.gz [REPEAT]");
    let repeat: usize = args.next().map_or(3, |r| r.parse().expect("REPEAT"));
    let gz = std::fs::read(&path).expect("read the file");
    let mut out = Vec::new();
    for (label, (secs, bytes)) in [
        (
            "the reader's inflater (igzip where built), streaming",
            best_of(repeat, || reader_inflater(&gz)),
        ),
        (
            "flate2 + zlib-rs, streaming",
            best_of(repeat, || zlib_rs_streaming(&gz)),
        ),
        (
            "flate2 + zlib-rs, whole member in one call",
            best_of(repeat, || zlib_rs_whole(&gz, &mut out)),
        ),
        (
            "libdeflate, whole member",
            best_of(repeat, || libdeflate_whole(&gz, &mut out)),
        ),
    ] {
        println!(
            "{label}: {bytes} bytes in {secs:.3} s = {:.0} MB/s",
            bytes as f64 / 1e6 / secs
        );
    }
}
