//! Finding batch jobs by name, the same way for Slurm and Flux: the pure parser of their
//! `ID NAME` listings (`squeue -o '%i %j'`, `flux jobs -o '{id.dec} {name}'`) and the one
//! rule, [`newest_by_name`], for which job a name means when several jobs carry it.

use std::collections::BTreeMap;

use crate::backend::{JobId, SchedError};

/// One line of a name listing: the job's id as the scheduler printed it, and its name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamedJob {
    pub id: String,
    pub name: String,
}

/// Parses an `ID NAME` listing, one job a line: the id up to the first space, the name after
/// it (a name may hold spaces). Blank lines are passed over; a line without a name is an
/// error (`what` says which command's line), never skipped.
pub fn parse_name_listing(stdout: &str, what: &'static str) -> Result<Vec<NamedJob>, SchedError> {
    stdout
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|line| match line.split_once(' ') {
            Some((id, name)) => Ok(NamedJob {
                id: id.to_string(),
                name: name.trim().to_string(),
            }),
            None => Err(SchedError::Parse {
                what,
                text: line.to_string(),
            }),
        })
        .collect()
}

/// The job each wanted name means — the tie-break rule both batch backends use.
///
/// Of the listed jobs that carry a wanted name, **the one with the highest id wins**. Both
/// schedulers hand out ids that grow with submission — Slurm counts up from `FirstJobId`, a
/// Flux id (FLUID, RFC 19) begins with the milliseconds since its instance started — so the
/// highest id is the newest job: the one a retried submission just created, not the
/// leftover of an earlier submission under the same name. Why that matters: after a lost
/// answer, `submit_idempotently` adopts the job this returns instead of submitting again,
/// and reconciliation after a crash records it as the block's job.
///
/// * Ids are compared as numbers (`9` < `12`), never as text, and the listing's order says
///   nothing (`squeue` does not print jobs by id).
/// * An id that is not a plain decimal number — Slurm's job-array and het-job forms
///   `3_[1-2]`, `3_1`, `3+0` — never wins: optgate submits single jobs, whose ids are plain
///   numbers on both schedulers (`parse_sbatch_parsable` and Flux's `parse_job_id` accept
///   nothing else), so such a job is not one it submitted.
/// * A name listed twice under the same id is one job.
///
/// Known limit: Slurm's ids wrap at `MaxJobId` (67,043,328 by default); across the wrap an
/// older job has the higher id. Slurm forgets ended jobs `MinJobAge` after they end, so a
/// tie across the wrap needs a job of the same name still queued or running from ~67
/// million submissions earlier.
pub fn newest_by_name(listing: &[NamedJob], wanted: &[String]) -> BTreeMap<String, JobId> {
    let mut newest: BTreeMap<String, (u64, &str)> = BTreeMap::new();
    for job in listing {
        if !wanted.contains(&job.name) {
            continue;
        }
        let Some(number) = plain_number(&job.id) else {
            continue;
        };
        let beats = newest.get(&job.name).is_none_or(|&(best, _)| number > best);
        if beats {
            newest.insert(job.name.clone(), (number, job.id.as_str()));
        }
    }
    newest
        .into_iter()
        .map(|(name, (_, id))| (name, JobId(id.to_string())))
        .collect()
}

/// An id of ASCII digits only, as a number; `None` for anything else (or beyond 64 bits).
fn plain_number(id: &str) -> Option<u64> {
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    id.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn newest(stdout: &str, wanted: &[&str]) -> BTreeMap<String, JobId> {
        let listing = parse_name_listing(stdout, "a test line").unwrap();
        let wanted: Vec<String> = wanted.iter().map(|s| s.to_string()).collect();
        newest_by_name(&listing, &wanted)
    }

    fn id(s: &str) -> JobId {
        JobId(s.into())
    }

    /// `squeue --me -t all -h -o '%i %j'` as this machine's Slurm 22.05.8 printed it for two
    /// held jobs named `og-h1-tie` (1, 2), a held two-task array job of the same name (3)
    /// and a job whose name has a space (4), after job 1 had been released and ended and
    /// the rest cancelled: not in id order, the array job under `3_[1-2]`.
    const SQUEUE_TIES: &str = "\
2 og-h1-tie
3_[1-2] og-h1-tie
4 og-h1 spaced
1 og-h1-tie
";

    #[test]
    fn on_real_squeue_output_the_highest_plain_id_wins_whatever_the_order() {
        let found = newest(SQUEUE_TIES, &["og-h1-tie", "og-h1 spaced", "og-h1-gone"]);
        // Planted bug "first listed wins" would pick 2 here only by luck: see the reversed
        // listing below. "Last listed wins" picks 1; "array ids count by their number"
        // picks 3_[1-2].
        assert_eq!(found["og-h1-tie"], id("2"));
        assert_eq!(found["og-h1 spaced"], id("4"));
        assert_eq!(found.len(), 2, "a name nobody carries is absent");
        let reversed: String = SQUEUE_TIES
            .lines()
            .rev()
            .map(|l| format!("{l}\n"))
            .collect();
        assert_eq!(newest(&reversed, &["og-h1-tie"])["og-h1-tie"], id("2"));
    }

    /// `flux jobs -a -n -c 0 -o '{id.dec} {name}'` as real Flux 0.88.0 printed it on the
    /// one-node instance of schedulers/flux/setup-one-node.sh for four jobs submitted in
    /// this order: `og-h1-tie` held, `og-h1-other` held, `og-h1-tie` run to its end,
    /// `og-h1-tie` held. First while three were held (pending first, the ended one last),
    /// then after the held ones were cancelled (the latest to end first): in neither is the
    /// newest `og-h1-tie` where a positional rule would look for it.
    const FLUX_TIES_HELD: &str = "\
5871237070848 og-h1-tie
5880313544704 og-h1-other
5891537502208 og-h1-tie
5886353342464 og-h1-tie
";
    const FLUX_TIES_CANCELLED: &str = "\
5891537502208 og-h1-tie
5880313544704 og-h1-other
5871237070848 og-h1-tie
5886353342464 og-h1-tie
";

    #[test]
    fn on_real_flux_listings_the_highest_id_wins_too() {
        for listing in [FLUX_TIES_HELD, FLUX_TIES_CANCELLED] {
            let found = newest(listing, &["og-h1-tie", "og-h1-other"]);
            // Planted bugs: "first listed wins" fails on the first listing, "last listed
            // wins" on both, "lowest id wins" on both.
            assert_eq!(found["og-h1-tie"], id("5891537502208"), "{listing}");
            assert_eq!(found["og-h1-other"], id("5880313544704"));
        }
    }

    #[test]
    fn ids_compare_as_numbers_not_text() {
        // As text "9" > "12"; planted bug "compare the strings" picks 9.
        let found = newest(
            "9 og-e1-b001\n12 og-e1-b001\n7 og-e1-b001\n",
            &["og-e1-b001"],
        );
        assert_eq!(found["og-e1-b001"], id("12"));
    }

    #[test]
    fn a_name_carried_only_by_array_or_het_jobs_is_not_found() {
        // Planted bug "a non-number counts as 0" would return `3_1` here.
        let found = newest("3_1 og-x\n3+0 og-x\n3_[1-2] og-x\n", &["og-x"]);
        assert!(found.is_empty(), "{found:?}");
    }

    #[test]
    fn the_same_job_listed_twice_is_one_job() {
        let found = newest("5 og-x\n5 og-x\n", &["og-x"]);
        assert_eq!(found["og-x"], id("5"));
    }

    #[test]
    fn a_line_without_a_name_is_an_error_not_skipped() {
        let err = parse_name_listing("7 og-e1-b001\nxx\n", "a `squeue` line (id, name)");
        assert!(
            matches!(err, Err(SchedError::Parse { what, ref text }) if what.contains("squeue") && text == "xx"),
            "{err:?}"
        );
        assert_eq!(
            parse_name_listing("\n  4 og-h1 spaced  \n", "x").unwrap(),
            [NamedJob {
                id: "4".into(),
                name: "og-h1 spaced".into()
            }]
        );
    }
}
