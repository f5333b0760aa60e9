//! Campaigns in the database: the campaign's row (its file and state) and its steps, each
//! a stage experiment or the confirmation, recorded in the same transaction as the
//! experiment itself ([`Store::insert_campaign_stage`]), so a crash never leaves a step
//! without its experiment nor creates one twice.

use rusqlite::{OptionalExtension, params};
use serde::{Deserialize, Serialize};

use crate::error::StoreError;
use crate::model::{BlockRow, NewExperiment, NewRun};
use crate::store::{Store, insert_experiment_rows, now};

/// Where a campaign stands; the same words the database stores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CampaignState {
    /// A step is running or about to be created.
    Running,
    /// The confirmation ended (or no stage had a winner).
    Finished,
    Cancelled,
    Failed,
}

impl CampaignState {
    pub fn as_str(self) -> &'static str {
        match self {
            CampaignState::Running => "running",
            CampaignState::Finished => "finished",
            CampaignState::Cancelled => "cancelled",
            CampaignState::Failed => "failed",
        }
    }

    fn parse(word: &str) -> Option<CampaignState> {
        [Self::Running, Self::Finished, Self::Cancelled, Self::Failed]
            .into_iter()
            .find(|s| s.as_str() == word)
    }
}

impl std::fmt::Display for CampaignState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct NewCampaign {
    pub id: String,
    pub name: String,
    pub source_path: String,
    pub source_text: String,
    pub root: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct CampaignRow {
    pub id: String,
    pub name: String,
    pub source_path: String,
    pub source_text: String,
    pub root: String,
    pub state: CampaignState,
    pub state_reason: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    /// Its steps' experiment ids, in step order.
    pub steps: Vec<String>,
}

impl Store {
    pub fn insert_campaign(&mut self, c: &NewCampaign) -> Result<(), StoreError> {
        let t = now();
        self.conn
            .execute(
                "INSERT INTO campaigns (id, name, source_path, source_text, root, state, \
                 created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, 'running', ?6, ?6)",
                params![c.id, c.name, c.source_path, c.source_text, c.root, t],
            )
            .map_err(self.err("record the new campaign"))?;
        Ok(())
    }

    /// Step `step` of campaign `campaign` and its experiment, in one transaction. A step
    /// already recorded is refused (the primary key), so it is never created twice.
    pub fn insert_campaign_stage(
        &mut self,
        campaign: &str,
        step: u32,
        e: &NewExperiment,
        blocks: &[BlockRow],
        runs: &[NewRun],
    ) -> Result<(), StoreError> {
        let err = self.err("record a campaign's next step");
        let run = |s: &mut Store| -> rusqlite::Result<()> {
            let tx = s.conn.transaction()?;
            insert_experiment_rows(&tx, e, blocks, runs)?;
            tx.execute(
                "INSERT INTO campaign_steps (campaign_id, step, experiment_id) VALUES (?1, ?2, ?3)",
                params![campaign, step, e.id],
            )?;
            tx.execute(
                "UPDATE campaigns SET updated_at = ?2 WHERE id = ?1",
                params![campaign, now()],
            )?;
            tx.commit()
        };
        run(self).map_err(err)
    }

    pub fn set_campaign_state(
        &mut self,
        id: &str,
        state: CampaignState,
        reason: Option<&str>,
    ) -> Result<(), StoreError> {
        self.conn
            .execute(
                "UPDATE campaigns SET state = ?2, state_reason = ?3, updated_at = ?4 WHERE id = ?1",
                params![id, state.as_str(), reason, now()],
            )
            .map_err(self.err("change a campaign's state"))?;
        Ok(())
    }

    pub fn campaign(&self, id: &str) -> Result<Option<CampaignRow>, StoreError> {
        Ok(self.campaigns()?.into_iter().find(|c| c.id == id))
    }

    /// Whether `id` names a campaign.
    pub fn is_campaign(&self, id: &str) -> Result<bool, StoreError> {
        self.conn
            .query_row("SELECT 1 FROM campaigns WHERE id = ?1", [id], |_| Ok(()))
            .optional()
            .map(|r| r.is_some())
            .map_err(self.err("read a campaign"))
    }

    /// Every campaign with its steps, oldest first.
    pub fn campaigns(&self) -> Result<Vec<CampaignRow>, StoreError> {
        let err = self.err("read the campaigns");
        let read = || -> rusqlite::Result<Vec<CampaignRow>> {
            let mut q = self.conn.prepare(
                "SELECT id, name, source_path, source_text, root, state, state_reason, \
                 created_at, updated_at FROM campaigns ORDER BY created_at, id",
            )?;
            let mut rows: Vec<CampaignRow> = q
                .query_map([], |r| {
                    let word: String = r.get(5)?;
                    Ok(CampaignRow {
                        id: r.get(0)?,
                        name: r.get(1)?,
                        source_path: r.get(2)?,
                        source_text: r.get(3)?,
                        root: r.get(4)?,
                        state: CampaignState::parse(&word).unwrap_or(CampaignState::Failed),
                        state_reason: r.get(6)?,
                        created_at: r.get(7)?,
                        updated_at: r.get(8)?,
                        steps: Vec::new(),
                    })
                })?
                .collect::<Result<_, _>>()?;
            let mut q = self.conn.prepare(
                "SELECT campaign_id, experiment_id FROM campaign_steps ORDER BY campaign_id, step",
            )?;
            let steps =
                q.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?;
            for s in steps {
                let (c, e) = s?;
                if let Some(row) = rows.iter_mut().find(|x| x.id == c) {
                    row.steps.push(e);
                }
            }
            Ok(rows)
        };
        read().map_err(err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use optgate_experiment::SchedulerKind;

    fn experiment(id: &str) -> NewExperiment {
        NewExperiment {
            id: id.into(),
            name: id.into(),
            source_path: "/x.yaml".into(),
            source_text: "name: x".into(),
            source_sha256: "0".into(),
            root: format!("/runs/{id}"),
            scheduler: SchedulerKind::Local,
            replicates: 5,
            max_replicates: 5,
        }
    }

    /// A step and its experiment are one transaction: a step recorded twice is refused and
    /// leaves no second experiment behind (planted bug caught: the experiment inserted in
    /// its own transaction before the step).
    #[test]
    fn a_step_is_recorded_once_with_its_experiment() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(&dir.path().join("state.db")).unwrap();
        let c = NewCampaign {
            id: "c1".into(),
            name: "pass".into(),
            source_path: "/c.yaml".into(),
            source_text: "stages: []".into(),
            root: "/runs".into(),
        };
        s.insert_campaign(&c).unwrap();
        s.insert_campaign_stage("c1", 0, &experiment("c1-1"), &[], &[])
            .unwrap();
        assert!(
            s.insert_campaign_stage("c1", 0, &experiment("c1-1b"), &[], &[])
                .is_err()
        );
        assert!(
            s.experiment("c1-1b").unwrap().is_none(),
            "rolled back with its step"
        );
        s.insert_campaign_stage("c1", 1, &experiment("c1-2"), &[], &[])
            .unwrap();
        let row = s.campaign("c1").unwrap().unwrap();
        assert_eq!(row.steps, vec!["c1-1".to_string(), "c1-2".to_string()]);
        assert_eq!(row.state, CampaignState::Running);
        s.set_campaign_state("c1", CampaignState::Cancelled, Some("by the user"))
            .unwrap();
        let row = s.campaign("c1").unwrap().unwrap();
        assert_eq!(
            (row.state, row.state_reason.as_deref()),
            (CampaignState::Cancelled, Some("by the user"))
        );
        assert!(s.is_campaign("c1").unwrap() && !s.is_campaign("c1-1").unwrap());
    }
}
