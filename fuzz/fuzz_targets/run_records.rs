//! The records an app could plant in its run directory: the bytes as a task record
//! (`tasks.attempt-1/rank-0.json`) or, when the first byte is `N`, a node record
//! (`nodes.attempt-1/h.json`), read back through `optgate_wrapper`'s untrusted reader and
//! record rules. Any input must come back as a record that passes every rule or as a
//! problem naming the file, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use optgate_wrapper::{nodes, tasks};

fuzz_target!(|data: &[u8]| {
    let dir = tempfile::tempdir().unwrap();
    let (folder, file, bytes) = match data.split_first() {
        Some((b'N', rest)) => ("nodes.attempt-1", "h.json", rest),
        _ => ("tasks.attempt-1", "rank-0.json", data),
    };
    std::fs::create_dir_all(dir.path().join(folder)).unwrap();
    std::fs::write(dir.path().join(folder).join(file), bytes).unwrap();
    if folder.starts_with("nodes") {
        match nodes::read_records(dir.path(), 1) {
            Ok(records) => records.iter().for_each(|n| nodes::check_node(n).unwrap()),
            Err(p) => assert!(p.file.ends_with(file), "{p}"),
        }
    } else {
        match tasks::read_records(dir.path(), 1) {
            Ok(records) => records.iter().for_each(|t| tasks::check_task(t).unwrap()),
            Err(p) => assert!(p.file.ends_with(file), "{p}"),
        }
    }
});
