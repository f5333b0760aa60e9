//! A campaign: an experiment file whose `variants:` is replaced by `stages:`, each stage
//! `{component, description, variants}` plus any shared key it overrides. Stages run in
//! the canonical order (I/O → communication → memory → compute); each is an ordinary
//! experiment generated as a file's text ([`Campaign::stage_text`]) whose baseline carries
//! the winners of every earlier stage ([`chain::Chain`]), then a confirmation experiment
//! ([`Campaign::confirmation_text`]) gates the combination against the original baseline.
//!
//! The campaign file is read as a generic document, so every key an experiment file has
//! carries over to the stage experiments unlisted; the stage experiments are validated by
//! the experiment loader itself, their diagnostics placed back in the campaign file.

pub mod chain;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::checklist::{self, Area};
use crate::diagnostic::{Diagnostic, Severity};
use crate::limits::MAX_STAGES;
use crate::load::{LoadError, Loaded};
use crate::yaml::{self, Locator};

pub use chain::{Chain, Origin, Overridden, StageOutcome, pick_winner};

/// The keys a stage has besides the shared keys it overrides.
pub const STAGE_OWN_KEYS: [&str; 3] = ["component", "description", "variants"];

/// Shared keys a stage may not override: its baseline is the chain's, its name is derived,
/// and the checklist is the campaign's.
pub const STAGE_FIXED_KEYS: [&str; 4] = ["name", "baseline", "checklist", "stages"];

/// The confirmation experiment's one variant: the combined configuration.
pub const COMBINED: &str = "combined";

/// Added to the campaign's seed for the confirmation, so its blocks are drawn afresh
/// rather than in the first stage's order.
pub const CONFIRMATION_SEED_OFFSET: u64 = 1_000_003;

/// One stage as written.
#[derive(Debug, Clone, PartialEq)]
pub struct Stage {
    /// Its place in the file's `stages` list (0-based).
    pub file_index: usize,
    pub component: Area,
    pub description: Option<String>,
    /// The stage's `variants` and the shared keys it overrides (not `component`,
    /// `description`).
    pub keys: Map<String, Value>,
}

/// A validated campaign.
#[derive(Debug, Clone)]
pub struct Campaign {
    /// Absolute path of the campaign file.
    pub source: PathBuf,
    pub source_text: String,
    pub name: String,
    /// The file's document without `stages`.
    pub shared: Map<String, Value>,
    /// In the order they run: canonical by component, file order within one.
    pub stages: Vec<Stage>,
    /// Whether that order differs from the file's.
    pub reordered: bool,
    pub warnings: Vec<Diagnostic>,
}

/// Whether `text` is a campaign (a mapping with a `stages` key) rather than an experiment.
/// A text that does not parse is not one: the experiment loader then says why.
pub fn is_campaign_text(text: &str) -> bool {
    matches!(yaml::to_json_value(text), Ok(Value::Object(m)) if m.contains_key("stages"))
}

/// Reads and validates the campaign file at `path`, as [`crate::load`] does an experiment.
pub fn load(path: &Path) -> Result<Campaign, LoadError> {
    let (text, abs) = crate::load::read_file_text(path)?;
    load_str(&text, &abs)
}

/// Validates `text` as a campaign read from `path`: its own shape, then every stage's
/// experiment (as its first run would see it) through the experiment loader. Every problem
/// at once, placed in the campaign file.
pub fn load_str(text: &str, path: &Path) -> Result<Campaign, LoadError> {
    let invalid = |d: Vec<Diagnostic>| LoadError::Invalid { diagnostics: d };
    let doc = yaml::to_json_value(text).map_err(|e| {
        invalid(vec![Diagnostic::new(
            Severity::Error,
            path.to_path_buf(),
            e.location,
            "",
            e.message,
        )])
    })?;
    let locator = Locator::index(text);
    let mut diags = Vec::new();
    // A stage whose shape is wrong is left out; the others are still checked, so every
    // problem is reported at once.
    let (shared, stages) = shape(&doc, path, &locator, &mut diags);
    let name = shared
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let reordered = stages.windows(2).any(|w| w[0].file_index > w[1].file_index);
    let campaign = Campaign {
        source: path.to_path_buf(),
        source_text: text.to_string(),
        name,
        shared,
        stages,
        reordered,
        warnings: Vec::new(),
    };
    let mut seen = BTreeSet::new();
    for k in 0..campaign.stages.len() {
        let stage_text = campaign.stage_text(k, &Chain::default());
        let found = match crate::load::load_str(&stage_text, path) {
            Ok(l) => l.warnings,
            Err(LoadError::Invalid { diagnostics }) => diagnostics,
            Err(e) => return Err(e),
        };
        let stage = &campaign.stages[k];
        for d in relocate(found, &stage_text, stage, &locator) {
            if seen.insert((d.line, d.column, d.message.clone())) {
                diags.push(d);
            }
        }
    }
    if diags.iter().any(Diagnostic::is_error) {
        diags.sort_by_key(|d| !d.is_error());
        return Err(invalid(diags));
    }
    Ok(Campaign {
        warnings: diags,
        ..campaign
    })
}

/// The campaign's own shape: a mapping with `stages` and no `variants`; each stage a
/// mapping with a known `component`, a `variants` list and no fixed key. Returns the
/// shared document and the stages in run order.
fn shape(
    doc: &Value,
    path: &Path,
    locator: &Locator,
    diags: &mut Vec<Diagnostic>,
) -> (Map<String, Value>, Vec<Stage>) {
    let mut error = |p: &str, key: bool, m: String| {
        let loc = if key {
            locator.key(p)
        } else {
            locator.value(p)
        };
        diags.push(Diagnostic::new(
            Severity::Error,
            path.to_path_buf(),
            loc,
            p,
            m,
        ));
    };
    let Value::Object(top) = doc else {
        error("", false, "a campaign file is a mapping of keys".into());
        return (Map::new(), Vec::new());
    };
    if top.contains_key("variants") {
        error(
            "variants",
            true,
            "a campaign lists its proposals in each stage's `variants:`; remove the top-level `variants` (or `stages`, for a plain experiment)".into(),
        );
    }
    let list = match top.get("stages") {
        Some(Value::Array(l)) if !l.is_empty() => l.as_slice(),
        _ => {
            error(
                "stages",
                false,
                "`stages` must be a list of at least one stage `{component, variants}`".into(),
            );
            &[]
        }
    };
    if list.len() > MAX_STAGES {
        error(
            "stages",
            false,
            format!(
                "the campaign has {} stages; at most {MAX_STAGES} are accepted",
                list.len()
            ),
        );
    }
    let mut stages: Vec<Stage> = list
        .iter()
        .take(MAX_STAGES)
        .enumerate()
        .filter_map(|(i, s)| stage(i, s, &mut error))
        .collect();
    // Stable: two stages of one component keep their file order.
    stages.sort_by_key(|s| s.component);
    let mut shared = top.clone();
    shared.remove("stages");
    (shared, stages)
}

/// One stage's shape; `None` (with its errors) when it cannot be a stage.
fn stage(i: usize, s: &Value, error: &mut impl FnMut(&str, bool, String)) -> Option<Stage> {
    let p = format!("stages[{i}]");
    let Value::Object(m) = s else {
        error(
            &p,
            false,
            "a stage is a mapping `{component, description, variants}`".into(),
        );
        return None;
    };
    let words = Area::ALL.map(Area::as_str).join(", ");
    let component = match m.get("component").and_then(Value::as_str) {
        Some(w) => Area::parse(w).or_else(|| {
            let msg = format!("unknown component `{w}`; expected one of {words}");
            error(&format!("{p}.component"), false, msg);
            None
        }),
        None => {
            let msg = format!("missing required key `component` (one of {words})");
            error(&p, false, msg);
            None
        }
    };
    if !matches!(m.get("variants"), Some(Value::Array(_))) {
        let msg = "a stage needs `variants:`, a list of proposals as in an experiment".into();
        error(&p, false, msg);
    }
    for k in STAGE_FIXED_KEYS {
        if m.contains_key(k) {
            let msg = format!(
                "a stage cannot set `{k}`: its baseline is the chain's, its name and checklist the campaign's"
            );
            error(&format!("{p}.{k}"), true, msg);
        }
    }
    let description = match m.get("description") {
        None | Some(Value::Null) => None,
        Some(Value::String(d)) => Some(d.clone()),
        Some(_) => {
            error(
                &format!("{p}.description"),
                false,
                "expected a string".into(),
            );
            None
        }
    };
    let mut keys = m.clone();
    keys.remove("component");
    keys.remove("description");
    Some(Stage {
        file_index: i,
        component: component?,
        description,
        keys,
    })
}

/// Diagnostics of a stage's generated experiment, placed back in the campaign file: a
/// path under `variants` or a key the stage overrides is the stage's, the rest shared
/// (said once however many stages repeat it).
fn relocate(
    found: Vec<Diagnostic>,
    stage_text: &str,
    stage: &Stage,
    campaign: &Locator,
) -> Vec<Diagnostic> {
    let generated = Locator::index(stage_text);
    found
        .into_iter()
        .map(|d| {
            let at = match (d.line, d.column) {
                (Some(line), Some(column)) => {
                    generated.path_at(crate::yaml::Location { line, column })
                }
                _ => None,
            };
            let path = if d.path.is_empty() {
                at.unwrap_or_default()
            } else {
                d.path.clone()
            };
            let head = path.split(['.', '[']).next().unwrap_or("");
            let own = !head.is_empty() && stage.keys.contains_key(head);
            let (mapped, message) = if own {
                let p = format!("stages[{}].{path}", stage.file_index);
                let m = format!(
                    "stage {} ({}): {}",
                    stage.file_index + 1,
                    stage.component,
                    d.message
                );
                (p, m)
            } else {
                (path, d.message.clone())
            };
            let loc = if mapped.is_empty() {
                None
            } else {
                campaign.value(&mapped)
            };
            Diagnostic::new(d.severity, d.file.clone(), loc, mapped, message)
        })
        .collect()
}

impl Campaign {
    /// The name of stage `k`'s experiment: `<campaign>-<k+1>-<component>`.
    pub fn stage_name(&self, k: usize) -> String {
        format!("{}-{}-{}", self.name, k + 1, self.stages[k].component)
    }

    /// The confirmation experiment's name.
    pub fn confirmation_name(&self) -> String {
        format!("{}-{COMBINED}", self.name)
    }

    /// Stage `k`'s experiment as a file's text: the shared keys, the stage's overrides and
    /// variants, and a baseline carrying `chain` (the earlier stages' winners).
    pub fn stage_text(&self, k: usize, chain: &Chain) -> String {
        let stage = &self.stages[k];
        let mut doc = self.shared.clone();
        for (key, v) in &stage.keys {
            doc.insert(key.clone(), v.clone());
        }
        doc.insert("name".into(), Value::String(self.stage_name(k)));
        if let Some(d) = &stage.description {
            doc.insert("description".into(), Value::String(d.clone()));
        }
        chain.apply_to_baseline(&mut doc);
        self.fill_checklist(&mut doc, Some(k));
        let header = format!(
            "# Stage {} of {} ({}) of campaign `{}` ({}), generated by optgate.\n# Its baseline: {}\n",
            k + 1,
            self.stages.len(),
            stage.component,
            self.name,
            self.source.display(),
            chain.describe()
        );
        header + &yaml::to_text(&Value::Object(doc))
    }

    /// The confirmation experiment as a file's text: the original baseline against one
    /// variant, [`COMBINED`], that applies every winner of `chain`, on a fresh seed.
    pub fn confirmation_text(&self, chain: &Chain) -> String {
        let mut doc = self.shared.clone();
        doc.insert("name".into(), Value::String(self.confirmation_name()));
        let seed = doc.get("seed").and_then(Value::as_u64).unwrap_or(1);
        let seed = seed.wrapping_add(CONFIRMATION_SEED_OFFSET);
        doc.insert("seed".into(), Value::from(seed));
        let variant = chain.as_variant(COMBINED);
        doc.insert("variants".into(), Value::Array(vec![variant]));
        self.fill_checklist(&mut doc, None);
        let header = format!(
            "# The confirmation of campaign `{}` ({}), generated by optgate: every stage's\n# winner together against the original baseline. Combined: {}\n",
            self.name,
            self.source.display(),
            chain.describe()
        );
        header + &yaml::to_text(&Value::Object(doc))
    }

    /// The campaign's checklist, plus a verdict for each dimension another stage measures
    /// (so a stage's experiment does not call it missing).
    fn fill_checklist(&self, doc: &mut Map<String, Value>, this: Option<usize>) {
        let mut list = match doc.remove("checklist") {
            Some(Value::Object(m)) => m,
            _ => Map::new(),
        };
        for (j, s) in self.stages.iter().enumerate() {
            if Some(j) == this {
                continue;
            }
            for dim in stage_dimensions(s) {
                if checklist::dimension(&dim).is_none() || list.contains_key(&dim) {
                    continue;
                }
                let reason = format!(
                    "measured in stage {} ({}) of the campaign",
                    j + 1,
                    s.component
                );
                let entry =
                    serde_json::json!({"verdict": "applicable_not_measured", "reason": reason});
                list.insert(dim, entry);
            }
        }
        if !list.is_empty() {
            doc.insert("checklist".into(), Value::Object(list));
        }
    }

    /// The variant `name` of stage `k` as written (the winner whose settings the chain
    /// takes).
    pub fn stage_variant(&self, k: usize, name: &str) -> Option<crate::model::VariantSpec> {
        let vs = self.stages.get(k)?.keys.get("variants")?.as_array()?;
        let v = vs
            .iter()
            .find(|v| v.get("name").and_then(Value::as_str) == Some(name))?;
        serde_json::from_value(v.clone()).ok()
    }

    /// The dimensions each stage's variants name, by the stage's run order.
    pub fn dimensions(&self) -> Vec<Vec<String>> {
        self.stages.iter().map(stage_dimensions).collect()
    }
}

fn stage_dimensions(s: &Stage) -> Vec<String> {
    s.keys
        .get("variants")
        .and_then(Value::as_array)
        .map(|vs| {
            vs.iter()
                .filter_map(|v| v.get("dimension").and_then(Value::as_str))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// The chain replayed from the stages that ended: each one's winner ([`pick_winner`] on
/// its report's variants) added in turn. The same stages' reports give the same chain, so
/// the daemon keeps no chain of its own: it replays it from the stored reports.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Replay {
    pub chain: Chain,
    /// What each stage's baseline carried ([`Chain::describe`] before it ran).
    pub baselines: Vec<String>,
    pub outcomes: Vec<StageOutcome>,
    /// The winners' speed-up estimates, in stage order.
    pub speedups: Vec<f64>,
}

pub fn replay(c: &Campaign, stages: &[&[optgate_stats::VariantAnalysis]]) -> Replay {
    let mut r = Replay::default();
    for (k, variants) in stages.iter().enumerate().take(c.stages.len()) {
        r.baselines.push(r.chain.describe());
        let outcome = pick_winner(variants);
        if let Some(w) = &outcome.winner
            && let Some(spec) = c.stage_variant(k, w)
        {
            let origin = Origin {
                stage: k,
                component: c.stages[k].component,
                variant: w.clone(),
            };
            r.chain.add_winner(origin, &spec);
            let v = variants.iter().find(|v| &v.name == w);
            r.speedups
                .push(v.and_then(|v| v.speedup.estimate).unwrap_or(1.0));
        }
        r.outcomes.push(outcome);
    }
    r
}

/// What a campaign does once `done` steps have ended.
#[derive(Debug, Clone, PartialEq)]
pub enum CampaignNext {
    /// Run stage `k`, this experiment text.
    Stage(usize, String),
    /// Run the confirmation, this experiment text.
    Confirmation(String),
    /// No stage had a winner: nothing to confirm; the campaign ends, saying so.
    NoCombination(String),
    /// The confirmation ended: the campaign is finished.
    Finished,
}

/// Why a campaign without a winner has no confirmation.
pub const NO_COMBINATION: &str = "no stage accepted a proposal: there is no combination to confirm";

/// The one way a campaign advances, for `optgate run` and the daemon alike: the chain
/// replayed from the ended steps' variant analyses (the stages' in order, then the
/// confirmation's), and what runs next.
pub fn advance(
    c: &Campaign,
    ended: &[&[optgate_stats::VariantAnalysis]],
) -> (Replay, CampaignNext) {
    let replayed = replay(c, ended);
    let next = next_stage(c, &replayed, ended.len());
    (replayed, next)
}

/// The next step after `done` ended steps, with the chain `replayed` from them.
pub fn next_stage(c: &Campaign, replayed: &Replay, done: usize) -> CampaignNext {
    let n = c.stages.len();
    if done < n {
        CampaignNext::Stage(done, c.stage_text(done, &replayed.chain))
    } else if done > n {
        CampaignNext::Finished
    } else if replayed.chain.winners.is_empty() {
        CampaignNext::NoCombination(NO_COMBINATION.into())
    } else {
        CampaignNext::Confirmation(c.confirmation_text(&replayed.chain))
    }
}

/// The run root's folder of step `k` (stage `k`, or the confirmation at `k = stages`).
pub fn step_dir(c: &Campaign, k: usize) -> String {
    match c.stages.get(k) {
        Some(s) => format!("{:02}-{}", k + 1, s.component),
        None => format!("{:02}-{COMBINED}", k + 1),
    }
}

/// A stage's experiment loaded from its generated text, as if from the campaign's file
/// (its relative `workdir` resolves from there).
pub fn load_generated(text: &str, campaign_source: &Path) -> Result<Loaded, LoadError> {
    crate::load::load_str(text, campaign_source)
}

#[cfg(test)]
mod tests;
