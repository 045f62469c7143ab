//! compaction_storm (opt-in): a run that compacts its context again and again with no new tool
//! result between compactions (Codex #8481 and #31351: hours of compaction; oh-my-openagent
//! #2995: compaction restarting the task for ever). The post-compaction guard only sees identical
//! tool triples in a short window after one compaction; this counts the compactions themselves:
//! the abortAt-th with no new (tool, args, result) triple since the first ends the run.

use super::context::{cited, Detection, NoTool, NoToolEvent};
use crate::engine::{Detector, Level, Settings};
use crate::tables::messages;

pub(super) fn detect(ctx: &NoTool, s: &Settings) -> Option<Detection> {
    let abort_at = s.compaction_storm_abort_at;
    let NoToolEvent::Compaction = ctx.event else { return None };
    let storm = &ctx.memory.compactions;
    if abort_at == 0 || storm.count < abort_at {
        return None;
    }
    let seqs = &storm.seqs[storm.seqs.len().saturating_sub(storm.count as usize)..];
    let message = messages::compaction_storm_abort(storm.count);
    Some(cited(Detector::CompactionStorm, Level::Critical, storm.count, message, "compaction_storm".into(), seqs))
}

#[cfg(test)]
mod tests {
    use crate::engine::testing::{no_tool, Run};
    use crate::engine::{Action, Detector, Event, Settings};

    fn on() -> Settings {
        Settings { compaction_storm_abort_at: 3, ..no_tool() }
    }

    #[test]
    fn compactions_with_no_new_tool_work_between_them_end_the_run() {
        let mut run = Run::new(on());
        run.round("read", "{}", r#""a""#);
        assert_eq!(run.compaction().action, Action::Allow);
        run.round("read", "{}", r#""a""#); // the same triple: no new work
        assert!(run.compaction().guard_armed, "the guard still arms");
        let v = run.compaction();
        assert_eq!((v.action, v.detector, v.count, v.error_code), (Action::Abort, Detector::CompactionStorm, 3, "compaction_storm"));
        assert_eq!(v.evidence_seqs, [3, 6, 7]);
        assert!(v.message.contains("compacted 3 times with no new tool result"), "{}", v.message);
        assert_eq!(run.call("read", "{}").action, Action::Abort, "the run is over");
    }

    #[test]
    fn compactions_each_followed_by_new_tool_work_never_end_it() {
        let mut run = Run::new(on());
        for i in 0..20 {
            assert_eq!(run.compaction().action, Action::Allow);
            run.round("read", &format!(r#"{{"page": {i}}}"#), r#""text""#);
        }
    }

    #[test]
    fn a_user_turn_starts_the_count_again() {
        let mut run = Run::new(on());
        run.compaction();
        run.compaction();
        run.send(&Event::UserTurn);
        assert_eq!(run.compaction().action, Action::Allow);
        assert_eq!(run.compaction().action, Action::Allow);
        assert_eq!(run.compaction().action, Action::Abort);
    }
}
