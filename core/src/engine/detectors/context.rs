//! What every detector sees (a `Context`: the call being decided and the run's history) and what
//! it answers (a `Detection`), as `detectors/base.py` has them. The counts several detectors
//! share are computed once per call, on first use. Every count is over prior records: the call
//! being decided is not in history yet.

use std::collections::VecDeque;

use crate::engine::{args_hash_text, result_hash_text, same, Detector, Level, Record, Tool};
use crate::fingerprint::PENDING;

pub(crate) struct Detection {
    pub(crate) detector: Detector,
    pub(crate) level: Level,
    pub(crate) count: u32,
    pub(crate) message: String,
    pub(crate) warning_key: String,
    pub(crate) paired_tool_name: String,
    pub(crate) evidence: Vec<usize>,
}

pub(crate) fn detection(detector: Detector, level: Level, count: u32, message: String, key: String, evidence: Vec<usize>) -> Detection {
    Detection { detector, level, count, message, warning_key: key, paired_tool_name: String::new(), evidence }
}

pub(crate) struct Counts {
    pub(crate) streak: u32,
    pub(crate) result_key: Option<(u8, [u8; 32])>,
    pub(crate) recent: u32,
}

pub(crate) struct Context<'a> {
    pub(crate) history: &'a VecDeque<Record>,
    pub(crate) tool: &'a str,
    pub(crate) t: Tool<'a>,
    pub(crate) args: [u8; 32],
    pub(crate) known_poll: bool,
    pub(crate) no_new_streak: u32,
    pub(crate) counts: Option<Counts>,
    /// parallelBatches: each record's batch id (identical calls of one batch count once).
    pub(crate) batches: Option<Vec<u32>>,
    /// The batch id of the call being decided (u32::MAX: it starts a new batch).
    pub(crate) this_batch: u32,
    /// progressResetsRepeats: records below this index are not part of a streak of repeats.
    pub(crate) progress_floor: Option<usize>,
}

impl<'a> Context<'a> {
    /// Indexes of records of this call, newest first.
    pub(crate) fn matches(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.history.len()).rev().filter(move |&i| {
            let r = &self.history[i];
            same(&r.args, &self.args) && r.is_tool(self.t)
        })
    }

    pub(crate) fn counts(&mut self) -> &Counts {
        if self.counts.is_none() {
            let mut streak = 0;
            let mut recent = 0;
            let mut latest: Option<(u8, [u8; 32])> = None;
            let mut open = true;
            // With batches, each batch counts once: by its newest match for the repeats, by its
            // newest completed match for the streak; the call's own batch is this decision.
            let mut group: Option<u32> = None;
            let mut group_counted = false;
            let floor = self.progress_floor.unwrap_or(0);
            for i in self.matches() {
                let id = self.batches.as_ref().map(|b| b[i]);
                if id.is_some() && id == Some(self.this_batch) {
                    continue;
                }
                if id.is_none() || id != group {
                    group = id;
                    group_counted = false;
                    recent += 1;
                }
                if i < floor {
                    open = false;
                }
                let r = &self.history[i];
                if !open || r.status == PENDING || group_counted {
                    continue;
                }
                group_counted = id.is_some();
                let key = (r.status, r.result);
                match latest {
                    None => latest = Some(key),
                    Some(l) if l != key => {
                        open = false;
                        continue;
                    }
                    _ => {}
                }
                streak += 1;
            }
            self.counts = Some(Counts { streak, result_key: latest, recent });
        }
        self.counts.as_ref().unwrap()
    }

    pub(crate) fn args_hash(&self) -> String {
        args_hash_text(self.tool, &self.args)
    }

    pub(crate) fn result_key(&mut self) -> String {
        let key = self.counts().result_key;
        let result = match key {
            None => "none".to_string(),
            Some((s, d)) => result_hash_text(s, &d).unwrap_or_else(|| "none".into()),
        };
        format!("{}:{}:{}", self.tool, self.args_hash(), result)
    }

    pub(crate) fn streak_evidence(&self, count: u32) -> Vec<usize> {
        let mut found: Vec<usize> =
            self.matches().filter(|&i| self.history[i].status != PENDING).take(count as usize).collect();
        found.reverse();
        found
    }

    pub(crate) fn recent_evidence(&self) -> Vec<usize> {
        let mut found: Vec<usize> = self.matches().collect();
        found.reverse();
        found
    }
}
