//! The `protocol_decode` fuzz target's inputs in the normal suite (stable toolchain): every
//! seed of `fuzz/seeds/protocol_decode/` and every saved input of
//! `fuzz/regressions/protocol_decode/` goes through what the fuzz target does — the
//! daemon's frame reader, then a submit's text through the submit handler's checks — and
//! must end (a 60 s bound guards against a hang; no speed is asserted). The saved inputs
//! are the ones that stalled the fuzzer (100,000-deep submits): their texts must be refused.

use std::path::{Path, PathBuf};
use std::time::Duration;

use optgate_client::protocol::{Hello, MAX_REQUEST_BYTES, Request, read_frame};
use optgate_daemon::handlers::precheck::refuse_before_parsing;
use tokio::io::BufReader;

/// How long one input may take before the test calls it stuck (a hang guard, not a speed
/// assertion: every input here ends in milliseconds).
const STUCK_AFTER: Duration = Duration::from_secs(60);

fn inputs(kind: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz")
        .join(kind)
        .join("protocol_decode");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

/// What became of a submit's text, if the bytes held one.
#[derive(Debug, PartialEq)]
enum SubmitText {
    None,
    Refused,
    Loaded,
    Invalid,
}

/// The daemon's side of the fuzz target on `data`.
async fn decode(data: &[u8]) -> SubmitText {
    let mut r = BufReader::new(data);
    if read_frame::<Hello, _>(&mut r, MAX_REQUEST_BYTES)
        .await
        .is_err()
    {
        return SubmitText::None;
    }
    match read_frame::<Request, _>(&mut r, MAX_REQUEST_BYTES).await {
        Ok(Request::Submit(s)) => {
            if refuse_before_parsing(&s.source_text).is_some() {
                return SubmitText::Refused;
            }
            match optgate_experiment::load_str(&s.source_text, &s.source_path) {
                Ok(loaded) => {
                    let _ = optgate_experiment::Plan::for_experiment(&loaded.experiment).runs();
                    SubmitText::Loaded
                }
                Err(_) => SubmitText::Invalid,
            }
        }
        _ => SubmitText::None,
    }
}

/// Decodes `path` on its own thread; panics if it does not end within [`STUCK_AFTER`].
fn decode_bounded(path: &Path) -> SubmitText {
    let data = std::fs::read(path).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let _ = tx.send(rt.block_on(decode(&data)));
    });
    rx.recv_timeout(STUCK_AFTER)
        .unwrap_or_else(|e| panic!("{}: no end ({e})", path.display()))
}

/// Planted bug caught: a decoder or loader that panics on a seed fails the thread, and
/// the channel reports it disconnected.
#[test]
fn every_seed_is_decoded_to_an_end() {
    let seeds = inputs("seeds");
    assert!(seeds.len() >= 10, "only {} seeds", seeds.len());
    for seed in &seeds {
        decode_bounded(seed);
    }
}

/// Planted bug caught: without the pre-parse depth check these submits keep a parser busy
/// for minutes (they stopped the fuzzer) or are loaded.
#[test]
fn the_inputs_that_stalled_the_fuzzer_are_refused_before_parsing() {
    let saved = inputs("regressions");
    assert!(saved.len() >= 3, "only {} saved inputs", saved.len());
    for input in &saved {
        assert_eq!(
            decode_bounded(input),
            SubmitText::Refused,
            "{}",
            input.display()
        );
    }
}
