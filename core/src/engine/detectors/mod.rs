//! The rolling detectors and their precedence (spec section 5), one module per detector.
//!
//! `PRECEDENCE` is the order of the precedence table: the first detector that answers decides
//! the call. `RANKED_AFTER` holds the opt-in detectors that catch what the reference misses
//! (argument churn, identical errors); they rank after the table, so switching them on can only
//! raise a verdict (ALLOW to WARN or BLOCK, WARN to BLOCK), never replace one of the table by
//! one of the same or a lower level.

mod argument_churn;
mod context;
mod error_repeat;
mod generic_repeat;
mod global_breaker;
mod known_poll;
mod ping_pong;
mod run_wide;
mod unknown_tool;

pub(crate) use context::{Context, Detection};
pub(crate) use run_wide::track_outcome;

use crate::engine::{Level, Settings};

type DetectFn = fn(&mut Context, &Settings) -> Option<Detection>;
const PRECEDENCE: [DetectFn; 6] = [
    unknown_tool::detect,
    global_breaker::detect,
    run_wide::detect, // the opt-in run-wide breaker sits right after the global circuit breaker
    known_poll::detect,
    ping_pong::detect,
    generic_repeat::detect,
];
const RANKED_AFTER: [DetectFn; 2] = [error_repeat::detect, argument_churn::detect];

pub(crate) fn detect(ctx: &mut Context, s: &Settings) -> Option<Detection> {
    let mut found = None;
    for d in PRECEDENCE {
        found = d(ctx, s);
        if found.is_some() {
            break;
        }
    }
    if !s.ranked_after_on() || matches!(&found, Some(d) if d.level == Level::Critical) {
        return found;
    }
    let mut rank = found.as_ref().map_or(Level::None, |d| d.level);
    for d in RANKED_AFTER {
        if let Some(det) = d(ctx, s) {
            if det.level > rank {
                rank = det.level;
                let critical = det.level == Level::Critical;
                found = Some(det);
                if critical {
                    break;
                }
            }
        }
    }
    found
}
