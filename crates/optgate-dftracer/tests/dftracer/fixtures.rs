//! Real traces of all three DFTracer generations, kept in the repository under
//! `tests/fixtures/dftracer-traces` (origin and licence in `tests/fixtures/README.md`).
//! Expected numbers were counted independently with a short Python `json` script
//! (strip `[`/`]`, sum `dur` of `ph` X/1 events per category and `args.epoch`).
//!
//! A missing fixture fails the test, naming the path: it is part of the checkout.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use optgate_dftracer::{
    AggregateOptions, TimeUnit, TraceFormat, TraceSummary, epoch_seconds, summarize_paths,
};

/// The DLIO trace, cut to every non-`lseek64` event and every 100th `lseek64` (see
/// `tests/fixtures/README.md`): all 7 categories, 42 names and 5 epochs of the original.
const DLIO: &str = "dlio-2023/dlio-unet3d-ruby165-subset.pfw.gz";

/// `tests/fixtures/dftracer-traces`, asserted to hold every file these tests read.
fn fixtures() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/dftracer-traces");
    for rel in [
        DLIO,
        "dlio-2023/posix-corona237.pfw.gz",
        "cm1-2024/cm1-DEFAULT-3537780-preload.pfw.gz",
        "cm1-2024/cm1-DEFAULT-3537781-preload.pfw.gz",
        "cm1-2024/cm1-DEFAULT-3537782-preload.pfw.gz",
        "cm1-2024/cm1-DEFAULT-3537783-preload.pfw.gz",
        "pydftracer-2.2/compute-3epochs-4steps.pfw.gz",
    ] {
        let path = dir.join(rel);
        assert!(
            path.is_file(),
            "fixture {} is missing: it is part of the repository (tests/fixtures/README.md)",
            path.display()
        );
    }
    dir
}

fn summarize(path: PathBuf, opts: &AggregateOptions) -> TraceSummary {
    summarize_paths(&[path], opts).expect("fixture must be readable")
}

/// Microseconds (as counted by the oracle) to seconds, compared with a relative
/// tolerance far below one microsecond in the sums involved.
fn assert_us(actual_s: f64, expected_us: u64, what: &str) {
    let expected = expected_us as f64 * 1e-6;
    assert!(
        (actual_s - expected).abs() <= 1e-9 * expected.max(1.0),
        "{what}: {actual_s} s, expected {expected} s"
    );
}

#[test]
fn dlio_2023_all_string_values() {
    let dir = fixtures();
    let s = summarize(dir.join(DLIO), &AggregateOptions::default());
    assert!(s.diagnostics.is_empty(), "{:?}", s.diagnostics);
    let f = &s.files[0];
    assert_eq!(f.format, TraceFormat::Bracketed2023);
    assert_eq!(f.time_unit, TimeUnit::Microseconds);
    assert_eq!(f.lines, 12_976);
    assert_eq!(f.metadata_records, 0);

    let t = &s.total;
    assert_eq!(t.events, 12_975);
    assert_us(t.dur_s, 2_253_577_846, "total");
    let expected_cats: [(&str, u64, u64); 7] = [
        ("POSIX", 7_171, 127_187_512),
        ("ai_framework", 373, 106_981_873),
        ("config", 172, 205_330),
        ("data_loader", 794, 192_902_609),
        ("dlio_benchmark", 89, 1_326_562_590),
        ("reader", 615, 364_341_777),
        ("storage", 3_761, 135_396_155),
    ];
    assert_eq!(t.by_category.len(), expected_cats.len());
    for (cat, count, us) in expected_cats {
        let st = &t.by_category[cat];
        assert_eq!(st.count, count, "{cat}");
        assert_us(st.dur_s, us, cat);
    }
    assert_eq!(t.by_name.len(), 42);
    assert_eq!(t.by_name["lseek64"].count, 817);
    assert_eq!(t.by_name["read"].count, 5_734);
    assert_eq!(t.by_name["TorchFramework.compute"].count, 45);

    // Epochs 1-5 come from `args.epoch` on data-loader and reader events.
    let expected_epochs: [(u32, u64, u64, u64, u64); 5] = [
        // epoch, count, us, data_loader count, reader us
        (1, 363, 262_440_964, 239, 173_546_192),
        (2, 295, 77_387_704, 191, 50_268_154),
        (3, 281, 76_923_181, 152, 49_866_469),
        (4, 237, 70_331_355, 108, 45_429_364),
        (5, 191, 70_160_972, 62, 45_231_598),
    ];
    assert_eq!(
        t.by_epoch.keys().copied().collect::<Vec<_>>(),
        vec![1, 2, 3, 4, 5]
    );
    for (e, count, us, dl_count, reader_us) in expected_epochs {
        let st = &t.by_epoch[&e];
        assert_eq!(st.count, count, "epoch {e}");
        assert_us(st.dur_s, us, "epoch");
        assert_eq!(st.by_category["data_loader"].count, dl_count, "epoch {e}");
        assert_us(st.by_category["reader"].dur_s, reader_us, "epoch reader");
        assert_eq!(st.by_category.len(), 2);
    }
    let reader = epoch_seconds(&s, Some("reader"));
    assert_us(reader[&3], 49_866_469, "epoch_seconds reader 3");
}

#[test]
fn dlio_2023_posix_only() {
    let dir = fixtures();
    let s = summarize(
        dir.join("dlio-2023/posix-corona237.pfw.gz"),
        &AggregateOptions::default(),
    );
    assert!(s.diagnostics.is_empty(), "{:?}", s.diagnostics);
    assert_eq!(s.total.events, 1_012);
    assert_eq!(s.total.by_name["read"].count, 1_000);
    assert_us(s.total.by_category["POSIX"].dur_s, 931_087, "POSIX");
    assert!(s.total.by_epoch.is_empty());
}

#[test]
fn cm1_2024_directory_of_ranks() {
    let dir = fixtures();
    let s = summarize(dir.join("cm1-2024"), &AggregateOptions::default());
    assert!(s.diagnostics.is_empty(), "{:?}", s.diagnostics);
    let names: Vec<String> = s
        .files
        .iter()
        .map(|f| f.path.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        [
            "cm1-DEFAULT-3537780-preload.pfw.gz",
            "cm1-DEFAULT-3537781-preload.pfw.gz",
            "cm1-DEFAULT-3537782-preload.pfw.gz",
            "cm1-DEFAULT-3537783-preload.pfw.gz"
        ]
    );
    let per_file: Vec<(u64, u64)> = s
        .files
        .iter()
        .map(|f| (f.aggregate.events, f.metadata_records))
        .collect();
    assert_eq!(
        per_file,
        [(8_082, 709), (5_882, 692), (5_895, 694), (5_877, 687)]
    );
    for f in &s.files {
        assert_eq!(f.format, TraceFormat::Bracketed2024);
        assert_eq!(
            f.aggregate.by_category["dftracer"].count, 2,
            "start and end"
        );
    }
    assert_us(s.files[0].aggregate.dur_s, 1_444_424, "rank 0");
    assert_us(
        s.files[3].aggregate.by_category["STDIO"].dur_s,
        83_106,
        "rank 3 STDIO",
    );

    let t = &s.total;
    assert_eq!(t.events, 8_082 + 5_882 + 5_895 + 5_877);
    assert_eq!(t.by_category["STDIO"].count, 4 * 1_095);
    assert_eq!(t.by_category["POSIX"].count, 6_985 + 4_785 + 4_798 + 4_780);
    assert_us(
        t.by_category["POSIX"].dur_s,
        1_351_271 + 522_193 + 528_677 + 530_606,
        "POSIX",
    );
    assert_us(t.dur_s, 1_444_424 + 624_401 + 636_902 + 613_712, "total");
}

#[test]
fn pydftracer_2_2_ndjson() {
    let dir = fixtures();
    let s = summarize(
        dir.join("pydftracer-2.2/compute-3epochs-4steps.pfw.gz"),
        &AggregateOptions::default(),
    );
    assert!(s.diagnostics.is_empty(), "{:?}", s.diagnostics);
    let f = &s.files[0];
    assert_eq!(f.format, TraceFormat::Ndjson);
    assert_eq!(
        f.time_unit,
        TimeUnit::Microseconds,
        "from the CM record's \"US\""
    );
    assert_eq!(
        (f.lines, f.metadata_records, f.aggregate.events),
        (20, 6, 14)
    );
    assert_eq!(s.total.by_category["compute"].count, 12);
    assert_eq!(s.total.by_name["forward"].count, 12);
    let per_epoch = epoch_seconds(&s, Some("compute"));
    assert_eq!(per_epoch.len(), 3);
    assert_us(per_epoch[&1], 10_732, "epoch 1");
    assert_us(per_epoch[&2], 9_987, "epoch 2");
    assert_us(per_epoch[&3], 10_503, "epoch 3");
    for e in 1..=3 {
        assert_eq!(s.total.by_epoch[&e].count, 4);
    }
}

#[test]
fn category_filter_keeps_only_that_category() {
    let dir = fixtures();
    let opts = AggregateOptions {
        category: Some("reader".into()),
        ..Default::default()
    };
    let s = summarize(dir.join(DLIO), &opts);
    assert_eq!(s.total.events, 615);
    assert_eq!(s.total.by_category.keys().collect::<Vec<_>>(), ["reader"]);
    let counts: BTreeMap<u32, u64> = s
        .total
        .by_epoch
        .iter()
        .map(|(e, st)| (*e, st.count))
        .collect();
    assert_eq!(
        counts,
        BTreeMap::from([(1, 124), (2, 104), (3, 129), (4, 129), (5, 129)])
    );
}

/// The scanner reads every line of every fixture as the `serde_json` oracle does (the
/// same fields, the same rejections).
#[test]
fn the_scanner_reads_every_fixture_line_as_the_oracle_does() {
    let dir = fixtures();
    let paths = vec![
        dir.join("dlio-2023"),
        dir.join("cm1-2024"),
        dir.join("pydftracer-2.2"),
    ];
    let files = optgate_dftracer::expand_paths(&paths).unwrap();
    assert_eq!(files.len(), 7);
    for file in files {
        let mut text = Vec::new();
        flate2::read::MultiGzDecoder::new(std::fs::File::open(&file).unwrap())
            .read_to_end(&mut text)
            .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        assert!(!text.is_empty(), "{}", file.display());
        crate::serde_oracle::assert_scanner_agrees(&text);
    }
}
