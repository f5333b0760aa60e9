//! Every value from the experiment file that reaches a shell arrives at the program as the
//! literal string the user wrote: command substitution, backticks, `;`, quotes and newlines
//! are never interpreted.

use crate::support;

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

/// One character a shell gives a meaning to, as a whole value (and a few values in which a
/// bare `$`, `~` or glob character would visibly expand: a lone `$` or `[` is literal to the
/// shell, `*` and `??????` match the run directory's files, `~` becomes `$HOME`), plus
/// whitespace, a line break and the empty string: each reaches the program exactly, once as
/// an environment value and once as an argument.
#[test]
fn single_shell_characters_reach_the_program_whole() {
    let dir = tempfile::tempdir().unwrap();
    let values = [
        "$",
        "$$",
        "$HOME",
        "~",
        "~/x",
        "!",
        "*",
        "?",
        "??????",
        "[",
        "#",
        "&",
        "a b",
        "line1\nline2",
        "",
    ];
    let vars: Vec<String> = (0..values.len()).map(|i| format!("\"$V{i}\"")).collect();
    let script = format!(
        "printf \"%s\\0\" {} \"$@\" > got; echo \"epoch 1 took 1 s\"; echo \"epoch 2 took 1 s\"",
        vars.join(" ")
    );
    let mut yaml = format!(
        "name: whole\napp:\n  command: [bash, -c, {}, app]\n  args:\n",
        serde_json::to_string(&script).unwrap()
    );
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
    let got = String::from_utf8(std::fs::read(root.join("runs/b001-v/got")).unwrap()).unwrap();
    // NUL-terminated words: the empty value is an empty word, not nothing.
    let mut got: Vec<&str> = got.split('\0').collect();
    assert_eq!(got.pop(), Some(""), "output ends with a NUL");
    let (env, args) = got.split_at(got.len().min(values.len()));
    // Both at once, so that a failure shows every value that changed on either path.
    assert_eq!(
        (env, args),
        (&values[..], &values[..]),
        "(environment values, arguments)"
    );
}

/// A variant's `args` replace the app's and the baseline's arguments: the variant runs
/// with exactly its own list (appending ran `6 20000000 4 20000000`, the baseline's
/// settings first, which most programs take).
#[test]
fn a_variant_runs_with_its_own_args_only() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("args.log");
    let yaml = format!(
        r#"name: args
app:
  command: [bash, -c, 'echo "$OPTGATE_ARM:$*" >> {log}; for e in 1 2 3; do echo "epoch $e took 0.0$e s"; done', app]
  args: ["6", "20000000"]
metric:
  pattern: 'epoch (?P<epoch>\d+) took (?P<seconds>[0-9.]+) s'
replicates: 5
variants:
  - name: four
    dimension: l2_threading_model
    args: ["4", "20000000"]
"#,
        log = log.display()
    );
    let (o, _) = run_experiment(dir.path(), &yaml, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let ran = std::fs::read_to_string(&log).unwrap();
    let mut lines: Vec<&str> = ran.lines().collect();
    lines.sort();
    lines.dedup();
    assert_eq!(lines, ["baseline:6 20000000", "four:4 20000000"], "{ran}");
}

/// Manifests keep no secrets: the arm's own variables and the allow-listed inherited ones
/// (threading, schedulers, CUDA, PyTorch…) are recorded with their values, any other
/// inherited variable by name only; the execution directory is the user's alone (0700).
#[test]
fn manifests_record_inherited_secrets_by_name_only() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let p = write_experiment(dir.path(), &fake_app_experiment("secrets", ""));
    let root = dir.path().join("exec");
    let o = optgate()
        .args([
            "run",
            p.to_str().unwrap(),
            "--out",
            root.to_str().unwrap(),
            "--quiet",
        ])
        .env("MY_API_TOKEN", "s3cr3t-value")
        .env("OMP_PLACES", "cores")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let mut manifests = 0;
    for e in std::fs::read_dir(root.join("runs")).unwrap() {
        let path = e.unwrap().path().join("manifest.json");
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(!text.contains("s3cr3t-value"), "{}: {text}", path.display());
        let m: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert!(m["environment"].get("MY_API_TOKEN").is_none(), "{m:#}");
        let withheld: Vec<&str> = m["environment_withheld"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert!(withheld.contains(&"MY_API_TOKEN"), "{withheld:?}");
        assert_eq!(m["environment"]["OMP_PLACES"], "cores");
        if m["arm"] == "v1" {
            assert_eq!(m["environment"]["X"], "1", "the arm's own variable");
        }
        manifests += 1;
    }
    assert_eq!(manifests, 10);
    let mode = std::fs::metadata(&root).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700, "the execution directory is private");
}
