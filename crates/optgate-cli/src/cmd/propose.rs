//! `optgate propose FILE [-o OUT] [--force]`: runs FILE's baseline through the engine
//! (`propose_measure`), walks the ten checklist dimensions with `optgate-propose`'s rules
//! over what it measured, and writes OUT — FILE's text with the proposed `variants:` and
//! `checklist:` added — atomically, never over an existing file without `--force`.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use optgate_experiment::{ExperimentFile, load::load_str};
use optgate_propose::{Existing, Settings, render};

use super::propose_measure;
use crate::exit;

pub fn propose(path: &Path, out: Option<PathBuf>, force: bool, quiet: bool) -> Result<i32> {
    let invalid = |e: anyhow::Error| exit::with_code(exit::INVALID_INPUT, e);
    let limit = optgate_experiment::yaml::MAX_FILE_BYTES as u64;
    let source_text = optgate_experiment::read::read_regular_text(path, limit)
        .with_context(|| format!("cannot read {}", path.display()))
        .map_err(invalid)?;
    if super::common::is_campaign_file(path) {
        return Err(invalid(anyhow::anyhow!(
            "{} is a campaign (it has `stages:`): propose takes an experiment file",
            path.display()
        )));
    }
    let source = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let out = out.unwrap_or_else(|| default_out(path));
    if out.exists() && !force {
        return Err(invalid(anyhow::anyhow!(
            "{} exists; pass --force to replace it",
            out.display()
        )));
    }
    let file = check_source(&source_text, &source)?;
    let existing = existing_of(&file);
    let probe_text = render::probe_text(&source_text, &measuring_name(&file.name));
    let exp = load_str(&probe_text, &source)
        .context("the measuring experiment made from the file does not load")?
        .experiment;
    errln!(
        "optgate: measuring the baseline: {} runs (beside an identical arm, `{}`)",
        optgate_propose::PROBE_RUNS,
        render::PROBE_COPY
    );
    let root = propose_measure::run_baseline(&exp, &source, &probe_text, quiet)?;
    let facts = propose_measure::facts(&exp, &root)?;
    let proposal = optgate_propose::propose(&facts, &existing);
    let proposed = render::add_proposal(&source_text, &proposal).map_err(|e| invalid(e.into()))?;
    let proposed = enough_replicates(&proposed, &file, proposal.variants.len());
    check_output(&proposed, &out, proposal.campaign.is_some())?;
    write_atomic(&out, &proposed, force)?;
    for v in &proposal.variants {
        errln!("optgate: proposed `{}`: {}", v.name, v.description);
    }
    for why in &proposal.left_out {
        errln!("optgate: left out {why}");
    }
    errln!(
        "optgate: wrote {} ({} variant(s), {} verdict(s); the baseline's runs are in {})",
        out.display(),
        proposal.variants.len(),
        proposal.verdicts.len(),
        root.display()
    );
    Ok(exit::OK)
}

/// `text` with the file's `replicates` raised to what can decide its variants and the
/// `added` ones (a file that allows few replicates keeps its number).
fn enough_replicates(text: &str, file: &ExperimentFile, added: usize) -> String {
    let family = file.variants.len() + added;
    let needed = optgate_experiment::load::smallest_deciding_replicates(
        file.design.stats(),
        family,
        file.compare.alpha,
    );
    match needed {
        Some(n) if !file.allow_few_replicates && family > 0 => {
            render::with_enough_replicates(text, file.replicates, n)
        }
        _ => text.to_string(),
    }
}

/// `FILE.yaml` → `FILE.proposed.yaml`, beside it.
fn default_out(path: &Path) -> PathBuf {
    let stem = path
        .file_stem()
        .map_or_else(|| "experiment".into(), |s| s.to_string_lossy().into_owned());
    let ext = path
        .extension()
        .map_or_else(|| "yaml".into(), |e| e.to_string_lossy().into_owned());
    path.with_file_name(format!("{stem}.proposed.{ext}"))
}

/// The measuring experiment's name: the file's, marked, within the name limit.
fn measuring_name(name: &str) -> String {
    const MARK: &str = "-propose";
    let keep: String = name.chars().take(64 - MARK.len()).collect();
    format!("{keep}{MARK}")
}

/// The file validated as an experiment whose variants may be absent: every problem but
/// that one is an error, at its own line; its model.
fn check_source(text: &str, source: &Path) -> Result<ExperimentFile> {
    let invalid = |e: anyhow::Error| exit::with_code(exit::INVALID_INPUT, e);
    match load_str(text, source) {
        Ok(_) => {}
        Err(optgate_experiment::LoadError::Invalid { diagnostics }) => {
            let errors: Vec<_> = diagnostics
                .into_iter()
                .filter(|d| d.is_error())
                .filter(|d| {
                    !(d.path == "variants"
                        && d.message.starts_with("the experiment has no variants"))
                })
                .collect();
            if !errors.is_empty() {
                for d in &errors {
                    errln!("{d}");
                }
                return Err(invalid(anyhow::anyhow!(
                    "{} error(s) in the experiment file: nothing was run",
                    errors.len()
                )));
            }
        }
        Err(e) => return Err(invalid(e.into())),
    }
    optgate_experiment::yaml::from_str_all(text).map_err(|e| {
        invalid(anyhow::anyhow!(
            "{} cannot be read: {e:?}",
            source.display()
        ))
    })
}

/// What the file has already: its variants' names and settings, its verdicts.
fn existing_of(file: &ExperimentFile) -> Existing {
    Existing {
        variants: file
            .variants
            .iter()
            .map(|v| {
                let settings = Settings {
                    env: v
                        .env
                        .iter()
                        .map(|(k, e)| (k.clone(), e.0.clone()))
                        .collect(),
                    cpus_per_task: v.launcher.cpus_per_task,
                    build: v
                        .build
                        .as_ref()
                        .map(|b| propose_measure::command_text(&b.command)),
                    governor: v.governor.clone(),
                };
                (v.name.clone(), v.dimension.clone(), settings)
            })
            .collect(),
        verdicts: file.checklist.keys().cloned().collect(),
    }
}

/// The proposed text must load as what it is (an experiment, or a campaign), else nothing
/// is written.
fn check_output(text: &str, out: &Path, campaign: bool) -> Result<()> {
    let at = std::path::absolute(out).unwrap_or_else(|_| out.to_path_buf());
    let loaded = if campaign {
        optgate_experiment::campaign::load_str(text, &at).map(|_| ())
    } else {
        load_str(text, &at).map(|_| ())
    };
    loaded.with_context(|| {
        format!(
            "the proposed file does not load; {} was not written",
            out.display()
        )
    })
}

/// `text` into `out` through a temporary file beside it, renamed into place (over an
/// existing file only with `force`).
fn write_atomic(out: &Path, text: &str, force: bool) -> Result<()> {
    let dir = match out.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut tmp = tempfile::NamedTempFile::new_in(dir)
        .with_context(|| format!("cannot write in {}", dir.display()))?;
    tmp.write_all(text.as_bytes())?;
    tmp.as_file().sync_all()?;
    let placed = if force {
        tmp.persist(out).map(|_| ())
    } else {
        tmp.persist_noclobber(out).map(|_| ())
    };
    placed.map_err(|e| {
        let code = if e.error.kind() == std::io::ErrorKind::AlreadyExists {
            exit::INVALID_INPUT
        } else {
            exit::FAILED
        };
        exit::with_code(
            code,
            anyhow::anyhow!("cannot write {}: {}", out.display(), e.error),
        )
    })
}
