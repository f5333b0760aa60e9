//! The experiment loader (`optgate validate`, `optgate run`, the daemon's `submit`) on any
//! text: `load_str` must return an experiment or located diagnostics, never panic, and a
//! valid experiment must plan (`Plan::for_experiment`, every run, `extend`).
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use optgate_experiment::{Plan, load_str};

fuzz_target!(|data: &[u8]| {
    // Files are read as UTF-8 (`read_to_string`); other bytes never reach the loader, so
    // arbitrary bytes are converted lossily rather than thrown away.
    let text = String::from_utf8_lossy(data);
    match load_str(&text, Path::new("/fuzz/exp.yaml")) {
        Ok(loaded) => {
            for w in &loaded.warnings {
                let _ = w.to_string();
            }
            let exp = loaded.experiment;
            let mut plan = Plan::for_experiment(&exp);
            let runs = plan.runs();
            assert_eq!(
                runs.len() as u64,
                u64::from(exp.file.replicates) * exp.arm_names().len() as u64
            );
            plan.extend(1);
            let _ = serde_json::to_string(&plan).unwrap();
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
});
