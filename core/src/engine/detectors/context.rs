//! What every detector sees (a `Context`: the call being decided and the run's history) and what
//! it answers (a `Detection`), as `detectors/base.py` has them. The counts several detectors
//! share are computed once per call, on first use. Every count is over prior records: the call
//! being decided is not in history yet.

use std::collections::VecDeque;

use crate::engine::batches::INCONCLUSIVE;
use crate::engine::output_memory::OutputMemory;
use crate::engine::outputs::OutputKind;
use crate::engine::{args_hash_text, result_hash_text, same, Detector, Level, Record, Settings, SideEffect, Tool};
use crate::fingerprint::PENDING;
use crate::tool_rules::ToolClass;

pub(crate) struct Detection {
    pub(crate) detector: Detector,
    pub(crate) level: Level,
    pub(crate) count: u32,
    pub(crate) message: String,
    pub(crate) warning_key: String,
    pub(crate) paired_tool_name: String,
    pub(crate) evidence: Vec<usize>,
    /// Evidence cited by (seqs, call ids) instead of history indexes (a record that may have left
    /// the window); None for most detectors.
    pub(crate) cited: Option<(Vec<u64>, Vec<String>)>,
}

pub(crate) fn detection(detector: Detector, level: Level, count: u32, message: String, key: String, evidence: Vec<usize>) -> Detection {
    Detection { detector, level, count, message, warning_key: key, paired_tool_name: String::new(), evidence, cited: None }
}

/// What a detector of loops without tool calls sees: the run's memory of outputs and
/// compactions (engine::output_memory), already updated with the event being judged.
pub(crate) struct NoTool<'a> {
    pub(crate) memory: &'a OutputMemory,
    pub(crate) event: NoToolEvent,
}

/// The event a detector of loops without tool calls judges.
#[derive(Clone, Copy)]
pub(crate) enum NoToolEvent {
    /// A model output: its kind, whether a stop hook keeps its turn going, and how many copies
    /// of one piece its text is (outputs::chunk_copies; 0 without text).
    Output { kind: OutputKind, stop_hook_active: bool, copies: u32 },
    Compaction,
}

/// A detection citing seqs (a no-tool streak's evidence; they are no history records).
pub(crate) fn cited(detector: Detector, level: Level, count: u32, message: String, key: String, seqs: &[u64]) -> Detection {
    Detection { cited: Some((seqs.to_vec(), Vec::new())), ..detection(detector, level, count, message, key, Vec::new()) }
}

pub(crate) struct Counts {
    pub(crate) streak: u32,
    pub(crate) result_key: Option<(u8, [u8; 32])>,
    /// The newest completed record of the streak (None: no match has an outcome).
    pub(crate) latest: Option<usize>,
    pub(crate) recent: u32,
    /// When execFailureStreak's tail of terminal exec failures is the longer streak: its
    /// records (oldest first), the streak's evidence.
    pub(crate) failure_tail: Option<Vec<usize>>,
}

pub(crate) struct Context<'a> {
    pub(crate) history: &'a VecDeque<Record>,
    /// The normalised name (keys, matching) and the host's spelling of it (messages).
    pub(crate) tool: &'a str,
    pub(crate) spelled: &'a str,
    pub(crate) t: Tool<'a>,
    pub(crate) args: [u8; 32],
    pub(crate) known_poll: bool,
    pub(crate) no_new_streak: u32,
    pub(crate) counts: Option<Counts>,
    /// The call's class (config rule, else what the caller sent).
    pub(crate) tool_class: ToolClass,
    /// The run's remembered mutating calls (duplicate_side_effect).
    pub(crate) side_effects: &'a [SideEffect],
    /// execFailureStreak is on and the call is an exec: terminal failures of other commands
    /// count toward its streak (`failure_tail`).
    pub(crate) exec_failures: bool,
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
            let mut latest_index = None;
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
                    None => {
                        latest = Some(key);
                        latest_index = Some(i);
                    }
                    Some(l) if l != key => {
                        open = false;
                        continue;
                    }
                    _ => {}
                }
                streak += 1;
            }
            let mut counts = Counts { streak, result_key: latest, latest: latest_index, recent, failure_tail: None };
            if self.exec_failures {
                let tail = self.failure_tail();
                if tail.len() as u32 > counts.streak {
                    let newest = &self.history[tail[tail.len() - 1]];
                    counts.streak = tail.len() as u32;
                    counts.result_key = Some((newest.status, newest.result));
                    counts.latest = Some(tail[tail.len() - 1]);
                    counts.failure_tail = Some(tail);
                }
            }
            self.counts = Some(counts);
        }
        self.counts.as_ref().unwrap()
    }

    /// The newest run of exec records that ended in one terminal failure (one failure identity),
    /// oldest first, as upstream's `countNoProgressStreak(.., terminalExecFailuresOnly)`: another
    /// tool, an exec without a terminal failure or another failure ends it, and so does meeting
    /// this call's command again once another command came between (A, B, A: the B reset it).
    /// Calls still without an outcome are passed over.
    fn failure_tail(&self) -> Vec<usize> {
        let mut tail = Vec::new();
        let mut identity: Option<&[u8; 32]> = None;
        let mut crossed = false;
        for i in (0..self.history.len()).rev() {
            let r = &self.history[i];
            if !r.is_tool(self.t) {
                break;
            }
            if r.status == PENDING {
                continue;
            }
            let Some(key) = r.failure_key() else { break };
            let this_command = same(&r.args, &self.args);
            match identity {
                None => {
                    identity = Some(key);
                    crossed = !this_command;
                }
                Some(first) => {
                    if (crossed && this_command) || !same(first, key) {
                        break;
                    }
                    crossed |= !this_command;
                }
            }
            tail.push(i);
        }
        tail.reverse();
        tail
    }

    /// `loopwarden.sameOutcome`: the identical outcomes at which this call is blocked (the call
    /// one before is warned), or None when the setting is off or the streak is execFailureStreak's
    /// (changing commands, judged as churn). An inconclusive outcome (crate::inconclusive) takes
    /// `inconclusiveBlockAt`, except for a known poll (`poll`), whose unchanged answer is the
    /// no-progress itself.
    pub(crate) fn same_outcome_block_at(&mut self, s: &Settings, poll: bool) -> Option<u32> {
        if s.same_outcome_block_at == 0 {
            return None;
        }
        let (tail, latest) = {
            let c = self.counts();
            (c.failure_tail.is_some(), c.latest)
        };
        if tail {
            return None;
        }
        let weak = !poll && latest.is_some_and(|i| self.history[i].flags & INCONCLUSIVE != 0);
        let at = if weak { s.same_outcome_inconclusive_block_at } else { s.same_outcome_block_at };
        Some(at.min(s.critical_threshold))
    }

    /// No identical call of the run has an outcome yet (a host that reports none).
    pub(crate) fn no_outcome_yet(&self) -> bool {
        self.matches().all(|i| self.history[i].status == PENDING)
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
        if let Some(tail) = self.counts.as_ref().and_then(|c| c.failure_tail.as_ref()) {
            return tail.clone();
        }
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
