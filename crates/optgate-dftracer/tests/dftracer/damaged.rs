//! Damaged and unusual traces built in temporary directories: each problem must be
//! reported with its file and line while every other event still counts. Where a case's
//! lines are damaged or unusual, the scanner must also read each of them as the
//! `serde_json` oracle does (`serde_oracle::assert_scanner_agrees`).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use crate::serde_oracle::assert_scanner_agrees;
use flate2::Compression;
use flate2::write::GzEncoder;
use optgate_dftracer::{
    AggregateOptions, DiagnosticKind, TimeUnit, TraceError, TraceFormat, TraceSummary,
    epoch_seconds, summarize_paths, summarize_reader,
};

/// A 2.x-style complete event.
fn ev(id: u64, name: &str, cat: &str, ts: u64, dur: u64, epoch: Option<u32>) -> String {
    let args = match epoch {
        Some(e) => format!(r#","args":{{"hhash":"abc","epoch":{e},"step":0}}"#),
        None => String::new(),
    };
    format!(
        r#"{{"id":{id},"name":"{name}","cat":"{cat}","type":6,"pid":7,"tid":7,"ts":{ts},"dur":{dur},"ph":1{args}}}"#
    )
}

fn cm(unit: &str) -> String {
    format!(
        r#"{{"name":"CM","cat":"dftracer","type":1,"pid":7,"tid":7,"ph":4,"args":{{"hhash":"abc","name":"time_metric","value":"{unit}"}}}}"#
    )
}

fn gz(data: &[u8]) -> Vec<u8> {
    let mut e = GzEncoder::new(Vec::new(), Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

fn write(dir: &Path, name: &str, data: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, data).unwrap();
    p
}

fn run(paths: &[PathBuf]) -> TraceSummary {
    summarize_paths(paths, &AggregateOptions::default()).unwrap()
}

fn kinds(s: &TraceSummary) -> Vec<(u64, DiagnosticKind)> {
    s.diagnostics.iter().map(|d| (d.line, d.kind)).collect()
}

/// `n` events of 10 us each, one per line, every line newline-terminated.
fn lines(n: u64) -> String {
    (0..n)
        .map(|i| ev(i, "forward", "compute", 1000 + i * 20, 10, Some(1)) + "\n")
        .collect()
}

#[test]
fn torn_last_line_is_reported_and_the_rest_counts() {
    let dir = tempfile::tempdir().unwrap();
    let mut text = lines(10);
    let next = ev(10, "forward", "compute", 5000, 10, Some(1));
    text.push_str(&next[..next.len() / 2]);
    let plain = write(dir.path(), "torn.pfw", text.as_bytes());
    let zipped = write(dir.path(), "torn.pfw.gz", &gz(text.as_bytes()));
    for path in [&plain, &zipped] {
        let s = run(std::slice::from_ref(path));
        assert_eq!(s.total.events, 10, "{}", path.display());
        assert_eq!(kinds(&s), [(11, DiagnosticKind::TornLine)]);
        assert_eq!(&s.diagnostics[0].file, path);
        assert_eq!(s.files[0].lines, 11);
    }
    assert_scanner_agrees(text.as_bytes());
}

#[test]
fn last_line_without_newline_but_complete_counts() {
    let text = lines(3) + &ev(3, "forward", "compute", 9000, 10, Some(2));
    let opts = AggregateOptions::default();
    let s = summarize_reader(Path::new("mem.pfw"), text.as_bytes(), &opts);
    assert!(s.diagnostics.is_empty(), "{:?}", s.diagnostics);
    assert_eq!(s.total.events, 4);
    assert_eq!(s.total.by_epoch[&2].count, 1);
    assert_scanner_agrees(text.as_bytes());
}

/// Decodes as much of a (possibly truncated) gzip stream as the decoder yields, the
/// way an independent reader would, to know how many whole lines precede the cut.
fn decodable_prefix(data: &[u8]) -> (Vec<u8>, bool) {
    let mut d = flate2::read::GzDecoder::new(data);
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match d.read(&mut buf) {
            Ok(0) => return (out, false),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(_) => return (out, true),
        }
    }
}

#[test]
fn truncated_gzip_is_reported_and_what_was_read_counts() {
    let dir = tempfile::tempdir().unwrap();
    let text = lines(5_000);
    let full = gz(text.as_bytes());
    for (label, cut) in [("half", full.len() / 2), ("trailer only", full.len() - 4)] {
        let data = &full[..cut];
        let (prefix, failed) = decodable_prefix(data);
        assert!(
            failed,
            "{label}: the reference decoder must notice the truncation"
        );
        let whole_lines = prefix.iter().filter(|&&b| b == b'\n').count() as u64;
        let path = write(dir.path(), &format!("cut-{cut}.pfw.gz"), data);
        let s = run(std::slice::from_ref(&path));
        assert_eq!(s.total.events, whole_lines, "{label}");
        let read_errors: Vec<_> = s
            .diagnostics
            .iter()
            .filter(|d| d.kind == DiagnosticKind::ReadError)
            .collect();
        assert_eq!(read_errors.len(), 1, "{label}: {:?}", s.diagnostics);
        assert_eq!(read_errors[0].file, path);
        assert!(
            read_errors[0].line > whole_lines,
            "{label}: {:?}",
            read_errors[0]
        );
        assert!(
            read_errors[0].message.contains("truncated"),
            "{}",
            read_errors[0].message
        );
        // A partial line before the cut is a torn line; nothing else is reported.
        let torn = prefix.last().is_some_and(|&b| b != b'\n');
        let expected_count = 1 + usize::from(torn);
        assert_eq!(
            s.diagnostics.len(),
            expected_count,
            "{label}: {:?}",
            s.diagnostics
        );
        assert_scanner_agrees(&prefix);
        if label == "half" {
            assert!(whole_lines > 0 && whole_lines < 5_000, "{whole_lines}");
        } else {
            assert_eq!(whole_lines, 5_000, "only the CRC trailer is missing");
        }
    }
}

/// A file read by path (igzip on x86_64, and zlib again for a cut member) summarises
/// exactly as the same bytes through `summarize_reader` (zlib alone): whole, cut at many
/// points (igzip alone may stop a byte short there), with a byte flipped, with junk after
/// the member and as two members.
#[test]
fn files_read_by_path_summarise_as_zlib_reads_them_whole_cut_or_damaged() {
    let dir = tempfile::tempdir().unwrap();
    let mut text = lines(3_000);
    // Varied lines, so cuts fall inside literals and matches of every length.
    for i in 0..2_000u64 {
        let hash = i.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        text.push_str(&ev(
            i,
            &format!("op{hash:x}"),
            "POSIX",
            9_000 + i,
            hash % 97,
            None,
        ));
        text.push('\n');
    }
    let full = gz(text.as_bytes());
    let mut cases: Vec<(String, Vec<u8>)> = vec![("whole".into(), full.clone())];
    for k in 1..60 {
        let cut = full.len() * k / 60 + k;
        cases.push((
            format!("cut {cut}"),
            full[..cut.min(full.len() - 1)].to_vec(),
        ));
    }
    for k in 1..8 {
        let mut flipped = full.clone();
        flipped[full.len() * k / 8] ^= 1 << k;
        cases.push((format!("flip {k}"), flipped));
    }
    let mut junk = full.clone();
    junk.extend_from_slice(b"\0\0\0junk");
    cases.push(("junk".into(), junk));
    let mut two = full.clone();
    two.extend_from_slice(&full);
    cases.push(("two members".into(), two));
    for (label, data) in cases {
        let path = write(dir.path(), "case.pfw.gz", &data);
        let mut by_path = run(std::slice::from_ref(&path));
        by_path.files[0].file_bytes = 0;
        let by_reader = summarize_reader(&path, &data[..], &AggregateOptions::default());
        assert_eq!(by_path, by_reader, "{label}");
    }
}

#[test]
fn non_json_line_and_missing_dur_are_reported_with_lines() {
    let dir = tempfile::tempdir().unwrap();
    let no_dur = r#"{"id":9,"name":"forward","cat":"compute","ts":5,"ph":1,"args":{"epoch":1}}"#;
    let text = [
        ev(1, "forward", "compute", 10, 100, Some(1)),
        "this is not json".to_string(),
        ev(2, "forward", "compute", 20, 100, Some(1)),
        no_dur.to_string(),
        r#"{"id":3,"name":"forward","cat":"compute","ts":30,"dur":"abc","ph":"X"}"#.to_string(),
        ev(4, "backward", "compute", 40, 100, Some(2)),
        r#"{"name":"forward","cat":"compute","ts":50,"dur":100,"ph":1"#.to_string(),
        ev(5, "backward", "compute", 60, 100, None),
    ]
    .join("\n")
        + "\n";
    let path = write(dir.path(), "mixed.pfw", text.as_bytes());
    let s = run(std::slice::from_ref(&path));
    assert_eq!(
        kinds(&s),
        [
            (2, DiagnosticKind::NotJson),
            (4, DiagnosticKind::MissingDur),
            (5, DiagnosticKind::BadValue),
            (7, DiagnosticKind::NotJson),
        ],
        "{:?}",
        s.diagnostics
    );
    assert!(s.diagnostics.iter().all(|d| d.file == path));
    assert!(
        s.diagnostics[0]
            .to_string()
            .starts_with(&format!("{}:2: ", path.display()))
    );
    let f = &s.files[0];
    assert_eq!(f.aggregate.events, 4);
    assert_eq!(f.skipped_events, 2);
    assert_eq!(s.total.by_name["forward"].count, 2);
    assert_eq!(s.total.by_name["backward"].count, 2);
    assert_eq!(s.total.by_epoch[&1].count, 2);
    assert_eq!(s.total.by_epoch[&2].count, 1);
    assert!((s.total.dur_s - 400e-6).abs() < 1e-12);
    assert_scanner_agrees(text.as_bytes());
}

#[test]
fn unknown_time_unit_is_reported_and_microseconds_assumed() {
    let text = [
        cm("fortnights"),
        ev(1, "forward", "compute", 10, 2_000_000, None),
    ]
    .join("\n")
        + "\n";
    let opts = AggregateOptions::default();
    let s = summarize_reader(Path::new("unit.pfw"), text.as_bytes(), &opts);
    assert_eq!(kinds(&s), [(1, DiagnosticKind::UnknownTimeUnit)]);
    assert!(s.diagnostics[0].message.contains("fortnights"));
    assert_eq!(s.files[0].time_unit, TimeUnit::Microseconds);
    assert_eq!(s.total.events, 1);
    assert!((s.total.dur_s - 2.0).abs() < 1e-12);
    assert_scanner_agrees(text.as_bytes());
}

#[test]
fn time_unit_from_metadata_scales_durations_even_when_it_comes_last() {
    for (unit, expect) in [("NS", 1e-3), ("US", 1.0), ("MS", 1e3), ("S", 1e6)] {
        // The CM record after the event: the unit applies to the whole file.
        let text = [ev(1, "forward", "compute", 10, 1_000_000, None), cm(unit)].join("\n") + "\n";
        let s = summarize_reader(
            Path::new("unit.pfw"),
            text.as_bytes(),
            &AggregateOptions::default(),
        );
        assert!(s.diagnostics.is_empty());
        assert!(
            (s.total.dur_s - expect).abs() < 1e-9 * expect,
            "{unit}: {}",
            s.total.dur_s
        );
    }
}

#[test]
fn files_of_different_units_add_up_in_seconds() {
    let dir = tempfile::tempdir().unwrap();
    let a = [
        cm("NS"),
        ev(1, "forward", "compute", 10, 500_000_000, Some(1)),
    ]
    .join("\n");
    let b = [cm("US"), ev(1, "forward", "compute", 10, 250_000, Some(1))].join("\n");
    write(dir.path(), "a.pfw", a.as_bytes());
    write(dir.path(), "b.pfw.gz", &gz(b.as_bytes()));
    write(dir.path(), "notes.txt", b"not a trace");
    let s = run(&[dir.path().to_path_buf()]);
    assert_eq!(s.files.len(), 2, "notes.txt is not a trace file");
    assert_eq!(s.files[0].time_unit, TimeUnit::Nanoseconds);
    assert_eq!(s.files[1].time_unit, TimeUnit::Microseconds);
    assert!((epoch_seconds(&s, Some("compute"))[&1] - 0.75).abs() < 1e-12);
}

#[test]
fn bracketed_generations_with_glued_brackets_and_commas() {
    let text = format!(
        "[{},\n {}\n{}]\n",
        r#"{"id":"1","name":"read","cat":"POSIX","pid":"0","tid":"1","ts":"100","dur":"7","ph":"X","args":{"epoch":"3"}}"#,
        r#"{"id":"2","name":"read","cat":"POSIX","pid":"0","tid":"1","ts":"200","dur":"5","ph":"X"}"#,
        r#"{"id":"3","name":"HH","cat":"dftracer","pid":"0","tid":"1","ph":"M","args":{"name":"h","value":5}}"#,
    );
    let opts = AggregateOptions::default();
    let s = summarize_reader(Path::new("old.pfw"), text.as_bytes(), &opts);
    assert!(s.diagnostics.is_empty(), "{:?}", s.diagnostics);
    assert_eq!(s.files[0].format, TraceFormat::Bracketed2023);
    assert_eq!(s.files[0].metadata_records, 1);
    assert_eq!(s.total.events, 2);
    assert_eq!(s.total.by_epoch[&3].count, 1, "epoch given as a string");
    assert!((s.total.by_category["POSIX"].dur_s - 12e-6).abs() < 1e-15);
    assert_scanner_agrees(text.as_bytes());
}

#[test]
fn epoch_markers_define_epochs() {
    // As DFTracer writes them: a complete event is logged when it ends, so each
    // epoch marker follows the events inside it.
    let text = [
        ev(1, "forward", "compute", 110, 10, None),
        ev(2, "read", "POSIX", 120, 5, None),
        ev(3, "epoch", "app", 100, 100, None), // [100, 200): epoch 1 (first marker)
        ev(4, "forward", "compute", 210, 20, None),
        ev(5, "forward", "compute", 290, 30, Some(9)), // in marker 2: marker wins over args
        ev(6, "epoch", "app", 200, 100, None),         // [200, 300): epoch 2
        ev(7, "forward", "compute", 350, 40, Some(7)), // between markers: keeps args.epoch
        ev(8, "forward", "compute", 360, 50, None),    // between markers, no args: no epoch
        ev(9, "forward", "compute", 410, 60, None),
        ev(10, "epoch", "app", 400, 100, Some(5)), // [400, 500) with its own args.epoch 5
    ]
    .join("\n");
    let opts = AggregateOptions {
        epoch_marker: Some("epoch".into()),
        ..Default::default()
    };
    let s = summarize_reader(Path::new("m.pfw"), text.as_bytes(), &opts);
    assert!(s.diagnostics.is_empty());
    assert_eq!(s.files[0].epoch_markers, 3);
    let compute = epoch_seconds(&s, Some("compute"));
    let expected = [(1, 10e-6), (2, 50e-6), (5, 60e-6), (7, 40e-6)];
    assert_eq!(compute.keys().copied().collect::<Vec<_>>(), [1, 2, 5, 7]);
    for (e, secs) in expected {
        assert!(
            (compute[&e] - secs).abs() < 1e-15,
            "epoch {e}: {}",
            compute[&e]
        );
    }
    // Markers are counted as events of their category but in no epoch.
    assert_eq!(s.total.by_name["epoch"].count, 3);
    assert_eq!(s.total.by_epoch[&1].count, 2, "forward + read");
    assert!(!s.total.by_epoch[&1].by_category.contains_key("app"));

    // With a category filter the markers still delimit epochs.
    let opts = AggregateOptions {
        epoch_marker: Some("epoch".into()),
        category: Some("compute".into()),
    };
    let s = summarize_reader(Path::new("m.pfw"), text.as_bytes(), &opts);
    assert_eq!(s.total.events, 6, "compute events only");
    assert_eq!(epoch_seconds(&s, None), compute);
    assert_scanner_agrees(text.as_bytes());
}

#[test]
fn markers_are_per_file() {
    let dir = tempfile::tempdir().unwrap();
    let rank0 = [
        ev(1, "forward", "compute", 105, 10, None),
        ev(2, "epoch", "app", 100, 100, None),
    ]
    .join("\n");
    // Rank 1's epoch 1 starts later; its own marker decides.
    let rank1 = [
        ev(1, "forward", "compute", 150, 20, None),
        ev(2, "epoch", "app", 140, 100, None),
    ]
    .join("\n");
    write(dir.path(), "r0.pfw", rank0.as_bytes());
    write(dir.path(), "r1.pfw", rank1.as_bytes());
    let opts = AggregateOptions {
        epoch_marker: Some("epoch".into()),
        ..Default::default()
    };
    let s = summarize_paths(&[dir.path().to_path_buf()], &opts).unwrap();
    let compute = epoch_seconds(&s, Some("compute"));
    assert_eq!(compute.len(), 1);
    assert!((compute[&1] - 30e-6).abs() < 1e-15);
}

#[test]
fn records_that_are_not_summed_are_reported_once() {
    let counter =
        r#"{"id":5,"name":"power","cat":"sys","pid":7,"tid":7,"ts":30,"ph":2,"args":{"w":100}}"#;
    let aggregated = r#"{"id":6,"name":"read","cat":"POSIX","ts":40,"dur":5,"ph":3}"#;
    let text = [
        cm("US"),
        ev(1, "forward", "compute", 10, 7, Some(1)),
        counter.to_string(),
        aggregated.to_string(),
    ]
    .join("\n");
    let opts = AggregateOptions::default();
    let s = summarize_reader(Path::new("agg.pfw"), text.as_bytes(), &opts);
    assert_eq!(kinds(&s), [(3, DiagnosticKind::NotSummed)]);
    assert!(
        s.diagnostics[0].message.starts_with("2 records"),
        "{}",
        s.diagnostics[0].message
    );
    assert_eq!(
        (s.files[0].other_records, s.files[0].metadata_records),
        (2, 1)
    );
    assert_eq!(s.total.events, 1);
    assert_scanner_agrees(text.as_bytes());
}

#[test]
fn gzip_is_detected_by_content_not_name() {
    let dir = tempfile::tempdir().unwrap();
    let text = lines(3);
    let a = write(dir.path(), "really-gzip.pfw", &gz(text.as_bytes()));
    let b = write(dir.path(), "really-plain.pfw.gz", text.as_bytes());
    let s = run(&[a, b]);
    assert!(s.diagnostics.is_empty(), "{:?}", s.diagnostics);
    assert_eq!(s.total.events, 6);
}

#[test]
fn concatenated_gzip_members_are_all_read() {
    let mut data = gz(lines(2).as_bytes());
    data.extend(gz(lines(3).as_bytes()));
    let s = summarize_reader(
        Path::new("multi.pfw.gz"),
        &data[..],
        &AggregateOptions::default(),
    );
    assert!(s.diagnostics.is_empty(), "{:?}", s.diagnostics);
    assert_eq!(s.total.events, 5);
}

#[test]
fn a_file_given_twice_counts_once() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "a.pfw", lines(4).as_bytes());
    let s = run(&[dir.path().to_path_buf(), p.clone(), p]);
    assert_eq!(s.files.len(), 1);
    assert_eq!(s.total.events, 4);
}

#[test]
fn path_errors_name_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope.pfw");
    match summarize_paths(std::slice::from_ref(&missing), &AggregateOptions::default()) {
        Err(TraceError::Io { op, path, .. }) => {
            assert_eq!(op, "stat");
            assert_eq!(path, missing);
        }
        other => panic!("expected an Io error, got {other:?}"),
    }
    match summarize_paths(&[dir.path().to_path_buf()], &AggregateOptions::default()) {
        Err(TraceError::NoTraceFiles { path }) => assert_eq!(path, dir.path()),
        other => panic!("expected NoTraceFiles, got {other:?}"),
    }
    assert!(matches!(
        summarize_paths(&[], &AggregateOptions::default()),
        Err(TraceError::NoPaths)
    ));
}

#[test]
fn a_file_of_garbage_is_capped_but_counted() {
    let mut text = String::new();
    for i in 0..120 {
        text.push_str(&format!("garbage {i}\n"));
    }
    text.push_str(&lines(1));
    let s = summarize_reader(
        Path::new("junk.pfw"),
        text.as_bytes(),
        &AggregateOptions::default(),
    );
    assert_eq!(s.files[0].diagnostics, 120);
    assert_eq!(s.diagnostics.len(), 51);
    assert_eq!(s.diagnostics[49].line, 50);
    assert_eq!(s.diagnostics[50].kind, DiagnosticKind::Suppressed);
    assert!(s.diagnostics[50].message.starts_with("70 more"));
    assert_eq!(s.total.events, 1);
}

#[test]
fn a_line_longer_than_the_read_buffer_is_one_line() {
    // 512 KiB: longer than the 256 KiB read buffer, within MAX_LINE_BYTES.
    let long_name = "x".repeat(1 << 19);
    let text = lines(2) + &ev(9, &long_name, "compute", 1, 3, None) + "\n" + &lines(1);
    let s = summarize_reader(
        Path::new("long.pfw"),
        text.as_bytes(),
        &AggregateOptions::default(),
    );
    assert!(s.diagnostics.is_empty());
    assert_eq!(s.total.events, 4);
    // Names are kept to MAX_KEY_BYTES and an ellipsis.
    let kept = format!("{}…", &long_name[..optgate_dftracer::MAX_KEY_BYTES]);
    assert_eq!(s.total.by_name[&kept].count, 1);
    assert_eq!(s.files[0].lines, 4);
}

#[test]
fn a_line_past_the_line_limit_is_skipped_and_the_rest_counts() {
    let long_name = "x".repeat(optgate_dftracer::MAX_LINE_BYTES);
    let text = lines(2) + &ev(9, &long_name, "compute", 1, 3, None) + "\n" + &lines(1);
    let s = summarize_reader(
        Path::new("long.pfw"),
        text.as_bytes(),
        &AggregateOptions::default(),
    );
    assert_eq!(s.diagnostics.len(), 1, "{:?}", s.diagnostics);
    assert_eq!(s.diagnostics[0].kind, DiagnosticKind::LongLine);
    assert_eq!(s.diagnostics[0].line, 3);
    assert_eq!(s.total.events, 3);
    assert_eq!(s.files[0].lines, 4);
}

#[test]
fn json_output_has_the_documented_shape() {
    let s = summarize_reader(
        Path::new("a.pfw"),
        lines(2).as_bytes(),
        &AggregateOptions::default(),
    );
    let v: serde_json::Value = serde_json::to_value(&s).unwrap();
    assert_eq!(v["total"]["events"], 2);
    assert_eq!(v["total"]["by_category"]["compute"]["count"], 2);
    assert_eq!(
        v["total"]["by_epoch"]["1"]["by_category"]["compute"]["count"],
        2
    );
    assert_eq!(v["files"][0]["format"], "2.x");
    assert_eq!(v["files"][0]["time_unit"], "microseconds");
    let table = optgate_dftracer::render_table(&s);
    assert!(table.contains("Total: 2 events"), "{table}");
    assert!(
        table.lines().all(|l| !l.ends_with(' ')),
        "no trailing spaces:\n{table}"
    );
}

/// Found by fuzzing (`fuzz/regressions/trace_summary/`): an epoch marker whose `ts` is at or
/// past i64::MAX (an integer, or a float that saturates to it) overflowed `ts + dur` — a
/// panic in debug builds, a wrapped interval in release builds.
#[test]
fn epoch_marker_with_a_timestamp_past_i64_counts_without_overflow() {
    let text = concat!(
        "{\"name\":\"epoch\",\"ts\":33333333333333332100,\"dur\":31}\n",
        "{\"name\":\"epoch\",\"ts\":9223372036854775807,\"dur\":5,\"args\":{\"epoch\":7}}\n",
        "{\"name\":\"step\",\"cat\":\"compute\",\"ts\":9223372036854775807,\"dur\":2}\n",
    );
    let opts = AggregateOptions {
        epoch_marker: Some("epoch".into()),
        ..Default::default()
    };
    let s = summarize_reader(Path::new("ovf.pfw"), text.as_bytes(), &opts);
    assert_eq!(s.files[0].epoch_markers, 2);
    assert_eq!(s.total.events, 3);
    // The step starts where both markers start: it belongs to the later one's epoch.
    assert_eq!(s.total.by_epoch.keys().collect::<Vec<_>>(), [&7]);
    assert_scanner_agrees(text.as_bytes());
}
