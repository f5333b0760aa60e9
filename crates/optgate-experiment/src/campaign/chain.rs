//! The chain of a campaign's baselines and its rules, pure: which variant of a stage wins
//! ([`pick_winner`]), what a winner carries into every later stage's baseline
//! ([`Chain::add_winner`], [`Chain::apply_to_baseline`]), which setting wins when two
//! winners set the same one (the later stage's; the earlier is kept in
//! [`Chain::overridden`] and shown), and the combination's result against the stages'
//! prediction ([`combine`]).

use std::collections::BTreeMap;

use optgate_stats::{Decision, SpeedUp, VariantAnalysis};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::checklist::Area;
use crate::model::VariantSpec;

/// Which stage's winner a setting came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Origin {
    /// The stage's place in the run order (0-based).
    pub stage: usize,
    pub component: Area,
    pub variant: String,
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} `{}`", self.component, self.variant)
    }
}

/// One setting a winner makes, by its key: `env.NAME` (null: unset), `launcher.FIELD`,
/// `build`, `args`, `governor`, `requires.FLAG`, `caches`, `page_cache`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Setting {
    pub value: Value,
    pub origin: Origin,
}

/// A setting an earlier winner made that a later winner set again (the later one holds).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Overridden {
    pub setting: String,
    pub earlier: Origin,
    pub earlier_value: Value,
    pub later: Origin,
    pub later_value: Value,
}

/// What the winners so far add to the campaign's baseline.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Chain {
    pub settings: BTreeMap<String, Setting>,
    pub overridden: Vec<Overridden>,
    pub winners: Vec<Origin>,
}

/// Every setting `v` makes, by its chain key (see [`Setting`]).
pub fn variant_settings(v: &VariantSpec) -> Vec<(String, Value)> {
    let mut out: Vec<(String, Value)> = Vec::new();
    for (k, val) in &v.env {
        out.push((format!("env.{k}"), Value::String(val.0.clone())));
    }
    for u in &v.unset {
        out.push((format!("env.{u}"), Value::Null));
    }
    let l = &v.launcher;
    for (field, n) in [
        ("nodes", l.nodes),
        ("tasks_per_node", l.tasks_per_node),
        ("cpus_per_task", l.cpus_per_task),
        ("gpus_per_task", l.gpus_per_task),
    ] {
        if let Some(n) = n {
            out.push((format!("launcher.{field}"), Value::from(n)));
        }
    }
    if !l.extra_args.is_empty() {
        out.push((
            "launcher.extra_args".into(),
            Value::from(l.extra_args.clone()),
        ));
    }
    if let Some(b) = &v.build {
        out.push(("build".into(), json(b)));
    }
    if let Some(a) = &v.args {
        out.push(("args".into(), Value::from(a.clone())));
    }
    if let Some(g) = &v.governor {
        out.push(("governor".into(), Value::String(g.clone())));
    }
    for r in &v.requires {
        out.push((format!("requires.{r}"), Value::Bool(true)));
    }
    if let Some(c) = &v.caches {
        out.push(("caches".into(), json(c)));
    }
    if let Some(p) = &v.page_cache {
        out.push(("page_cache".into(), json(p)));
    }
    out
}

/// A model value as JSON (they all serialise).
fn json<T: Serialize>(x: &T) -> Value {
    serde_json::to_value(x).unwrap_or(Value::Null)
}

impl Chain {
    /// Adds a stage's winner: each of its settings holds from now on; one an earlier
    /// winner made is recorded as overridden (the later stage wins).
    pub fn add_winner(&mut self, origin: Origin, v: &VariantSpec) {
        for (key, value) in variant_settings(v) {
            let new = Setting {
                value: value.clone(),
                origin: origin.clone(),
            };
            if let Some(old) = self.settings.insert(key.clone(), new) {
                self.overridden.push(Overridden {
                    setting: key,
                    earlier: old.origin,
                    earlier_value: old.value,
                    later: origin.clone(),
                    later_value: value,
                });
            }
        }
        self.winners.push(origin);
    }

    /// Puts the chain's settings into an experiment document's `baseline` (and `build`,
    /// and `app` where an unset variable or a whole argument list must leave it).
    pub fn apply_to_baseline(&self, doc: &mut Map<String, Value>) {
        if self.winners.is_empty() {
            return;
        }
        let mut base = take_object(doc, "baseline");
        for (key, s) in &self.settings {
            let (kind, rest) = key.split_once('.').unwrap_or((key.as_str(), ""));
            match kind {
                "env" => set_env(doc, &mut base, rest, &s.value),
                "launcher" => {
                    let mut l = take_object(&mut base, "launcher");
                    l.insert(rest.to_string(), s.value.clone());
                    base.insert("launcher".into(), Value::Object(l));
                }
                "build" => {
                    doc.insert("build".into(), s.value.clone());
                }
                "args" => {
                    let mut app = take_object(doc, "app");
                    app.insert("args".into(), Value::Array(Vec::new()));
                    doc.insert("app".into(), Value::Object(app));
                    base.insert("args".into(), s.value.clone());
                }
                "requires" => push_unique(&mut base, "requires", rest),
                _ => {
                    base.insert(kind.to_string(), s.value.clone());
                }
            }
        }
        let was = base
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or("the campaign's baseline");
        let described = format!("{was}; with {}", self.winners_text());
        base.insert("description".into(), Value::String(described));
        doc.insert("baseline".into(), Value::Object(base));
    }

    /// The chain as one variant named `name` (the confirmation's combined configuration).
    pub fn as_variant(&self, name: &str) -> Value {
        let mut v = Map::new();
        v.insert("name".into(), Value::String(name.to_string()));
        let d = format!("every stage's winner together: {}", self.winners_text());
        v.insert("description".into(), Value::String(d));
        let (mut env, mut unset, mut launcher) = (Map::new(), Vec::new(), Map::new());
        for (key, s) in &self.settings {
            let (kind, rest) = key.split_once('.').unwrap_or((key.as_str(), ""));
            match (kind, &s.value) {
                ("env", Value::Null) => unset.push(Value::String(rest.to_string())),
                ("env", val) => {
                    env.insert(rest.to_string(), val.clone());
                }
                ("launcher", val) => {
                    launcher.insert(rest.to_string(), val.clone());
                }
                ("requires", _) => push_unique(&mut v, "requires", rest),
                (_, val) => {
                    v.insert(kind.to_string(), val.clone());
                }
            }
        }
        for (k, m) in [
            ("env", Value::Object(env)),
            ("launcher", Value::Object(launcher)),
        ] {
            if m.as_object().is_some_and(|o| !o.is_empty()) {
                v.insert(k.into(), m);
            }
        }
        if !unset.is_empty() {
            v.insert("unset".into(), Value::Array(unset));
        }
        Value::Object(v)
    }

    fn winners_text(&self) -> String {
        let names: Vec<String> = self.winners.iter().map(Origin::to_string).collect();
        names.join(" + ")
    }

    /// One line for a generated file's header and the report's chain of baselines.
    pub fn describe(&self) -> String {
        if self.winners.is_empty() {
            return "the campaign's baseline, unchanged".into();
        }
        let mut s = format!("the campaign's baseline with {}", self.winners_text());
        for o in &self.overridden {
            s.push_str(&format!(
                "; `{}` of {} overridden by {}",
                o.setting, o.earlier, o.later
            ));
        }
        s
    }
}

fn take_object(doc: &mut Map<String, Value>, key: &str) -> Map<String, Value> {
    match doc.remove(key) {
        Some(Value::Object(m)) => m,
        _ => Map::new(),
    }
}

fn push_unique(m: &mut Map<String, Value>, key: &str, item: &str) {
    let list = m.entry(key).or_insert_with(|| Value::Array(Vec::new()));
    if let Value::Array(a) = list
        && !a.iter().any(|x| x.as_str() == Some(item))
    {
        a.push(Value::String(item.to_string()));
    }
}

/// A variable set (a string) or unset (null) in the baseline; an unset one leaves `app.env`
/// too, so no arm of the stage has it unless a variant sets it again.
fn set_env(doc: &mut Map<String, Value>, base: &mut Map<String, Value>, name: &str, v: &Value) {
    let mut env = take_object(base, "env");
    let mut unset: Vec<Value> = match base.remove("unset") {
        Some(Value::Array(a)) => a,
        _ => Vec::new(),
    };
    unset.retain(|u| u.as_str() != Some(name));
    if v.is_null() {
        env.remove(name);
        if let Some(Value::Object(app)) = doc.get_mut("app")
            && let Some(Value::Object(app_env)) = app.get_mut("env")
        {
            app_env.remove(name);
        }
        unset.push(Value::String(name.to_string()));
    } else {
        env.insert(name.to_string(), v.clone());
    }
    if !env.is_empty() {
        base.insert("env".into(), Value::Object(env));
    }
    if !unset.is_empty() {
        base.insert("unset".into(), Value::Array(unset));
    }
}

/// A stage's result: its winner, if any, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StageOutcome {
    pub winner: Option<String>,
    pub reason: String,
}

/// The stage's winner: among the variants accepted (and never one whose output differed
/// from the baseline's), the best weighted score; a tie goes to the larger speed-up, then
/// to the variant listed first. No accepted variant: no winner, with each one's decision.
pub fn pick_winner(variants: &[VariantAnalysis]) -> StageOutcome {
    let score = |v: &VariantAnalysis| v.weighted_score.unwrap_or(f64::NEG_INFINITY);
    let speed = |v: &VariantAnalysis| v.speedup.estimate.unwrap_or(f64::NEG_INFINITY);
    let accepted: Vec<&VariantAnalysis> = variants
        .iter()
        .filter(|v| v.decision == Decision::Accept && v.correctness_mismatch.is_none())
        .collect();
    let Some(best) = accepted.iter().copied().reduce(|a, b| {
        let better = score(b) > score(a) || (score(b) == score(a) && speed(b) > speed(a));
        if better { b } else { a }
    }) else {
        let each: Vec<String> = variants
            .iter()
            .map(|v| format!("`{}` {}", v.name, v.decision))
            .collect();
        return StageOutcome {
            winner: None,
            reason: format!(
                "no variant accepted ({}): the baseline passes on unchanged",
                each.join(", ")
            ),
        };
    };
    let tied: Vec<&str> = accepted
        .iter()
        .filter(|v| v.name != best.name && score(v) == score(best))
        .map(|v| v.name.as_str())
        .collect();
    let mut reason = format!(
        "`{}` accepted with the best weighted score ({}) of {} accepted",
        best.name,
        best.weighted_score
            .map_or("—".into(), |s| format!("{s:.1}")),
        accepted.len()
    );
    if !tied.is_empty() {
        reason.push_str(&format!(
            "; tied with {} on weighted score, taken for the larger speed-up (then the first listed)",
            tied.join(", ")
        ));
    }
    StageOutcome {
        winner: Some(best.name.clone()),
        reason,
    }
}

/// The campaign's result: the confirmation's decision and speed-up, the speed-up the
/// stages predict (the product of the winners' speed-ups, each against its own stage's
/// baseline) and the interaction, measured / predicted, whose interval is the
/// confirmation's interval divided by the point prediction (docs/STATISTICS.md §campaign).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Combined {
    pub decision: Decision,
    pub reason: String,
    pub speedup: SpeedUp,
    pub predicted_speedup: Option<f64>,
    pub interaction: SpeedUp,
    /// The largest single winner's speed-up.
    pub best_stage_speedup: Option<f64>,
    /// The combination measured no faster than its best single stage.
    pub not_better_than_best_stage: bool,
}

/// The combined result from the confirmation's analysis of [`super::COMBINED`] and the
/// winners' speed-up estimates.
pub fn combine(confirmation: &VariantAnalysis, winner_speedups: &[f64]) -> Combined {
    let predicted = (!winner_speedups.is_empty()).then(|| winner_speedups.iter().product());
    let best = winner_speedups.iter().copied().reduce(f64::max);
    let s = confirmation.speedup;
    let over = |x: Option<f64>| match (x, predicted) {
        (Some(x), Some(p)) if p > 0.0 => Some(x / p),
        _ => None,
    };
    let interaction = SpeedUp {
        estimate: over(s.estimate),
        ci_low: over(s.ci_low),
        ci_high: over(s.ci_high),
    };
    let not_better = match (s.estimate, best) {
        (Some(e), Some(b)) => e <= b,
        _ => false,
    };
    Combined {
        decision: confirmation.decision,
        reason: confirmation.reason.clone(),
        speedup: s,
        predicted_speedup: predicted,
        interaction,
        best_stage_speedup: best,
        not_better_than_best_stage: not_better,
    }
}
