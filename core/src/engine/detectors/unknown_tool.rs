//! unknown_tool_repeat: an agent calling a tool that does not exist here, again and again (the
//! errors name the missing tool). Blocks at U (`unknown_tool_threshold`) consecutive such
//! failures naming the same tool; there is no warning level: the call cannot succeed.

use super::context::{detection, Context, Detection};
use crate::tables::messages;
use crate::engine::{Detector, Level, Settings};

pub(super) fn detect(ctx: &mut Context, s: &Settings) -> Option<Detection> {
    let mut count = 0u32;
    let mut missing: Option<&str> = None;
    for r in ctx.history.iter().rev() {
        let Some(name) = r.unknown() else { break };
        if !r.is_tool(ctx.t) {
            break;
        }
        match missing {
            None => missing = Some(name),
            Some(m) if m != name => break,
            _ => {}
        }
        count += 1;
    }
    if count < s.unknown_tool_threshold {
        return None;
    }
    // The key folds the tool's spelling, the message keeps it (a missing tool is named as the error named it).
    let named = missing.unwrap_or(ctx.spelled).to_string();
    let missing = missing.unwrap_or(ctx.tool).to_string();
    let size = ctx.history.len();
    Some(detection(
        Detector::UnknownToolRepeat,
        Level::Critical,
        count,
        messages::unknown_tool_critical(&named, count),
        format!("unknown-tool:{}:{missing}", ctx.tool),
        (size - count as usize..size).collect(),
    ))
}

#[cfg(test)]
mod tests {
    use crate::engine::testing::{seen, small, Run, ALLOW};
    use crate::engine::{Action, Detector, Level};

    const MISSING: &str = "Unknown tool: web_search";

    /// Each call with new arguments, so that no per-call count (generic_repeat) sees them.
    fn params(i: u32) -> String {
        format!(r#"{{"q": {i}}}"#)
    }

    #[test]
    fn allows_below_u_and_blocks_at_u() {
        let mut run = Run::new(small()); // U = 4
        for i in 0..4 {
            assert_eq!(seen(&run.failing_round("web_search", &params(i), MISSING)), ALLOW, "after {i} failures");
        }
        let v = run.call("web_search", &params(4));
        assert_eq!(seen(&v), (Action::Block, Detector::UnknownToolRepeat, 4));
        assert_eq!(v.level, Level::Critical);
        assert_eq!(v.warning_key, "unknown-tool:web_search:web_search");
        assert!(v.message.contains("unavailable tool web_search"), "{}", v.message);
        assert_eq!(v.evidence_seqs, [1, 3, 5, 7]);
        // A block is not recorded, so the next attempt is blocked again at the same count.
        assert_eq!(seen(&run.call("web_search", &params(5))), (Action::Block, Detector::UnknownToolRepeat, 4));
    }

    #[test]
    fn another_missing_name_starts_the_count_over() {
        let mut run = Run::new(small());
        for i in 0..3 {
            run.failing_round("web_search", &params(i), MISSING);
        }
        run.failing_round("web_search", &params(3), "Unknown tool: web_fetch");
        assert_eq!(seen(&run.call("web_search", &params(4))), ALLOW);
    }

    #[test]
    fn other_errors_do_not_count() {
        let mut run = Run::new(small());
        for i in 0..6 {
            assert_eq!(seen(&run.failing_round("web_search", &params(i), "rate limited")), ALLOW);
        }
    }
}
