//! Every value from the experiment file that reaches a shell arrives at the program as the
//! literal string the user wrote: command substitution, backticks, `;`, quotes and newlines
//! are never interpreted.

mod support;

use support::*;

#[test]
fn hostile_env_and_args_reach_the_program_literally() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("pwned");
    let m = marker.display().to_string();
    let values = [
        format!("$(touch {m})"),
        format!("`touch {m}`"),
        format!("a; touch {m}"),
        "it's \"double\" and 'single'".to_string(),
        "line1\nline2".to_string(),
        "$HOME ${PATH} * ~".to_string(),
    ];
    // The app writes what it received, NUL-separated, into its run directory.
    let mut yaml = String::from(
        "name: hostile\n\
         app:\n  command: [bash, -c, 'printf \"%s\\0\" \"$V0\" \"$V1\" \"$V2\" \"$V3\" \"$V4\" \"$V5\" \"$@\" > got; echo \"epoch 1 took 1 s\"; echo \"epoch 2 took 1 s\"', app]\n",
    );
    yaml.push_str("  args:\n");
    for v in &values {
        yaml.push_str(&format!("    - {}\n", serde_json::to_string(v).unwrap()));
    }
    yaml.push_str("  env:\n");
    for (i, v) in values.iter().enumerate() {
        yaml.push_str(&format!(
            "    V{i}: {}\n",
            serde_json::to_string(v).unwrap()
        ));
    }
    yaml.push_str(
        "metric: { pattern: 'epoch (?P<epoch>\\d+) took (?P<seconds>[0-9.]+) s' }\n\
         replicates: 5\n\
         variants:\n  - { name: v, dimension: l2_threading_model, env: { W: \"1\" } }\n",
    );
    let (o, root) = run_experiment(dir.path(), &yaml, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let got = std::fs::read(root.join("runs/b001-v/got")).unwrap();
    let got: Vec<String> = String::from_utf8(got)
        .unwrap()
        .split('\0')
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect();
    let mut want: Vec<String> = values.to_vec();
    want.extend(values.iter().cloned());
    assert_eq!(got, want);
    assert!(
        !marker.exists(),
        "a value from the experiment file was executed"
    );
    // The manifest records the environment as given.
    let m: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("runs/b001-v/manifest.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(m["env_set"]["V0"], values[0]);
    assert_eq!(m["environment"]["V4"], "line1\nline2");
}
