//! What the detectors of loops without tool calls remember of a run (its `Rare::outputs`), and
//! every change to it: an output, a compaction, new tool work, a user turn. The detectors
//! (detectors/repeated_output.rs and its three siblings) only read it.
//!
//! "New tool work" is an outcome whose (tool, args, result) triple is new to the run, as the
//! run-wide breaker counts it (`track_outcome`): re-reading the same file is no progress.

use super::outputs::{Output, OutputKind};
use super::{RunState, Settings};

/// The most seqs a streak keeps as its evidence (the latest).
pub const MAX_STREAK_SEQS: usize = 16;

/// A run of events that counts toward one detector: the digest they share (0 where none is
/// compared), how many in a row, how many in a row were one piece repeated (`chunky`, outputs
/// only), and the seqs of the latest events of its stream (the evidence: the last `count`, or
/// the last `chunky`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Streak {
    pub digest: u64,
    pub count: u32,
    pub chunky: u32,
    pub seqs: Vec<u64>,
}

impl Streak {
    fn add(&mut self, digest: u64, seq: u64) {
        if self.digest != digest {
            self.count = 0;
        }
        self.digest = digest;
        self.count = self.count.saturating_add(1);
        self.push_seq(seq);
    }
    fn push_seq(&mut self, seq: u64) {
        if self.seqs.len() >= MAX_STREAK_SEQS {
            self.seqs.remove(0);
        }
        self.seqs.push(seq);
    }
    fn clear(&mut self) {
        *self = Streak::default();
    }
}

/// The memory itself.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OutputMemory {
    /// repeated_output: per output kind (OutputKind as the index), the identical outputs in a
    /// row, and the outputs in a row that were one piece repeated.
    pub streaks: [Streak; 3],
    /// compaction_storm: compactions since the last new tool work.
    pub compactions: Streak,
    /// stop_continuation: final answers with stop_hook_active in a row since the last new tool
    /// work (a final answer without it, a fresh stop, ends the run of them).
    pub continuations: Streak,
    /// repeated_final_answer: turns in a row that ended in the same final answer (a final
    /// answer without stop_hook_active ends a turn) with no new tool work in them. Survives
    /// user turns, as the turns are what it counts.
    pub answers: Streak,
    /// New tool work since the last turn-ending final answer.
    pub work_since_answer: bool,
}

impl OutputMemory {
    pub fn streak(&self, kind: OutputKind) -> &Streak {
        &self.streaks[kind as usize]
    }
}

impl Settings {
    pub(crate) fn repeated_output_on(&self) -> bool {
        self.repeated_output_warn_at > 0 || self.repeated_output_abort_at > 0
    }
    pub(crate) fn repeated_final_answer_on(&self) -> bool {
        self.repeated_final_answer_warn_at > 0 || self.repeated_final_answer_abort_at > 0
    }
    /// Any detector of loops without tool calls on (and rolling detection with them).
    pub(crate) fn no_tool_on(&self) -> bool {
        self.rolling_on()
            && (self.repeated_output_on() || self.compaction_storm_abort_at > 0 || self.stop_continuation_abort_at > 0
                || self.repeated_final_answer_on())
    }
}

fn memory(state: &mut RunState) -> &mut OutputMemory {
    state.rare_mut().outputs.get_or_insert_with(Default::default)
}

/// A model output: its kind's streak, the stop hook's continuations and the turn's answer.
/// `digest` is the output's identity (outputs::digest); `chunky`: its text is one piece repeated.
pub(crate) fn observe_output(state: &mut RunState, output: &Output, digest: u64, chunky: bool) {
    let m = memory(state);
    let streak = &mut m.streaks[output.kind as usize];
    streak.add(digest, output.seq);
    streak.chunky = if chunky { streak.chunky.saturating_add(1) } else { 0 };
    if output.kind != OutputKind::FinalAnswer {
        return;
    }
    if output.stop_hook_active {
        m.continuations.add(0, output.seq);
        return;
    }
    m.continuations.clear();
    if m.work_since_answer {
        m.answers.clear();
        m.work_since_answer = false;
    }
    m.answers.add(digest, output.seq);
}

/// A compaction retry.
pub(crate) fn observe_compaction(state: &mut RunState, seq: u64) {
    memory(state).compactions.add(0, seq);
}

/// An outcome new to the run: every streak of a turn ends, and the turn's answer counts afresh.
pub(crate) fn tool_work(state: &mut RunState) {
    let Some(m) = state.rare_if_any().and_then(|r| r.outputs.as_deref_mut()) else { return };
    m.streaks.iter_mut().for_each(Streak::clear);
    m.compactions.clear();
    m.continuations.clear();
    m.work_since_answer = true;
}

/// A user turn (with userTurnResets): the streaks of a turn end; the answers across turns stay,
/// and so do the stop hook's continuations: a host may re-send its prompt hook for the
/// continuation a stop hook asked for (Gemini CLI 0.61.0 fires BeforeAgent again for an AfterAgent
/// retry), and a person's new prompt ends its turn with a fresh stop, which starts them again.
pub(crate) fn user_turn(state: &mut RunState) {
    let Some(m) = state.rare_if_any().and_then(|r| r.outputs.as_deref_mut()) else { return };
    m.streaks.iter_mut().for_each(Streak::clear);
    m.compactions.clear();
}
