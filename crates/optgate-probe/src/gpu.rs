//! GPUs from vendor tools: finding `nvidia-smi`/`rocm-smi` on `PATH`, running them with a
//! time limit, and parsing their output (pure functions, tested on real output). No tool
//! is a fact (no GPUs), not an error.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::types::Gpu;

/// Why a vendor tool's output could not be understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{tool} output line {line_no} ({line:?}): {detail}")]
pub struct GpuParseError {
    /// The tool (`nvidia-smi`, `rocm-smi`).
    pub tool: &'static str,
    /// 1-based line number in its output.
    pub line_no: usize,
    /// The line itself.
    pub line: String,
    /// What was wrong with it.
    pub detail: String,
}

/// The arguments `nvidia-smi` is run with; [`parse_nvidia_smi`] reads their output.
pub const NVIDIA_SMI_ARGS: &[&str] = &[
    "--query-gpu=name,memory.total,driver_version",
    "--format=csv,noheader",
];

/// The arguments `rocm-smi` is run with; [`parse_rocm_smi`] reads their output.
pub const ROCM_SMI_ARGS: &[&str] = &["--showproductname", "--csv"];

/// nvidia-smi prints these instead of a value it does not have.
fn not_available(v: &str) -> bool {
    let v = v.trim().trim_start_matches('[').trim_end_matches(']');
    v.eq_ignore_ascii_case("N/A") || v.eq_ignore_ascii_case("Not Supported") || v.is_empty()
}

fn parse_mib(v: &str) -> Option<Result<u64, String>> {
    if not_available(v) {
        return None;
    }
    let v = v.trim();
    let (num, unit) = v.split_once(' ').unwrap_or((v, "MiB"));
    let n: u64 = match num.trim().parse() {
        Ok(n) => n,
        Err(_) => return Some(Err(format!("memory {v:?} is not a number"))),
    };
    let factor = match unit.trim() {
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        "KiB" => 1 << 10,
        other => return Some(Err(format!("unknown memory unit {other:?}"))),
    };
    Some(Ok(n * factor))
}

/// Parses `nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader`
/// output: one GPU per line, `NAME, MEMORY MiB, DRIVER`. The fields are taken from the
/// right so that a comma inside a product name cannot shift them. `[N/A]` memory (GB10
/// unified memory) is `None`.
pub fn parse_nvidia_smi(text: &str) -> Result<Vec<Gpu>, GpuParseError> {
    let mut gpus = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let err = |detail: String| GpuParseError {
            tool: "nvidia-smi",
            line_no: i + 1,
            line: line.to_string(),
            detail,
        };
        let mut fields = line.rsplitn(3, ',');
        let (Some(driver), Some(memory), Some(name)) =
            (fields.next(), fields.next(), fields.next())
        else {
            return Err(err("expected 3 comma-separated fields".to_string()));
        };
        let memory_total_bytes = parse_mib(memory).transpose().map_err(err)?;
        let name = name.trim();
        if name.is_empty() {
            return Err(err("empty GPU name".to_string()));
        }
        gpus.push(Gpu {
            vendor: "nvidia".to_string(),
            index: gpus.len() as u32,
            name: name.to_string(),
            memory_total_bytes,
            driver_version: (!not_available(driver)).then(|| driver.trim().to_string()),
        });
    }
    Ok(gpus)
}

fn looks_like_hex_id(v: &str) -> bool {
    v.strip_prefix("0x")
        .is_some_and(|h| !h.is_empty() && h.chars().all(|c| c.is_ascii_hexdigit()))
}

fn amd_gpu(index: u32, series: Option<&str>, model: Option<&str>) -> Gpu {
    // "Card series" is the readable product on most versions; some print a bare PCI id
    // there and the name under "Card model" instead.
    let series = series.map(str::trim).filter(|s| !s.is_empty());
    let model = model.map(str::trim).filter(|s| !s.is_empty());
    let name = match (series, model) {
        (Some(s), Some(m)) if looks_like_hex_id(s) && !looks_like_hex_id(m) => m.to_string(),
        (Some(s), _) if looks_like_hex_id(s) => format!("AMD GPU {s}"),
        (Some(s), _) => s.to_string(),
        (None, Some(m)) => m.to_string(),
        (None, None) => "AMD GPU".to_string(),
    };
    Gpu {
        vendor: "amd".to_string(),
        index,
        name,
        memory_total_bytes: None,
        driver_version: None,
    }
}

/// Parses `rocm-smi --showproductname` output, either its `--csv` form (a header
/// `device,Card series,Card model,…` then one `cardN,…` row per GPU) or its plain form
/// (`GPU[0]  : Card series:  …` lines between banners).
pub fn parse_rocm_smi(text: &str) -> Result<Vec<Gpu>, GpuParseError> {
    let lines: Vec<&str> = text.lines().collect();
    if let Some(header_at) = lines
        .iter()
        .position(|l| l.trim_start().starts_with("device,"))
    {
        let header: Vec<String> = lines[header_at]
            .split(',')
            .map(|h| h.trim().to_lowercase())
            .collect();
        let col = |name: &str| header.iter().position(|h| h == name);
        let (series_col, model_col) = (col("card series"), col("card model"));
        if series_col.is_none() && model_col.is_none() {
            return Err(GpuParseError {
                tool: "rocm-smi",
                line_no: header_at + 1,
                line: lines[header_at].to_string(),
                detail: "no \"Card series\" or \"Card model\" column".to_string(),
            });
        }
        let mut gpus = Vec::new();
        for line in &lines[header_at + 1..] {
            let cells: Vec<&str> = line.split(',').collect();
            if !cells.first().is_some_and(|c| c.trim().starts_with("card")) {
                continue;
            }
            let cell = |c: Option<usize>| c.and_then(|i| cells.get(i).copied());
            gpus.push(amd_gpu(
                gpus.len() as u32,
                cell(series_col),
                cell(model_col),
            ));
        }
        return Ok(gpus);
    }

    // Plain form: collect per GPU index, keeping first-seen order.
    let mut found: Vec<(u32, Option<String>, Option<String>)> = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(rest) = line.trim_start().strip_prefix("GPU[") else {
            continue;
        };
        let Some((idx, rest)) = rest.split_once(']') else {
            continue;
        };
        let index: u32 = idx.trim().parse().map_err(|_| GpuParseError {
            tool: "rocm-smi",
            line_no: i + 1,
            line: line.to_string(),
            detail: format!("GPU index {idx:?} is not a number"),
        })?;
        let rest = rest.trim_start().trim_start_matches(':');
        let Some((key, value)) = rest.split_once(':') else {
            continue;
        };
        let key = key.trim().to_lowercase();
        let value = value.trim().to_string();
        let slot = match found.iter().position(|(n, _, _)| *n == index) {
            Some(p) => p,
            None => {
                found.push((index, None, None));
                found.len() - 1
            }
        };
        match key.as_str() {
            "card series" => found[slot].1 = Some(value),
            "card model" => found[slot].2 = Some(value),
            _ => {}
        }
    }
    Ok(found
        .into_iter()
        .map(|(index, series, model)| amd_gpu(index, series.as_deref(), model.as_deref()))
        .collect())
}

/// Finds an executable called `name` in the directories of `path_var` (a `PATH` value).
pub fn find_on_path(name: &str, path_var: &str) -> Option<PathBuf> {
    path_var
        .split(':')
        .filter(|d| !d.is_empty())
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file() && nix::unistd::access(p, nix::unistd::AccessFlags::X_OK).is_ok())
}

/// Why a tool run by [`run_with_limit`] gave no output.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    #[error("cannot run {}: {source}", program.display())]
    Spawn {
        program: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} did not finish within {} s and was killed", program.display(), limit.as_secs())]
    TimedOut {
        program: std::path::PathBuf,
        limit: Duration,
    },
    #[error("cannot wait for {}: {source}", program.display())]
    Wait {
        program: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} failed ({status})", program.display())]
    Failed {
        program: std::path::PathBuf,
        status: std::process::ExitStatus,
    },
}

/// Runs a tool and returns its standard output. A hung driver can make `nvidia-smi` block
/// for minutes, so the tool is killed after `limit`.
pub fn run_with_limit(program: &Path, args: &[&str], limit: Duration) -> Result<String, ToolError> {
    let spawn = || {
        Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
    };
    // ETXTBSY: a script written a moment ago may still be open in a child another
    // thread forked before its exec; that clears within milliseconds.
    let mut attempt = 0;
    let mut child = loop {
        match spawn() {
            Ok(child) => break child,
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) && attempt < 50 => {
                attempt += 1;
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(source) => {
                return Err(ToolError::Spawn {
                    program: program.to_path_buf(),
                    source,
                });
            }
        }
    };
    // Read on a thread: a tool that fills the pipe would otherwise never exit.
    let mut stdout = child.stdout.take();
    let reader = std::thread::spawn(move || {
        let mut buf = String::new();
        if let Some(out) = stdout.as_mut() {
            let _ = out.read_to_string(&mut buf);
        }
        buf
    });
    let deadline = Instant::now() + limit;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(ToolError::TimedOut {
                    program: program.to_path_buf(),
                    limit,
                });
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(source) => {
                return Err(ToolError::Wait {
                    program: program.to_path_buf(),
                    source,
                });
            }
        }
    };
    let out = reader.join().unwrap_or_default();
    if status.success() {
        Ok(out)
    } else {
        Err(ToolError::Failed {
            program: program.to_path_buf(),
            status,
        })
    }
}

/// What GPU detection found: the GPUs, the tools present, and notes on tools that were
/// present but failed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GpuScan {
    /// GPUs, NVIDIA first then AMD, each vendor indexed from 0.
    pub gpus: Vec<Gpu>,
    /// Tools found on `PATH`.
    pub tools_found: Vec<String>,
    /// What went wrong with a tool that was found.
    pub notes: Vec<String>,
}

/// Looks for vendor tools on `path_var` and asks each for its GPUs.
pub fn scan(path_var: &str, limit: Duration) -> GpuScan {
    let mut scan = GpuScan::default();
    type Parser = fn(&str) -> Result<Vec<Gpu>, GpuParseError>;
    let tools: [(&str, &[&str], Parser); 2] = [
        ("nvidia-smi", NVIDIA_SMI_ARGS, parse_nvidia_smi),
        ("rocm-smi", ROCM_SMI_ARGS, parse_rocm_smi),
    ];
    for (name, args, parse) in tools {
        let Some(program) = find_on_path(name, path_var) else {
            continue;
        };
        scan.tools_found.push(name.to_string());
        match run_with_limit(&program, args, limit) {
            Ok(out) => match parse(&out) {
                Ok(gpus) => scan.gpus.extend(gpus),
                Err(e) => scan.notes.push(e.to_string()),
            },
            Err(e) => scan.notes.push(e.to_string()),
        }
    }
    scan
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvidia_real_lines() {
        // Real `nvidia-smi --query-gpu=name,memory.total,driver_version
        // --format=csv,noheader` output: an A100 node, and a DGX Spark (GB10), whose
        // unified memory nvidia-smi reports as [N/A].
        let a100 = "NVIDIA A100-SXM4-40GB, 40960 MiB, 535.129.03\n";
        let gpus = parse_nvidia_smi(a100).unwrap();
        assert_eq!(gpus.len(), 1);
        assert_eq!(gpus[0].name, "NVIDIA A100-SXM4-40GB");
        assert_eq!(gpus[0].memory_total_bytes, Some(40960 * 1024 * 1024));
        assert_eq!(gpus[0].driver_version.as_deref(), Some("535.129.03"));
        assert_eq!(gpus[0].vendor, "nvidia");

        let gb10 = "NVIDIA GB10, [N/A], 580.126.09\n";
        let gpus = parse_nvidia_smi(gb10).unwrap();
        assert_eq!(gpus[0].name, "NVIDIA GB10");
        assert_eq!(gpus[0].memory_total_bytes, None);
        assert_eq!(gpus[0].driver_version.as_deref(), Some("580.126.09"));
    }

    #[test]
    fn nvidia_several_gpus_are_indexed_in_order() {
        let text = "NVIDIA H100 80GB HBM3, 81559 MiB, 580.126.09\nNVIDIA H100 80GB HBM3, 81559 MiB, 580.126.09\n\n";
        let gpus = parse_nvidia_smi(text).unwrap();
        assert_eq!(gpus.iter().map(|g| g.index).collect::<Vec<_>>(), vec![0, 1]);
        assert_eq!(gpus[1].memory_total_bytes, Some(81559 << 20));
    }

    #[test]
    fn nvidia_garbage_is_an_error_with_the_line() {
        let err = parse_nvidia_smi(
            "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n",
        )
        .unwrap_err();
        assert_eq!(err.line_no, 1);
        assert!(
            err.to_string().contains("nvidia-smi output line 1"),
            "{err}"
        );
        let err = parse_nvidia_smi("GPU, lots MiB, 1.0").unwrap_err();
        assert!(err.detail.contains("not a number"), "{err}");
    }

    #[test]
    fn nvidia_empty_output_is_no_gpus() {
        assert!(parse_nvidia_smi("").unwrap().is_empty());
    }

    #[test]
    fn rocm_csv_real_output() {
        // Real `rocm-smi --showproductname --csv` output of a two-MI100 node.
        let text = "device,Card series,Card model,Card vendor,Card SKU\ncard0,Arcturus GL-XL [AMD Instinct MI100],0x0c34,Advanced Micro Devices Inc. [AMD/ATI],D34316\ncard1,Arcturus GL-XL [AMD Instinct MI100],0x0c34,Advanced Micro Devices Inc. [AMD/ATI],D34316\n";
        let gpus = parse_rocm_smi(text).unwrap();
        assert_eq!(gpus.len(), 2);
        assert_eq!(gpus[0].name, "Arcturus GL-XL [AMD Instinct MI100]");
        assert_eq!(gpus[1].index, 1);
        assert_eq!(gpus[0].vendor, "amd");
        assert_eq!(gpus[0].memory_total_bytes, None);
    }

    #[test]
    fn rocm_plain_real_output() {
        // Real plain `rocm-smi --showproductname` output (ROCm 4.0, MI100), whose
        // "Card series" is a bare PCI id, and a Radeon whose series is readable.
        let mi100 = "======================= ROCm System Management Interface =======================\n================================= Product Info =================================\nGPU[0]\t\t: Card series: \t\t0x738c\nGPU[0]\t\t: Card model: \t\t0xc34\nGPU[0]\t\t: Card vendor: \t\tAdvanced Micro Devices, Inc. [AMD/ATI]\nGPU[0]\t\t: Card SKU: \t\tD34314\n================================================================================\n============================= End of ROCm SMI Log ==============================\n";
        let gpus = parse_rocm_smi(mi100).unwrap();
        assert_eq!(gpus.len(), 1);
        assert_eq!(gpus[0].name, "AMD GPU 0x738c");

        let fury = "GPU[0]          : Card series:          Fiji [Radeon R9 FURY / NANO Series]\nGPU[0]          : Card model:           Radeon R9 FURY X\nGPU[0]          : Card vendor:          Advanced Micro Devices, Inc. [AMD/ATI]\n";
        let gpus = parse_rocm_smi(fury).unwrap();
        assert_eq!(gpus[0].name, "Fiji [Radeon R9 FURY / NANO Series]");
    }

    #[test]
    fn missing_tools_are_no_gpus() {
        let dir = tempfile::tempdir().unwrap();
        let scan = scan(dir.path().to_str().unwrap(), Duration::from_secs(5));
        assert!(scan.gpus.is_empty() && scan.tools_found.is_empty() && scan.notes.is_empty());
    }

    #[test]
    fn fake_tool_on_path_is_run_and_parsed() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let tool = dir.path().join("nvidia-smi");
        std::fs::write(
            &tool,
            "#!/bin/sh\n[ \"$1\" = --query-gpu=name,memory.total,driver_version ] || exit 9\necho 'NVIDIA GB10, [N/A], 580.126.09'\n",
        )
        .unwrap();
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
        let scan = scan(dir.path().to_str().unwrap(), Duration::from_secs(10));
        assert_eq!(scan.tools_found, vec!["nvidia-smi"]);
        assert_eq!(scan.gpus.len(), 1, "{:?}", scan.notes);
        assert_eq!(scan.gpus[0].name, "NVIDIA GB10");
    }

    #[test]
    fn failing_or_hanging_tool_becomes_a_note() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let tool = dir.path().join("rocm-smi");
        let pid_file = dir.path().join("pid");
        // The tool records its pid, then hangs for an hour (exec keeps the pid).
        std::fs::write(
            &tool,
            format!(
                "#!/bin/sh\necho $$ > '{}'\nexec sleep 3600\n",
                pid_file.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
        // 3 s: long enough for the shell to start and record its pid on a loaded machine
        // (at 300 ms a CI run killed it before it had), short beside the hour it hangs.
        let scan = scan(dir.path().to_str().unwrap(), Duration::from_secs(3));
        assert_eq!(scan.tools_found, vec!["rocm-smi"]);
        assert!(scan.gpus.is_empty());
        assert!(
            scan.notes[0].contains("did not finish") && scan.notes[0].contains("was killed"),
            "{:?}",
            scan.notes
        );
        // The scan returned because it killed the tool, not because the tool ended: the
        // tool ran, and no process with its pid is left (it was killed and reaped).
        let pid = std::fs::read_to_string(&pid_file).expect("the tool ran");
        let pid = pid.trim();
        assert!(
            !std::path::Path::new(&format!("/proc/{pid}")).exists(),
            "the hung tool {pid} is still there"
        );
    }
}
