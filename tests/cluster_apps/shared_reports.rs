//! Reports to share and CI output through the real binary: a real `optgate
//! run --format html` opened in headless Chromium (Debian's `chromium`) with the network
//! shut — the page renders with its proposal table and plots, logs nothing to the console,
//! requests nothing, and gives a screenshot — and `--format junit` of the same execution
//! valid against the JUnit schema (`xmllint`, Debian's `libxml2-utils`) with one test case
//! per variant; the same two formats of a daemon experiment's `optgate report ID`; and
//! `optgate history NAME --format html` of eight real executions, its series plotted.
//! `tests/run-all.sh` installs both tools; without them these tests fail, saying so.
//! Each check is first shown to catch a page that breaks it.

use crate::campaign_common;
use crate::support;

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::*;

const SETUP: &str = "run tests/run-all.sh, which installs Debian's `chromium` and \
                     `libxml2-utils` (CI does), and try again";

/// Longest a Chromium call may take before it is killed and the test fails (a render
/// takes about 2 s here).
const CHROMIUM_LIMIT: Duration = Duration::from_secs(120);

/// An executable on PATH, or a failure telling how to install it.
fn tool(name: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("`{name}` is not installed: {SETUP}"))
}

/// Three arms of a fast fake app: a faster variant (accepted), a slower one (rejected), a
/// noisy one; the texts carry markup a hostile file could hold.
const EXPERIMENT: &str = r#"name: shared-report
description: "Shared report <script>alert('x')</script> & <img src=x onerror=alert(1)>"
app:
  command: [bash, -c, 's=0.05; [ -n "$FAST" ] && s=0.04; [ -n "$SLOW" ] && s=0.06; [ -n "$NOISY" ] && s=0.0$((48 + RANDOM % 5)); for e in 1 2 3; do echo "epoch $e took $s s"; done']
metric:
  pattern: 'epoch (?P<epoch>\d+) took (?P<seconds>[0-9.]+) s'
replicates: 7
variants:
  - name: faster
    dimension: l2_threading_model
    description: "threads matched to cores </td></table><script>alert(2)</script>"
    env: { FAST: "1" }
  - name: slower
    dimension: l1_vectorization
    env: { SLOW: "1" }
  - name: noisy
    dimension: l3_numa_affinity
    env: { NOISY: "1" }
"#;

/// Runs the experiment once, then shows its report again in `format` (`optgate run`
/// on a finished execution shows its report): what it printed, and the root.
fn report_in(dir: &Path, format: &str) -> String {
    let root = dir.join("exec");
    if !root.join("report.json").exists() {
        let (o, _) = run_experiment(dir, EXPERIMENT, &["--format", "json"]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    }
    let exp = dir.join("exp.yaml");
    let o = run(&[
        "run",
        exp.to_str().unwrap(),
        "--out",
        root.to_str().unwrap(),
        "--quiet",
        "--format",
        format,
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    stdout(&o)
}

/// What one headless Chromium call printed.
struct Browsed {
    stdout: String,
    stderr: String,
}

/// Runs headless Chromium on `page` with `extra` arguments, a private profile, the
/// network shut (every host name resolves to nothing) and its requests logged to
/// `netlog`, bounded by [`CHROMIUM_LIMIT`]: past it, the process group it was started in
/// is killed and the test fails.
fn chromium(work: &Path, page: &Path, netlog: &Path, extra: &[String]) -> Browsed {
    let profile = tempfile::tempdir_in(work).unwrap();
    let (out, err) = (work.join("chromium.out"), work.join("chromium.err"));
    let mut child = Command::new(tool("chromium"))
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--no-first-run",
            "--host-resolver-rules=MAP * ~NOTFOUND",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("--log-net-log={}", netlog.display()))
        .args(extra)
        .arg(format!("file://{}", page.display()))
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .process_group(0)
        .spawn()
        .expect("chromium starts");
    let started = CheckedProcess::recorded(
        child.id() as i32,
        proc_start_time(child.id() as i32).unwrap().0,
    );
    let give_up = Instant::now() + CHROMIUM_LIMIT;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > give_up {
            if let Some(p) = started {
                p.signal_group(nix::sys::signal::Signal::SIGKILL);
            }
            let _ = child.wait();
            panic!(
                "chromium did not finish within {CHROMIUM_LIMIT:?} on {}",
                page.display()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let b = Browsed {
        stdout: std::fs::read_to_string(&out).unwrap_or_default(),
        stderr: std::fs::read_to_string(&err).unwrap_or_default(),
    };
    assert!(
        status.success(),
        "chromium failed ({status}):\n{}",
        b.stderr
    );
    b
}

/// The messages pages wrote to the console (Chromium logs each as `…:CONSOLE…] "text",
/// source: …`).
fn console_lines(stderr: &str) -> Vec<&str> {
    stderr.lines().filter(|l| l.contains(":CONSOLE")).collect()
}

/// The addresses a page asked for, from Chromium's net log: every request a page
/// started (its initiator an origin — `null` for a file — where the browser's own
/// background requests have none).
fn page_requests(netlog: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(netlog).unwrap();
    let log: serde_json::Value = serde_json::from_str(&text).expect("the net log is JSON");
    let start_job = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
        .as_u64()
        .expect("the net log names its event types");
    log["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"].as_u64() == Some(start_job))
        .filter(|e| e["params"]["initiator"].as_str() != Some("not an origin"))
        .filter_map(|e| Some(e["params"]["url"].as_str()?.to_string()))
        .collect()
}

/// Attributes and style text in `html` that would load something from outside it.
fn outside_references(html: &str) -> Vec<String> {
    let lower = html.to_lowercase();
    let mut found = Vec::new();
    for (i, _) in lower.match_indices('<') {
        let Some(end) = lower[i..].find('>') else {
            continue;
        };
        let tag = &lower[i..=i + end];
        for attribute in [
            " src=",
            " href=",
            " srcset=",
            " data=",
            " poster=",
            "xlink:href",
            "url(",
        ] {
            if tag.contains(attribute) {
                found.push(tag.to_string());
            }
        }
    }
    for word in ["url(", "@import", "@font-face"] {
        if lower.contains(word) {
            found.push(word.to_string());
        }
    }
    // An address anywhere but the SVG namespace's name.
    let addresses = lower.matches("://").count();
    let namespaces = lower
        .matches("xmlns=\"http://www.w3.org/2000/svg\"")
        .count();
    if addresses != namespaces {
        found.push(format!(
            "{} address(es) besides the SVG namespace",
            addresses - namespaces
        ));
    }
    found
}

/// A page that breaks every rule: a script logging an error, an image from the network.
const BAD_PAGE: &str = "<!DOCTYPE html><html lang=\"en\"><head><title>bad</title></head><body>\
     <img src=\"http://example.invalid/x.png\" alt=\"x\">\
     <script>console.error(\"planted console error\")</script></body></html>";

#[test]
fn the_html_report_renders_in_a_real_browser_loading_nothing() {
    let dir = tempfile::tempdir().unwrap();
    // The checks catch a page that breaks them.
    let bad = dir.path().join("bad.html");
    std::fs::write(&bad, BAD_PAGE).unwrap();
    let bad_log = dir.path().join("bad-netlog.json");
    let b = chromium(dir.path(), &bad, &bad_log, &["--dump-dom".into()]);
    assert!(
        !console_lines(&b.stderr).is_empty(),
        "console error not seen:\n{}",
        b.stderr
    );
    assert_eq!(page_requests(&bad_log), ["http://example.invalid/x.png"]);
    assert!(!outside_references(BAD_PAGE).is_empty());

    let html = report_in(dir.path(), "html");
    assert_eq!(outside_references(&html), Vec::<String>::new());
    let page = dir.path().join("report.html");
    std::fs::write(&page, &html).unwrap();
    let log = dir.path().join("netlog.json");
    let b = chromium(dir.path(), &page, &log, &["--dump-dom".into()]);
    assert_eq!(
        console_lines(&b.stderr),
        Vec::<&str>::new(),
        "console output"
    );
    assert_eq!(
        page_requests(&log),
        Vec::<String>::new(),
        "the page requested something"
    );
    check_rendered_dom(&b.stdout);
}

/// The DOM after Chromium rendered the page: the proposal table with every variant, the
/// plots as labelled images, the accessibility basics, and the hostile texts as text.
fn check_rendered_dom(dom: &str) {
    assert!(dom.contains("<html lang=\"en\">"), "{dom}");
    assert!(dom.contains("<title>optgate report: shared-report</title>"));
    assert!(
        dom.contains("<caption>Variants sorted by Weighted Score"),
        "no proposal table:\n{dom}"
    );
    for v in ["faster", "slower", "noisy"] {
        assert!(
            dom.contains(&format!("<th scope=\"row\">{v}</th>")),
            "no row of {v}"
        );
    }
    let svgs: Vec<&str> = dom
        .match_indices("<svg ")
        .map(|(i, _)| &dom[i..i + dom[i..].find('>').unwrap()])
        .collect();
    assert_eq!(svgs.len(), 5, "the speed-ups and one plot per arm");
    for s in &svgs {
        assert!(
            s.contains("role=\"img\"") && s.contains("aria-labelledby=\"id-plot-"),
            "{s}"
        );
    }
    assert!(dom.contains("<title id=\"id-plot-1\">Steady-state speed-up"));
    assert_eq!(dom.matches("<h1>").count(), 1);
    assert_eq!(
        dom.matches("<table>").count(),
        dom.matches("<table>\n<caption>").count()
    );
    assert!(!dom.contains("<th>"), "a header cell without scope");
    for section in [
        "Decisions",
        "Plots",
        "Matched per-epoch table",
        "Checklist",
        "Provenance",
    ] {
        assert!(dom.contains(&format!("<h2>{section}</h2>")), "no {section}");
    }
    // The hostile texts are text: no element came of them.
    assert!(!dom.contains("<script") && !dom.contains("<img"), "{dom}");
    assert!(dom.contains("&lt;script&gt;alert(2)&lt;/script&gt;"));
}

/// Width and height of a PNG, from its IHDR chunk; `None` when it is not a PNG.
fn png_size(png: &[u8]) -> Option<(u32, u32)> {
    const SIGNATURE: &[u8] = b"\x89PNG\r\n\x1a\n";
    if png.len() < 24 || &png[..8] != SIGNATURE || &png[12..16] != b"IHDR" {
        return None;
    }
    let be = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    Some((be(&png[16..20]), be(&png[20..24])))
}

#[test]
fn the_html_report_gives_a_screenshot() {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("report.html");
    std::fs::write(&page, report_in(dir.path(), "html")).unwrap();
    let blank = dir.path().join("blank.html");
    std::fs::write(
        &blank,
        "<!DOCTYPE html><html lang=\"en\"><title>blank</title></html>",
    )
    .unwrap();
    let mut sizes = Vec::new();
    for (name, file) in [("report", &page), ("blank", &blank)] {
        let shot = dir.path().join(format!("{name}.png"));
        let log = dir.path().join(format!("{name}-netlog.json"));
        chromium(
            dir.path(),
            file,
            &log,
            &[
                format!("--screenshot={}", shot.display()),
                "--window-size=1200,2400".into(),
            ],
        );
        let png = std::fs::read(&shot).unwrap_or_default();
        assert_eq!(
            png_size(&png),
            Some((1200, 2400)),
            "{name}: not a 1200×2400 PNG"
        );
        sizes.push(png.len());
    }
    // Tables, text and plots compress far worse than a white page of the same size.
    assert!(
        sizes[0] > 4 * sizes[1],
        "the report's screenshot looks blank: {sizes:?} bytes"
    );
}

#[test]
fn junit_output_is_valid_with_a_case_per_variant() {
    let dir = tempfile::tempdir().unwrap();
    let xml = report_in(dir.path(), "junit");
    let file = dir.path().join("junit.xml");
    std::fs::write(&file, &xml).unwrap();
    let xsd = repo_root().join("tests/fixtures/junit/junit-10.xsd");
    let xmllint = |args: &[&str]| {
        let o = Command::new(tool("xmllint")).args(args).output().unwrap();
        (o.status.success(), stdout(&o), stderr(&o))
    };
    let (ok, _, why) = xmllint(&[
        "--noout",
        "--schema",
        xsd.to_str().unwrap(),
        file.to_str().unwrap(),
    ]);
    assert!(ok, "{why}\n{xml}");

    let report: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("exec/report.json")).unwrap(),
    )
    .unwrap();
    let variants = report["variants"].as_array().unwrap();
    let path = file.to_str().unwrap();
    let (_, count, _) = xmllint(&["--xpath", "count(//testsuite/testcase)", path]);
    assert_eq!(count.trim(), variants.len().to_string());
    let (_, suites, _) = xmllint(&["--xpath", "string(/testsuites/testsuite/@name)", path]);
    assert_eq!(suites.trim(), "shared-report");
    for v in variants {
        let (name, decision) = (v["name"].as_str().unwrap(), v["decision"].as_str().unwrap());
        let (_, element, _) = xmllint(&[
            "--xpath",
            &format!("name(//testcase[@name='{name}']/*[1])"),
            path,
        ]);
        let expected = match decision {
            "accept" => "system-out",
            "reject" => "failure",
            "failed" => "error",
            _ => "skipped",
        };
        assert_eq!(element.trim(), expected, "{name} ({decision})");
        if decision != "accept" {
            let (_, message, _) = xmllint(&[
                "--xpath",
                &format!("string(//testcase[@name='{name}']/*[1]/@message)"),
                path,
            ]);
            assert_eq!(
                message.trim(),
                format!("{decision}: {}", v["reason"].as_str().unwrap())
            );
        }
    }
    assert!(variants.iter().any(|v| v["decision"] == "accept"));
    assert!(variants.iter().any(|v| v["decision"] == "reject"));
}

#[test]
fn a_daemon_experiments_report_comes_as_html_and_junit_too() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let _guard = StopOnDrop(home.clone());
    let exp = write_experiment(dir.path(), EXPERIMENT);
    let o = cli(&home, &["submit", exp.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let id = stdout(&o).trim().to_string();
    wait_for(
        "the experiment to be decided",
        Duration::from_secs(300),
        || (status(&home, &id)["state"] == "decided").then_some(()),
    );
    let o = cli(&home, &["report", &id, "--format", "html"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let html = stdout(&o);
    assert!(html.contains("<caption>Variants sorted by Weighted Score"));
    assert_eq!(
        html.matches("<svg ").count(),
        5,
        "the speed-ups and one plot per arm"
    );
    assert_eq!(outside_references(&html), Vec::<String>::new());
    let o = cli(&home, &["report", &id, "--format", "junit"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let xml = stdout(&o);
    assert_eq!(xml.matches("<testsuite ").count(), 1);
    assert_eq!(xml.matches("<testcase ").count(), 3, "{xml}");
}

/// A fast real app for a history: each arm prints three epochs of the seconds its file
/// holds (the baseline `base`, the variant `var`), so the test sets each execution's level.
fn drift_experiment(dir: &Path) -> String {
    let (base, var) = (dir.join("base"), dir.join("var"));
    format!(
        r#"name: drift-page
app:
  command: [bash, -c, 'if [ "${{X:-0}}" = 1 ]; then f={var}; else f={base}; fi; b=$(cat "$f"); for e in 1 2 3; do echo "epoch $e took $b s"; done']
metric:
  pattern: 'epoch (?P<epoch>\d+) took (?P<seconds>[0-9.]+) s'
replicates: 3
allow_few_replicates: true
variants:
  - name: omp6
    dimension: l2_threading_model
    env: {{ X: "1" }}
"#,
        var = var.display(),
        base = base.display()
    )
}

/// `optgate history NAME --format html` of eight real executions whose baseline is 15 %
/// slower from the fifth on, in headless Chromium with the network shut: the page renders
/// with the executions table, one plot per series (the baseline's, omp6's speed-up), the
/// change point in words and in the baseline's table, logs nothing to the console and
/// requests nothing. `--format json` is `--json`. Planted bugs caught: the series left out
/// of the page (no `<svg>`), an image from the network on it (an outside reference).
#[test]
fn the_history_page_renders_in_a_real_browser_with_its_series() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let exp = write_experiment(dir.path(), &drift_experiment(dir.path()));
    let base = [1.00, 1.02, 0.99, 1.01, 1.15, 1.17, 1.14, 1.16];
    for (i, b) in base.iter().enumerate() {
        std::fs::write(dir.path().join("base"), format!("{b:.4}\n")).unwrap();
        std::fs::write(dir.path().join("var"), format!("{:.4}\n", b * 0.7)).unwrap();
        let out = dir.path().join(format!("run{i}"));
        let args = ["run", exp.to_str().unwrap(), "--out", out.to_str().unwrap()];
        let o = cli(&home, &[&args[..], &["--quiet"]].concat());
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    }
    let shown = |args: &[&str]| {
        let o = cli(&home, &[&["history", "drift-page"], args].concat());
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        stdout(&o)
    };
    assert_eq!(shown(&["--format", "json"]), shown(&["--json"]));
    let html = shown(&["--format", "html"]);
    assert_eq!(outside_references(&html), Vec::<String>::new());
    let page = dir.path().join("history.html");
    std::fs::write(&page, &html).unwrap();
    let log = dir.path().join("netlog.json");
    let b = chromium(dir.path(), &page, &log, &["--dump-dom".into()]);
    assert_eq!(console_lines(&b.stderr), Vec::<&str>::new(), "console");
    assert_eq!(page_requests(&log), Vec::<String>::new(), "requests");
    check_history_dom(&b.stdout);
}

/// The rendered history page: its title, the executions table (8 rows), one labelled plot
/// per series, the change point in words and marked in the baseline's table.
fn check_history_dom(dom: &str) {
    assert!(
        dom.contains("<title>optgate history: drift-page</title>"),
        "{dom}"
    );
    assert!(
        dom.contains("<caption>Executions, oldest first</caption>"),
        "{dom}"
    );
    let executions =
        &dom[dom.find("<h2>Executions</h2>").unwrap()..dom.find("<h2>Changes</h2>").unwrap()];
    assert_eq!(executions.matches("<tr><th scope=\"row\">").count(), 8);
    let svgs: Vec<&str> = dom
        .match_indices("<svg ")
        .map(|(i, _)| &dom[i..i + dom[i..].find('>').unwrap()])
        .collect();
    assert_eq!(svgs.len(), 2, "the baseline's plot and omp6's");
    for s in &svgs {
        assert!(
            s.contains("role=\"img\"") && s.contains("aria-labelledby=\"id-history-"),
            "{s}"
        );
    }
    assert!(
        dom.contains("<li>baseline 15 % slower from execution 5 on, p = "),
        "{dom}"
    );
    assert!(dom.contains("<li>omp6's speed-up unchanged</li>"), "{dom}");
    assert!(dom.contains("<h3>Baseline steady-state value (seconds)</h3>"));
    assert!(dom.contains("<h3>omp6 speed-up over the baseline</h3>"));
    assert_eq!(dom.matches("new level, p = ").count(), 1, "{dom}");
    assert_eq!(dom.matches("<h1>").count(), 1);
    assert!(!dom.contains("<th>"), "a header cell without scope");
}

/// A campaign whose description and a stage's description carry a script, an image from a
/// listener and an ESC sequence, run through `optgate run --format html`: the page shows
/// them as text in a real browser (no request, nothing on the console, no element from
/// them), and `--format junit` of the same campaign validates (both printed the Markdown).
#[test]
fn a_campaign_report_comes_as_an_inert_page_and_valid_junit() {
    let dir = tempfile::tempdir().unwrap();
    let hostile = "description: \"pass <script>document.title='PWNED'</script><img src=http://127.0.0.1:9/leak.png> \\e[2J\"";
    let yaml = campaign_common::campaign_yaml("hostile-pass", &dir.path().join("ledger"))
        .replacen(
            "description: a PECAN-style pass over a purpose-built workload",
            hostile,
            1,
        )
        .replacen(
            "description: prefetch the inputs",
            "description: \"<b>bold</b> & <i>x</i>\"",
            1,
        );
    assert!(yaml.contains("PWNED") && yaml.contains("<b>bold"), "{yaml}");
    let exp = dir.path().join("campaign.yaml");
    std::fs::write(&exp, yaml).unwrap();
    let root = dir.path().join("exec");
    let shown = |format: &str| {
        let o = run(&[
            "run",
            exp.to_str().unwrap(),
            "--out",
            root.to_str().unwrap(),
            "--quiet",
            "--format",
            format,
        ]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        stdout(&o)
    };
    let html = shown("html");
    assert!(
        html.starts_with("<!DOCTYPE html>"),
        "not a page: {html:.300}"
    );
    // The planted image is shown as text (escaped), its address with it: that text is no
    // reference; anything else is.
    let planted = "&lt;img src=http://127.0.0.1:9/leak.png&gt;";
    assert!(
        html.contains(planted),
        "the planted tag is not shown as text"
    );
    assert_eq!(
        outside_references(&html.replace(planted, "")),
        Vec::<String>::new()
    );
    let page = dir.path().join("campaign.html");
    std::fs::write(&page, &html).unwrap();
    let log = dir.path().join("netlog.json");
    let b = chromium(dir.path(), &page, &log, &["--dump-dom".into()]);
    assert_eq!(
        console_lines(&b.stderr),
        Vec::<&str>::new(),
        "console output"
    );
    assert_eq!(
        page_requests(&log),
        Vec::<String>::new(),
        "the page requested something"
    );
    assert!(!b.stdout.contains("<title>PWNED"), "the script ran");
    assert!(
        !b.stdout.contains("<img src=\"http://127.0.0.1"),
        "an image from input"
    );
    assert!(!b.stdout.contains("<b>bold</b>"), "markup from input");
    assert!(
        b.stdout.contains("&lt;script&gt;document.title"),
        "the description not shown"
    );

    let xml = shown("junit");
    let file = dir.path().join("junit.xml");
    std::fs::write(&file, &xml).unwrap();
    let xsd = repo_root().join("tests/fixtures/junit/junit-10.xsd");
    let o = Command::new(tool("xmllint"))
        .args([
            "--noout",
            "--schema",
            xsd.to_str().unwrap(),
            file.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}\n{xml}", stderr(&o));
    assert!(!xml.contains('\u{1b}'), "a raw ESC in the XML");
    for format in ["csv", "table", "markdown"] {
        let text = shown(format);
        assert!(!text.contains('\u{1b}'), "a raw ESC in the {format}");
        assert_ne!(text, shown("html"), "{format} printed the page");
    }
}
