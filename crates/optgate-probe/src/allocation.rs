//! The scheduler allocation as the process sees it: `SLURM_*` and `FLUX_*` variables
//! (parsed by a pure function of the environment) and the CPUs this process may use.

use std::collections::BTreeMap;
use std::path::Path;

use crate::cpulist::{format_cpulist, parse_cpulist};
use crate::types::Allocation;

/// Builds the allocation from environment variables (pass `std::env::vars()`). Only
/// `SLURM_*` and `FLUX_*` variables are kept.
pub fn allocation_from_env<I>(vars: I) -> Allocation
where
    I: IntoIterator<Item = (String, String)>,
{
    let env: BTreeMap<String, String> = vars
        .into_iter()
        .filter(|(k, _)| k.starts_with("SLURM_") || k.starts_with("FLUX_"))
        .collect();
    let get = |k: &str| {
        env.get(k)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    let num = |k: &str| get(k).and_then(|v| v.parse::<u32>().ok());
    let slurm_job = get("SLURM_JOB_ID").or_else(|| get("SLURM_JOBID"));
    // A task of `flux run` has FLUX_JOB_ID; a `flux batch` script only FLUX_ENCLOSING_ID
    // (both F58, kept as given here; the CLI writes Flux ids in decimal).
    let flux_job = get("FLUX_JOB_ID").or_else(|| get("FLUX_ENCLOSING_ID"));
    let (scheduler, job_id) = match (&flux_job, &slurm_job) {
        (Some(f), _) => (Some("flux".to_string()), Some(f.clone())),
        (None, Some(s)) => (Some("slurm".to_string()), Some(s.clone())),
        (None, None) => (None, None),
    };
    let under_flux = flux_job.is_some();
    Allocation {
        scheduler,
        job_id,
        // Slurm's view stays meaningful inside a Flux instance started in a Slurm job,
        // but task counts belong to the innermost scheduler.
        cpus_per_task: num("SLURM_CPUS_PER_TASK"),
        ntasks: if under_flux {
            num("FLUX_JOB_SIZE")
        } else {
            num("SLURM_NTASKS").or_else(|| num("SLURM_NPROCS"))
        },
        cpus_on_node: num("SLURM_CPUS_ON_NODE"),
        nodelist: get("SLURM_JOB_NODELIST").or_else(|| get("SLURM_NODELIST")),
        allowed_cpus: None,
        allowed_cpu_count: None,
        env,
    }
}

/// Reads `Cpus_allowed_list` from a `/proc/<pid>/status` file: the CPUs the process may
/// run on after cgroup cpusets and affinity.
pub fn allowed_cpus(status_path: &Path) -> Option<(String, u32)> {
    let text = std::fs::read_to_string(status_path).ok()?;
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))?;
    let set = parse_cpulist(line)?;
    Some((format_cpulist(&set), set.len() as u32))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn slurm_job() {
        let a = allocation_from_env(vars(&[
            ("SLURM_JOB_ID", "438580"),
            ("SLURM_CPUS_PER_TASK", "6"),
            ("SLURM_NTASKS", "4"),
            ("SLURM_CPUS_ON_NODE", "24"),
            ("SLURM_JOB_NODELIST", "a80n[1-2]"),
            ("HOME", "/root"),
        ]));
        assert_eq!(a.scheduler.as_deref(), Some("slurm"));
        assert_eq!(a.job_id.as_deref(), Some("438580"));
        assert_eq!(a.cpus_per_task, Some(6));
        assert_eq!(a.ntasks, Some(4));
        assert_eq!(a.cpus_on_node, Some(24));
        assert_eq!(a.nodelist.as_deref(), Some("a80n[1-2]"));
        assert_eq!(a.env.len(), 5, "HOME must not be kept");
    }

    #[test]
    fn flux_inside_slurm_is_flux() {
        let a = allocation_from_env(vars(&[
            ("SLURM_JOB_ID", "1"),
            ("SLURM_NTASKS", "64"),
            ("FLUX_JOB_ID", "f2BLCW7Xo"),
            ("FLUX_JOB_SIZE", "2"),
        ]));
        assert_eq!(a.scheduler.as_deref(), Some("flux"));
        assert_eq!(a.job_id.as_deref(), Some("f2BLCW7Xo"));
        assert_eq!(a.ntasks, Some(2));
    }

    #[test]
    fn a_flux_batch_script_is_flux() {
        // What real Flux 0.88.0 sets in a `flux batch` script: no FLUX_JOB_ID.
        let a = allocation_from_env(vars(&[
            ("FLUX_ENCLOSING_ID", "ƒBLe2WvK"),
            ("FLUX_URI", "local:///tmp/flux-x/local-0"),
        ]));
        assert_eq!(a.scheduler.as_deref(), Some("flux"));
        assert_eq!(a.job_id.as_deref(), Some("ƒBLe2WvK"));
    }

    #[test]
    fn no_scheduler() {
        let a = allocation_from_env(vars(&[
            ("FLUX_URI", "local:///tmp/x"),
            ("SLURM_CPUS_PER_TASK", "x"),
        ]));
        assert_eq!(a.scheduler, None);
        assert_eq!(a.job_id, None);
        assert_eq!(a.cpus_per_task, None, "a non-number is not a count");
        assert_eq!(a.env.len(), 2);
    }

    #[test]
    fn allowed_cpus_of_this_process() {
        let (list, n) = allowed_cpus(Path::new("/proc/self/status")).unwrap();
        assert!(n >= 1);
        assert_eq!(parse_cpulist(&list).unwrap().len() as u32, n);
    }
}
