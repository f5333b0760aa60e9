#!/usr/bin/env bash
# Writes the committed seed corpora under fuzz/seeds/<target>/ from the repository's real
# inputs: experiments/*.yaml and the tests' experiment snippets, small samples CSVs
# (handwritten and benches/analyze/gen_samples.py), the DFTracer fixtures of
# tests/fixtures/dftracer-traces (cut to their first lines; plain and gzip), and protocol
# exchanges (one JSON line each), and hostile inputs (deep nesting, huge
# scalars, many errors, NUL, huge launch shapes, a 100k-deep submit). Deterministic; run
# from anywhere. Needs bash, gzip, python3 (standard library only). The trace seeds are
# cut from the DFTracer project's traces: MIT, see tests/fixtures/README.md and
# tests/fixtures/dftracer-traces/LICENSE.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
seeds=$root/fuzz/seeds
rm -rf "$seeds"
mkdir -p "$seeds"/{experiment_load,samples_csv,trace_summary,protocol_decode,run_records,report_formats}

# --- experiment_load --------------------------------------------------------------------
e=$seeds/experiment_load
for f in "$root"/experiments/*.yaml; do cp "$f" "$e/$(basename "$f")"; done
fake() { # name, extra: tests/support/mod.rs fake_app_experiment
  printf '%s\n' "name: $1" "app:" \
    "  command: [bash, -c, 'for e in 1 2 3; do echo \"epoch \$e took 0.0\$e s\"; done']" \
    "metric:" "  pattern: 'epoch (?P<epoch>\\d+) took (?P<seconds>[0-9.]+) s'" \
    "replicates: 5" "variants:" "  - name: v1" "    dimension: l2_threading_model" \
    '    env: { X: "1" }'
  printf '%s' "$2"
}
fake x "" > "$e/fake-app.yaml"
fake x "  - name: v2
    dimension: l1_vectorization
    build: { command: cc -O3 x.c -o \"\$OPTGATE_BUILD_DIR/x\" }
    launcher: { cpus_per_task: 2 }
    app: { time_limit: 30d }
scheduler: { kind: slurm, partition: debug, extra_directives: ['--exclusive'] }
max_replicates: 40
design: independent
compare: { steady_epochs: \"3..\", alpha: 0.01, min_effect_pct: 5 }
" > "$e/fake-app-cluster.yaml"
fake "bad name!" "  - name: v1
    dimension: l9_warp_drive
    env: { \"1BAD\": x }
" | sed 's/replicates: 5/replicates: 3\nrepilcates: 6/' > "$e/every-problem.yaml"
printf '%s\n' "name: x" "app: { command: [/bin/true] }" \
  "metric: { pattern: '(?P<epoch>\\d) (?P<seconds>\\d)' }" "variants: []" > "$e/no-variants.yaml"
printf '%s\n' "name: x" "app:" "  command: \"unterminated" "metric: {}" > "$e/invalid-yaml.yaml"
{
  echo "a: &a [x, x, x]"
  echo "b: &b [*a, *a, *a]"
  echo "c: &c [*b, *b, *b]"
  echo "name: [[[[[[[[[[]]]]]]]]]]"
} > "$e/aliases-and-depth.yaml"

# --- experiment_load: hostile inputs, cut to fit -max_len=65536 --------------
python3 - "$e" <<'PY'
import sys
e = sys.argv[1]
head = ("name: hostile\napp:\n  command: [/bin/true]\n"
        "metric: { pattern: 'epoch (?P<epoch>\\d+) took (?P<seconds>[0-9.]+) s' }\n"
        "replicates: 5\nvariants:\n  - name: v1\n    dimension: l2_threading_model\n"
        "    env: { X: \"1\" }\n")
def w(name, text):
    open(f"{e}/hostile-{name}.yaml", "w").write(text)
w("deep-flow-30k", "name: " + "[" * 30000 + "\n")
w("deep-flow-closed-20k", "name: " + "[" * 20000 + "]" * 20000 + "\n")
w("deep-block-240", "".join("  " * i + "a:\n" for i in range(240)) + "  " * 240 + "b: 1\n")
w("deep-description-flow", head + "description: " + "{a: " * 8000 + "1" + "}" * 8000 + "\n")
w("huge-queue-name", head + "scheduler: { kind: slurm, queue: " + "q" * 60000 + " }\n")
w("huge-env-key", head.replace('env: { X: "1" }', "env:\n      ? " + "K" * 35000 + "\n      : x"))
w("huge-time-limit", head + "scheduler: { kind: slurm, time_limit: " + "9" * 50000 + " }\n")
w("many-bad-files", head + "correctness:\n  files: [" + ", ".join(["'../x\\0'"] * 500 + ["/abs"] * 500) + "]\n")
w("many-bad-env", head.replace('env: { X: "1" }', "env: {" + ", ".join(f"'{i}BAD': x" for i in range(800)) + "}"))
w("many-bad-unset", head + "    unset: [" + ", ".join(["'A=B'"] * 800) + "]\n")
w("many-bad-directives", head + "scheduler: { kind: slurm, extra_directives: [" + ", ".join(["'--x\\n#SBATCH --uid=0'"] * 500) + "] }\n")
w("many-bad-checklist", head + "checklist:\n" + "".join(f"  bogus_{i}: {{ verdict: x }}\n" for i in range(800)))
w("nul-in-args", head.replace("command: [/bin/true]", 'command: [/bin/echo]\n  args: ["a\\0b", "c"]'))
w("nul-raw-byte", head.replace("name: hostile", "name: ho\0stile"))
w("huge-launch-shape", head + "scheduler: { kind: slurm, nodes: 65536, tasks_per_node: 65536, cpus_per_task: 65536 }\n")
w("u32-overflow-shape", head + "scheduler: { kind: slurm, nodes: 4294967295, tasks_per_node: 4294967295 }\n")
PY

# --- samples_csv ------------------------------------------------------------------------
s=$seeds/samples_csv
py() { python3 - "$@"; }
py "$s" <<'PY'
import sys, random
out = sys.argv[1]
rnd = random.Random(20251129)
def table(arms, reps, epochs, block=True, header=True, fmt="{:.6f}"):
    rows = ["variant,replicate,epoch,seconds" + (",block" if block else "")] if header else []
    for r in range(1, reps + 1):
        for a, f in arms:
            for e in range(1, epochs + 1):
                t = 10 * f * (1.5 if e == 1 else 1.0) * (1 + rnd.gauss(0, 0.02))
                rows.append(f"{a},{r},{e}," + fmt.format(t) + (f",{r}" if block else ""))
    return "\n".join(rows) + "\n"
w = lambda name, text: open(f"{out}/{name}", "w").write(text)
w("paired-blocked.csv", table([("baseline", 1.0), ("v1", 0.9), ("v2", 1.0)], 7, 4))
w("no-block-column.csv", table([("baseline", 1.0), ("fast", 0.95)], 6, 3, block=False))
w("independent.csv", "# baseline=control design=independent\n"
  + table([("control", 1.0), ("v1", 0.97)], 8, 3, block=False))
w("blocked-design.csv", "# baseline=base design=blocked\n"
  + table([("base", 1.0), ("aa-control", 1.0), ("v1", 1.1)], 6, 2))
w("quoted-bom-comments.csv", "\ufeff# a comment\n" + 'variant,"replicate",epoch,seconds\n'
  + '"baseline",1,1,"1.5"\n\n"base""line",1,2,1.4\n  v1 , 1 , 1 , 1.2 \n'
  + "# trailing comment\nv1,1,2,1e0\nbaseline,2,1,NaN\nv1,2,1,-3\nv1,2,1,inf\n")
w("columns-reordered.csv", "seconds,epoch,block,variant,replicate\n1.0,1,1,baseline,1\n"
  "0.9,1,1,v1,1\n1.1,1,2,baseline,2\n0.95,1,2,v1,2\n")
w("missing-epochs.csv", "variant,replicate,epoch,seconds\nbaseline,1,1,1\nbaseline,1,3,1\n"
  "v1,1,2,1\nv1,2,99999999999,1\n,,,\nbaseline,x,1,2\n")
w("header-only.csv", "variant,replicate,epoch,seconds,block\n")
PY
python3 "$root/benches/analyze/gen_samples.py" "$s/gen-samples-3x6x5.csv" \
  --variants 3 --replicates 6 --epochs 5 --seed 7 >/dev/null 2>&1

# --- trace_summary ----------------------------------------------------------------------
t=$seeds/trace_summary
fx=$root/tests/fixtures/dftracer-traces
# (zcat stops early on SIGPIPE when head has enough: not an error.)
unzip_head() { { zcat "$1" || true; } | head -n "$2"; }
unzip_head "$fx/pydftracer-2.2/compute-3epochs-4steps.pfw.gz" 100 > "$t/pydftracer-2.2.pfw"
unzip_head "$fx/dlio-2023/posix-corona237.pfw.gz" 40 > "$t/dlio-2023-posix.pfw"
unzip_head "$fx/dlio-2023/dlio-unet3d-ruby165-subset.pfw.gz" 60 > "$t/dlio-2023-unet3d.pfw"
{ zcat "$fx/dlio-2023/dlio-unet3d-ruby165-subset.pfw.gz" || true; } | grep -m 40 '"epoch"' \
  > "$t/dlio-2023-epochs.pfw"
unzip_head "$fx/cm1-2024/cm1-DEFAULT-3537781-preload.pfw.gz" 60 > "$t/cm1-2024.pfw"
cp "$fx/pydftracer-2.2/compute-3epochs-4steps.pfw.gz" "$t/pydftracer-2.2.pfw.gz"
unzip_head "$fx/cm1-2024/cm1-DEFAULT-3537780-preload.pfw.gz" 300 | gzip -n -9 > "$t/cm1-2024.pfw.gz"
unzip_head "$fx/dlio-2023/posix-corona237.pfw.gz" 200 | gzip -n -9 > "$t/dlio-2023-posix.pfw.gz"
# Two gzip members (DFTracer appends), and a torn gzip stream (a killed writer).
{ head -n 10 "$t/pydftracer-2.2.pfw" | gzip -n; tail -n +11 "$t/pydftracer-2.2.pfw" | gzip -n; } \
  > "$t/two-members.pfw.gz"
head -c 400 "$t/pydftracer-2.2.pfw.gz" > "$t/torn.pfw.gz"
{ head -n 12 "$t/pydftracer-2.2.pfw"; printf '{"id":99,"name":"forward","cat":"comp'; } > "$t/torn-line.pfw"
{ # Markers: epoch intervals by name (trace summary --epoch-marker epoch)
  echo '{"name":"CM","cat":"dftracer","ph":"M","args":{"name":"time_metric","value":"NS"}}'
  for k in 1 2 3; do
    echo "{\"id\":$k,\"name\":\"epoch\",\"cat\":\"compute\",\"ts\":${k}000,\"dur\":900,\"ph\":\"X\",\"args\":{\"epoch\":$k}}"
    echo "{\"id\":$((k+10)),\"name\":\"step\",\"cat\":\"compute\",\"ts\":${k}100,\"dur\":300,\"ph\":1}"
    echo "{\"name\":\"read\",\"cat\":\"POSIX\",\"ts\":${k}500,\"dur\":1.5e2,\"ph\":\"X\",\"args\":{\"epoch\":\"$k\"}}"
  done
  echo '{"name":"count","cat":"c","ph":"C","ts":1,"args":{"v":1}}'
} > "$t/markers-ns.pfw"

# --- protocol_decode --------------------------------------------------------------------
p=$seeds/protocol_decode
hello='{"protocol":1,"version":"0.1.0"}'
printf '%s\n%s\n' "$hello" '{"status":{"id":null}}' > "$p/status-all"
printf '%s\n%s\n' "$hello" '{"status":{"id":"20260101-abcd"}}' > "$p/status-one"
printf '%s\n%s\n' "$hello" '{"report":{"id":"20260101-abcd"}}' > "$p/report"
printf '%s\n%s\n' "$hello" '{"cancel":{"id":"20260101-abcd"}}' > "$p/cancel"
printf '%s\n%s\n' "$hello" '{"shutdown":{}}' > "$p/shutdown"
printf '%s\n' '{"protocol":2,"version":"9.9.9"}' > "$p/hello-other-version"
printf '%s\n' "$hello" > "$p/hello-only"
py "$p" "$root" <<'PY'
import sys, json
p, root = sys.argv[1], sys.argv[2]
hello = '{"protocol":1,"version":"0.1.0"}'
for name in ["quickstart", "pecan-local"]:
    path = f"{root}/experiments/{name}.yaml"
    req = {"submit": {"source_path": f"/home/user/optgate/experiments/{name}.yaml",
                      "source_text": open(path).read()}}
    open(f"{p}/submit-{name}", "w").write(hello + "\n" + json.dumps(req) + "\n")
# Hostile submits: one whose text nests 100k lists (200 KB: run this target with
# -max_len=262144), a frame nested past serde_json's recursion limit, NUL and a
# many-error file inside a submit.
def submit(name, text):
    req = {"submit": {"source_path": "/home/user/exp.yaml", "source_text": text}}
    open(f"{p}/submit-{name}", "w").write(hello + "\n" + json.dumps(req) + "\n")
submit("deep-100k", "[" * 100000 + "]" * 100000)
submit("deep-open-100k", "name: " + "[" * 100000)
submit("nul", "name: a\0b\napp: { command: [/bin/true], args: [\"a\\0b\"] }\n")
submit("many-errors", "name: x\ncorrectness: { files: [" + ", ".join(["'/abs'"] * 2000) + "] }\n")
open(f"{p}/frame-deep-json", "w").write(hello + "\n" + '{"submit":' + "[" * 50000 + "]" * 50000 + "}\n")
welcome = json.dumps({"welcome": {"protocol": 1, "version": "0.1.0", "pid": 42,
                                  "state_dir": "/home/u/.local/state/optgate"}})
status = {"status": {"daemon": {"pid": 42, "version": "0.1.0", "protocol": 1,
    "state_dir": "/s", "started_at": "2026-01-01T00:00:00Z"},
  "experiments": [{"id": "20260101-abcd", "name": "quickstart", "state": "running",
    "reason": None, "scheduler": "local", "experiment_file": "/e.yaml", "root": "/r",
    "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:01:00Z",
    "runs": {"total": 28, "done": 4, "completed": 3, "failed": 1, "cancelled": 0,
             "queued": 4, "pending": 20},
    "blocks": 7, "max_blocks": 14, "looks": 1, "planned_looks": 8,
    "decisions": [{"variant": "o3-native", "decision": "inconclusive", "reason": "n < 7"}],
    "jobs": [{"name": "og-20260101-abcd-b1", "block": 1, "attempt": 0,
              "run_ids": ["b0001-baseline"], "scheduler_job_id": "123",
              "state": "finished", "detail": None}]}]}}
replies = {
  "reply-status": status,
  "reply-submitted": {"submitted": {"id": "20260101-abcd", "root": "/r"}},
  "reply-report": {"report": {"id": "x", "state": "decided", "report": {"a": [1, 2.5, None]}}},
  "reply-cancelled": {"cancelled": {"id": "x", "previous_state": "running", "state": "cancelled"}},
  "reply-shutting-down": "shutting_down",
  "reply-error": {"error": {"kind": "invalid_experiment", "message": "exp.yaml:1:1: error"}},
}
for name, r in replies.items():
    open(f"{p}/{name}", "w").write(welcome + "\n" + json.dumps(r) + "\n")
open(f"{p}/hello-refused", "w").write(json.dumps(
    {"error": {"kind": "refused", "message": "connection from uid 1 refused"}}) + "\n")
PY
# --- run_records: task and node records as optgate step writes them, and planted ones ----
python3 - "$seeds/run_records" <<'PY'
import json, sys
d = sys.argv[1]
task = {"scheduler": "slurm", "rank": 0, "local_rank": 0, "node": "n1", "host": "h",
        "step_size": 2, "cpus_allowed": 2, "cpus_allowed_list": "0-1", "threads_max": 2,
        "cpu_user_s": 1.5, "cpu_system_s": 0.1, "cpu_s": 1.6, "max_rss_kib": 4096,
        "wall_s": 1.0, "end": "exited", "exit_code": 0, "signal": None}
node = {"node": "n1", "host": "h", "governor": "performance", "load_avg": 0.5,
        "cores": 4, "energy_j": 12.5}
def put(name, data, prefix=""):
    open(f"{d}/{name}", "w").write(prefix + json.dumps(data))
put("task", task)
put("task-negative-cpu", dict(task, cpu_user_s=-1000))
put("task-huge-cpu", dict(task, cpu_user_s=1e308, cpu_s=1e308))
put("task-rank-outside-step", dict(task, rank=5))
put("task-signaled", dict(task, end="signaled", exit_code=None, signal=15))
put("node", node, "N")
put("node-huge-load", dict(node, load_avg=100000000.0), "N")
put("node-no-energy", dict(node, energy_j=None, energy_unmeasured="rapl_unreadable"), "N")
open(f"{d}/task-cut", "w").write(json.dumps(task)[:40])
PY

# --- report_formats: the committed sample reports (first byte: 0 experiment, 1 campaign) -
r=$seeds/report_formats
{ printf '\x00'; cat "$root/examples/pecan/sample-report.json"; } > "$r/experiment-pecan"
{ printf '\x01'; cat "$root/crates/optgate-report/tests/fixtures/campaign-report.json"; } \
  > "$r/campaign"

du -sh "$seeds"/* | sed "s|$root/||"
