//! Which scheduler job a process runs in, from its environment: what `optgate exec-run`
//! records in a run's manifest so the login node can tell a run's job from a stale one.
//! Compute-node code, so it imports nothing login-side; the Flux backend uses its F58
//! codec too.

/// The F58 alphabet (RFC 19, FLUID): base 58 without `0`, `O`, `I` and `l`.
const F58_ALPHABET: &[u8; 58] = b"123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";

/// Decodes an F58 job id: `ƒ` (U+0192) or ASCII `f`, then base-58 digits, most significant
/// first. `None` for anything else, or a value beyond 64 bits.
pub fn f58_decode(text: &str) -> Option<u64> {
    let digits = text.strip_prefix('ƒ').or_else(|| text.strip_prefix('f'))?;
    if digits.is_empty() {
        return None;
    }
    digits.bytes().try_fold(0u64, |n, c| {
        let d = F58_ALPHABET.iter().position(|&a| a == c)? as u64;
        n.checked_mul(58)?.checked_add(d)
    })
}

/// Encodes a job id as F58 (`ƒ…`, or `f…` when `ascii`), as `flux batch` prints it.
pub fn f58_encode(mut id: u64, ascii: bool) -> String {
    let mut digits = Vec::new();
    loop {
        digits.push(F58_ALPHABET[(id % 58) as usize] as char);
        id /= 58;
        if id == 0 {
            break;
        }
    }
    let mut s = String::from(if ascii { "f" } else { "ƒ" });
    s.extend(digits.iter().rev());
    s
}

/// The id of the Flux job a process runs in, in decimal, from its environment (`var`
/// answers a variable's value): `FLUX_JOB_ID` in a task of `flux run`/`flux submit`, else
/// `FLUX_ENCLOSING_ID` — all a `flux batch` script has (Flux 0.88.0 sets no `FLUX_JOB_ID`
/// there). Both are F58 (or decimal); a value that is neither is kept as given.
pub fn flux_job_id(var: impl Fn(&str) -> Option<String>) -> Option<String> {
    ["FLUX_JOB_ID", "FLUX_ENCLOSING_ID"]
        .into_iter()
        .filter_map(|k| var(k).map(|v| v.trim().to_string()))
        .find(|v| !v.is_empty())
        .map(|v| decimal_job_id(&v).map_or(v, |n| n.to_string()))
}

/// A Flux job id as printed (F58 either prefix, or decimal) → its number.
fn decimal_job_id(text: &str) -> Option<u64> {
    let t = text.trim();
    match !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
        true => t.parse().ok(),
        false => f58_decode(t),
    }
}

/// The id of the scheduler job this run is part of, as the backend recorded it when it
/// submitted the job: Flux's first (in decimal), then Slurm's, then the local backend's.
pub fn scheduler_job_id(var: impl Fn(&str) -> Option<String>) -> Option<String> {
    let var = |k: &str| var(k).filter(|v| !v.trim().is_empty());
    flux_job_id(var)
        .or_else(|| var("SLURM_JOB_ID"))
        .or_else(|| var("OPTGATE_JOB_ID"))
}

/// An environment of these `(name, value)` pairs, as the readers of this crate take one
/// (`var` answering a variable's value): the tests' stand-in for a task's environment.
#[cfg(test)]
pub(crate) fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
    move |k| {
        pairs
            .iter()
            .find(|(n, _)| *n == k)
            .map(|(_, v)| v.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_job_id_comes_from_the_nearest_scheduler() {
        // A `flux batch` script as real Flux 0.88.0 starts it: no FLUX_JOB_ID.
        let batch = [
            ("FLUX_ENCLOSING_ID", "ƒBLe2WvK"),
            ("FLUX_URI", "local:///x"),
        ];
        assert_eq!(
            scheduler_job_id(env(&batch)).as_deref(),
            Some("393576710144")
        );
        let ascii = [("FLUX_ENCLOSING_ID", "fhbLJV9h")];
        assert_eq!(
            scheduler_job_id(env(&ascii)).as_deref(),
            Some("1545282256896")
        );
        // A task of `flux run`: its own job's id wins.
        let task = [("FLUX_JOB_ID", "ƒ2JL"), ("FLUX_ENCLOSING_ID", "ƒBLe2WvK")];
        assert_eq!(scheduler_job_id(env(&task)).as_deref(), Some("4369"));
        // Flux started inside a Slurm job: Flux is the nearer scheduler.
        let nested = [("SLURM_JOB_ID", "77"), ("FLUX_ENCLOSING_ID", "ƒ2JL")];
        assert_eq!(scheduler_job_id(env(&nested)).as_deref(), Some("4369"));
        assert_eq!(
            scheduler_job_id(env(&[("SLURM_JOB_ID", "77")])).as_deref(),
            Some("77")
        );
        assert_eq!(
            scheduler_job_id(env(&[("OPTGATE_JOB_ID", "local-1"), ("SLURM_JOB_ID", " ")]))
                .as_deref(),
            Some("local-1")
        );
        assert_eq!(scheduler_job_id(env(&[])), None);
    }
}
