//! The typed parts of a report's provenance: how the decision was reached (the
//! experiment's id, its looks under the sequential rule, the jobs that ran its blocks and
//! what the compute nodes' probes found; the engine fills it in at every look, and
//! `optgate run` runs the same engine), and where a samples file's numbers came from
//! (`optgate analyze`). Typed here, with the report, so the report's shape is defined in
//! one crate; each is stored in the provenance object under its fields' keys.

use serde::{Deserialize, Serialize};

/// How the decision was reached.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecisionProvenance {
    pub experiment_id: String,
    pub sequential: SequentialProvenance,
    pub jobs: Vec<JobProvenance>,
    /// What the compute nodes' probes found against the experiment (cluster jobs only;
    /// absent when nothing).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub compute_node_findings: Vec<serde_json::Value>,
}

/// The look rule and the looks taken, this one included.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SequentialProvenance {
    /// The rule in words (spending function, or a single look).
    pub rule: String,
    /// The false-accept rate spent over all looks.
    pub overall_alpha: f64,
    pub first_look_blocks: u32,
    pub max_blocks: u32,
    pub planned_looks: u32,
    pub looks: Vec<LookProvenance>,
}

/// One look: when it was taken, at what level, and each variant's decision then.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LookProvenance {
    pub look: u32,
    pub blocks: u32,
    pub nominal_alpha: f64,
    /// The variants' decisions at that look, as the daemon's protocol reports them.
    pub decisions: serde_json::Value,
}

/// One scheduler job of the experiment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobProvenance {
    pub name: String,
    pub block: u32,
    pub attempt: u32,
    pub scheduler_job_id: Option<String>,
    pub state: String,
}

/// Where a report of a samples file comes from: the file as the user named it, and the
/// optgate that analysed it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SamplesProvenance {
    pub samples_file: String,
    pub optgate_version: String,
}

impl crate::model::Report {
    /// Records how the decision was reached in the provenance object (made if absent).
    pub fn set_decision_provenance(&mut self, d: &DecisionProvenance) {
        self.merge_provenance(d);
    }

    /// Records the samples file a report analyses in the provenance object (made if
    /// absent).
    pub fn set_samples_provenance(&mut self, p: &SamplesProvenance) {
        self.merge_provenance(p);
    }

    /// The samples file the report analyses, when it is a samples file's report.
    pub fn samples_provenance(&self) -> Option<SamplesProvenance> {
        serde_json::from_value(self.provenance.clone()?).ok()
    }

    /// Adds `part`'s fields to the provenance object (made if absent); fields already
    /// there with other keys stay.
    fn merge_provenance(&mut self, part: &impl Serialize) {
        let value = serde_json::to_value(part).expect("provenance serialises");
        let serde_json::Value::Object(fields) = value else {
            unreachable!("a struct serialises to an object")
        };
        let p = self
            .provenance
            .get_or_insert_with(|| serde_json::Value::Object(Default::default()));
        if let serde_json::Value::Object(map) = p {
            map.extend(fields);
        }
    }

    /// How the decision was reached, when the report holds it (reports of a samples file
    /// do not).
    pub fn decision_provenance(&self) -> Option<DecisionProvenance> {
        serde_json::from_value(self.provenance.clone()?).ok()
    }
}
