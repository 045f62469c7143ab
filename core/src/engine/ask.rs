//! The ASK verdict (`loopwarden.onCritical: "ask"`): a critical handed to a person instead of
//! blocked, the run's pending asks and denied patterns, the answer (`approval` event) and the
//! standing exemptions ("always" answers) a critical is checked against.
//!
//! Its own module so the rest of the engine meets it at two small hook points: `on_critical`
//! when a detector's verdict is critical, `on_approval` for the approval event. The exemptions
//! themselves are tenant-wide and live in the service (`service::exemptions`); the engine only
//! reads the ones of the run's agent (`AskIo::exemptions`) and hands a new grant back
//! (`AskIo::granted`), so no run state ever holds another run's data.

use super::{same, Action, Detector, Level, RunState, Tool, Verdict};
use crate::fingerprint::PENDING;
use crate::tables::{error_codes, messages};

/// Bound of `Asks::pending` (the oldest ask goes first: it would long have timed out).
pub const MAX_PENDING_ASKS: usize = 16;
/// Bound of `Asks::denied` (the oldest pattern goes first).
pub const MAX_DENIED_PATTERNS: usize = 64;
/// Longest standing exemption, whatever an approval's ttl_seconds asks (30 days).
pub const MAX_EXEMPTION_TTL_SECONDS: u32 = 30 * 86400;

/// What asked: a critical of a detector (onCritical) or a budget (onBudget, run trees' work).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AskCause {
    Critical,
    Budget,
}

impl AskCause {
    pub fn name(self) -> &'static str {
        match self {
            AskCause::Critical => "critical",
            AskCause::Budget => "budget",
        }
    }
    pub fn from_name(name: &str) -> Option<AskCause> {
        [AskCause::Critical, AskCause::Budget].into_iter().find(|c| c.name() == name)
    }
}

/// The latest outcome of a call as history holds it: (status, result digest).
pub type Outcome = (u8, [u8; 32]);

/// One ASK waiting for its answer.
#[derive(Clone, Debug, PartialEq)]
pub struct PendingAsk {
    /// The asked call's id ("" when it had none: the decision id names it then).
    pub tool_call_id: Box<str>,
    /// The ASK verdict's decision id (the service stamps it once the verdict has one).
    pub decision_id: Box<str>,
    /// The pattern asked about (the verdict's warning_key).
    pub warning_key: Box<str>,
    pub tool: Box<str>,
    /// The call's projected args digest.
    pub args: [u8; 32],
    /// The call's latest outcome when asked: an "always" exemption holds only while it stays so.
    pub outcome: Option<Outcome>,
    /// The service's clock (monotonic) when asked; the state store keeps it as wall-clock time.
    pub asked_at: f64,
    pub cause: AskCause,
}

/// A run's asks: the pending ones and the patterns a person denied (or let time out).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Asks {
    pub pending: Vec<PendingAsk>,
    pub denied: Vec<Box<str>>,
}

impl Asks {
    fn is_empty(&self) -> bool {
        self.pending.is_empty() && self.denied.is_empty()
    }
}

/// A standing approval as the engine matches it (the service keeps the tenant's table).
#[derive(Clone, Debug, PartialEq)]
pub struct Exemption {
    pub id: String,
    /// The agent id of the run whose ASK it answered ("": the global config's agent).
    pub agent_id: String,
    pub tool: String,
    pub args: [u8; 32],
    /// The loop's latest outcome when approved: a later critical whose call has another one is
    /// new evidence, and the exemption does not cover it.
    pub outcome: Option<Outcome>,
    /// The service's clock (monotonic); wall-clock time only in the store and the RPCs.
    pub created_at: f64,
    pub expires_at: f64,
    pub run_id: String,
}

/// An "always" answer the service turns into an exemption.
#[derive(Clone, Debug, PartialEq)]
pub struct Grant {
    /// The answered ASK's decision id: the exemption's id.
    pub decision_id: String,
    pub tool: String,
    pub args: [u8; 32],
    pub outcome: Option<Outcome>,
    /// Seconds it stands (already resolved against exemptionTtlSeconds and capped).
    pub ttl_seconds: u32,
}

/// How a person answered (approvals by answer, for metrics).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    ApprovedOnce,
    ApprovedAlways,
    Denied,
}

impl Answer {
    pub fn name(self) -> &'static str {
        match self {
            Answer::ApprovedOnce => "approved_once",
            Answer::ApprovedAlways => "approved_always",
            Answer::Denied => "denied",
        }
    }
}

/// What the service hands the engine for one event, and what the engine hands back.
#[derive(Default)]
pub struct AskIo<'a> {
    /// The event's accepts_ask: only then may a verdict be ASK.
    pub accepts_ask: bool,
    /// The service's clock (monotonic seconds).
    pub now: f64,
    /// The tenant's exemptions (those of `agent_id` apply).
    pub exemptions: &'a [Exemption],
    /// The run's agent id ("": the global config's agent).
    pub agent_id: &'a str,
    /// Out: an "always" approval to record as an exemption.
    pub granted: Option<Grant>,
    /// Out: the approval this event answered.
    pub answer: Option<Answer>,
    /// Out: asks that timed out (counted as denials) when this event arrived.
    pub timed_out: u32,
    /// Out: the exemption that let a critical through.
    pub exempted_by: Option<String>,
    /// Out: an approved budget ask's pattern (`budget:<name>`): that budget gets another
    /// allowance of its size (service/budgets.rs).
    pub extended: Option<Box<str>>,
}

/// The answer of an `approval` event, as the engine reads it.
pub struct Approval<'a> {
    pub tool_call_id: &'a str,
    pub decision_id: &'a str,
    pub approved: bool,
    pub always: bool,
    pub ttl_seconds: u32,
}

/// What a critical becomes.
pub(super) enum Turn {
    /// As without ASK: BLOCK (or the ABORT it escalates to).
    Block,
    /// Held for a person (the verdict is already rewritten).
    Ask,
    /// A standing exemption covers it: the call runs as an allowed one.
    Exempt,
}

/// Detectors whose criticals a standing exemption covers: the repeat detectors. The breakers
/// (global, run-wide), budgets and aborts are safety nets a person's "always" does not lift.
fn exemptible(detector: Detector) -> bool {
    matches!(
        detector,
        Detector::GenericRepeat | Detector::KnownPollNoProgress | Detector::PingPong | Detector::UnknownToolRepeat
            | Detector::ArgumentChurn | Detector::ErrorRepeat | Detector::Cycle | Detector::FailureCascade
            | Detector::DuplicateSideEffect
    )
}

/// The newest completed outcome of (tool, args) in the run's history.
fn latest_outcome(state: &RunState, t: Tool, args: &[u8; 32]) -> Option<Outcome> {
    state.history().iter().rev()
        .find(|r| r.status != PENDING && r.is_tool(t) && same(&r.args, args))
        .map(|r| (r.status, r.result))
}

/// Asks past askTimeoutSeconds count as denials; judged when the run's next event arrives.
pub(super) fn expire(state: &mut RunState, timeout_seconds: u32, io: &mut AskIo) {
    let Some(asks) = state.rare_if_any().and_then(|r| r.asks.as_mut()) else { return };
    let timeout = timeout_seconds as f64;
    let mut i = 0;
    while i < asks.pending.len() {
        if io.now - asks.pending[i].asked_at >= timeout {
            let ask = asks.pending.remove(i);
            deny(asks, ask.warning_key);
            io.timed_out += 1;
        } else {
            i += 1;
        }
    }
    if asks.is_empty() {
        if let Some(r) = state.rare_if_any() {
            r.asks = None;
        }
    }
}

fn deny(asks: &mut Asks, key: Box<str>) {
    if asks.denied.contains(&key) {
        return;
    }
    if asks.denied.len() >= MAX_DENIED_PATTERNS {
        asks.denied.remove(0);
    }
    asks.denied.push(key);
}

/// Whether a person denied the pattern `key` in this run, or left an ask of it unanswered past
/// askTimeoutSeconds (which counts as a denial, though `expire` marks it only later).
pub fn is_denied(state: &RunState, key: &str, now: f64, timeout_seconds: u32) -> bool {
    state.rare().asks.as_ref().is_some_and(|a| {
        a.denied.iter().any(|k| **k == *key)
            || a.pending.iter().any(|p| *p.warning_key == *key && now - p.asked_at >= timeout_seconds as f64)
    })
}

/// A user turn: a new instruction makes the denials moot (pending asks may still be answered).
pub(super) fn forget_denials(state: &mut RunState) {
    if let Some(asks) = state.rare_if_any().and_then(|r| r.asks.as_mut()) {
        asks.denied.clear();
        if asks.is_empty() {
            if let Some(r) = state.rare_if_any() {
                r.asks = None;
            }
        }
    }
}

/// A critical verdict `v` of the call (t, args): covered by an exemption, asked, or blocked.
/// A block that would end the run (it reaches abortAfterBlocks) is never asked.
pub(super) fn on_critical(state: &mut RunState, s: &crate::engine::Settings, io: &mut AskIo, v: &mut Verdict,
                          t: Tool, args: &[u8; 32], call_id: &str) -> Turn {
    let would_abort = s.abort_after_blocks > 0 && state.blocks + 1 >= s.abort_after_blocks;
    let outcome = latest_outcome(state, t, args);
    if exemptible(v.detector) {
        let covering = io.exemptions.iter().find(|e| {
            e.expires_at > io.now && e.agent_id == io.agent_id && e.tool == t.name && same(&e.args, args) && (e.outcome.is_none() || outcome.is_none() || e.outcome == outcome)
        });
        if let Some(e) = covering {
            io.exempted_by = Some(e.id.clone());
            return Turn::Exempt;
        }
    }
    if s.on_critical != "ask" || !io.accepts_ask || would_abort {
        return Turn::Block;
    }
    if is_denied(state, &v.warning_key, io.now, s.ask_timeout_seconds) {
        return Turn::Block;
    }
    ask(v);
    if !s.shadow {
        hold(state, PendingAsk {
            tool_call_id: call_id.into(),
            decision_id: "".into(),
            warning_key: v.warning_key.as_str().into(),
            tool: t.name.into(),
            args: *args,
            outcome,
            asked_at: io.now,
            cause: AskCause::Critical,
        });
    }
    Turn::Ask
}

/// A critical verdict rewritten as ASK: same detector, level, count and evidence.
fn ask(v: &mut Verdict) {
    let reason = v.message.strip_prefix("CRITICAL: ").unwrap_or(&v.message).to_string();
    v.message = messages::ask_critical(v.detector.name(), &v.tool_name, reason);
    v.action = Action::Ask;
    v.level = Level::Critical;
    v.announce = true;
}

/// Keep an ask pending (also for budget asks: `cause` Budget).
pub fn hold(state: &mut RunState, ask: PendingAsk) {
    let asks = state.rare_mut().asks.get_or_insert_with(Default::default);
    if asks.pending.len() >= MAX_PENDING_ASKS {
        asks.pending.remove(0);
    }
    asks.pending.push(ask);
}

/// The service gave the ASK verdict its decision id: the newest pending ask is that verdict's.
pub fn stamp_decision_id(state: &mut RunState, decision_id: &str) {
    if let Some(ask) = state.rare_if_any().and_then(|r| r.asks.as_mut()).and_then(|a| a.pending.last_mut()) {
        if ask.decision_id.is_empty() {
            ask.decision_id = decision_id.into();
        }
    }
}

/// An `approval` event: the pending ask it answers, settled. REJECT `no_pending_ask` when none.
pub(super) fn on_approval(state: &mut RunState, s: &crate::engine::Settings, io: &mut AskIo, a: &Approval) -> Verdict {
    let found = state.rare().asks.as_ref().and_then(|asks| {
        asks.pending.iter().position(|p| {
            (!a.tool_call_id.is_empty() && *p.tool_call_id == *a.tool_call_id)
                || (!a.decision_id.is_empty() && *p.decision_id == *a.decision_id)
        })
    });
    let Some(index) = found else {
        return Verdict::reject(error_codes::NO_PENDING_ASK, no_pending_ask_message(a.tool_call_id, a.decision_id));
    };
    let asks = state.rare_if_any().and_then(|r| r.asks.as_mut()).expect("found");
    let ask = asks.pending.remove(index);
    let tool = ask.tool.to_string();
    if ask.cause == AskCause::Budget && a.approved {
        // A person let the run go on past a budget: it gets another allowance of the budget's
        // size (once or always alike: an exemption from a budget would be no budget at all).
        io.extended = Some(ask.warning_key.clone());
        io.answer = Some(Answer::ApprovedOnce);
        if asks.is_empty() {
            if let Some(r) = state.rare_if_any() {
                r.asks = None;
            }
        }
        return Verdict::allow(&tool);
    }
    io.answer = Some(if !a.approved {
        deny(asks, ask.warning_key.clone());
        Answer::Denied
    } else if a.always {
        let ttl = if a.ttl_seconds == 0 { s.exemption_ttl_seconds } else { a.ttl_seconds };
        io.granted = Some(Grant {
            decision_id: ask.decision_id.to_string(),
            tool: tool.clone(),
            args: ask.args,
            outcome: ask.outcome,
            ttl_seconds: ttl.min(MAX_EXEMPTION_TTL_SECONDS),
        });
        Answer::ApprovedAlways
    } else {
        Answer::ApprovedOnce
    });
    if asks.is_empty() {
        if let Some(r) = state.rare_if_any() {
            r.asks = None;
        }
    }
    Verdict::allow(&tool)
}

/// REJECT no_pending_ask's message: what was looked for.
pub fn no_pending_ask_message(tool_call_id: &str, decision_id: &str) -> String {
    let looked_for = match (tool_call_id.is_empty(), decision_id.is_empty()) {
        (true, true) => return "approval names no call: set approval.tool_call_id (or approval.decision_id when the asked call had no id)".to_string(),
        (false, true) => format!("approval.tool_call_id {tool_call_id:?}"),
        (true, false) => format!("approval.decision_id {decision_id:?}"),
        (false, false) => format!("approval.tool_call_id {tool_call_id:?} or approval.decision_id {decision_id:?}"),
    };
    format!("no ASK of this run is waiting for {looked_for}: it was never asked, already answered, or timed out (an ASK unanswered for askTimeoutSeconds counts as a denial)")
}

/// Pending asks' times between the service's clock and wall-clock time (`offset` = wall - now
/// to store, now - wall to load).
pub fn shift_times(state: &mut RunState, offset: f64) {
    if let Some(asks) = state.rare_if_any().and_then(|r| r.asks.as_mut()) {
        for ask in asks.pending.iter_mut() {
            ask.asked_at += offset;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::testing::{seen, small, Run, ALLOW};
    use crate::engine::{Event, Settings};

    const TOOL: &str = "fetch";
    const ARGS: &str = r#"{"url": "x"}"#;

    fn asking() -> Settings {
        Settings { on_critical: "ask".into(), ..small() }
    }

    /// Five identical rounds: the next identical call is generic_repeat's critical.
    fn looping(settings: Settings) -> Run {
        let mut run = Run::new(settings);
        for _ in 0..5 {
            run.round(TOOL, ARGS, r#""same""#);
        }
        run
    }

    fn io(now: f64) -> AskIo<'static> {
        AskIo { accepts_ask: true, now, ..Default::default() }
    }

    /// The verdict the next identical call would get, the run left as it is.
    fn peek(run: &Run, mut io: AskIo) -> Verdict {
        let mut copy = Run::new(run.settings.clone());
        copy.state = run.state.clone();
        copy.call_with(TOOL, ARGS, "peek", &mut io)
    }

    fn approve(run: &mut Run, call_id: &str, approved: bool, always: bool, io: &mut AskIo) -> Verdict {
        run.send_with(&Event::Approval(Approval { tool_call_id: call_id, decision_id: "", approved, always, ttl_seconds: 0 }), io)
    }

    #[test]
    fn the_first_critical_asks_and_is_not_a_block() {
        let mut run = looping(Settings { abort_after_blocks: 2, ..asking() });
        let v = run.call_with(TOOL, ARGS, "c1", &mut io(10.0));
        assert_eq!(seen(&v), (Action::Ask, Detector::GenericRepeat, 5));
        assert!(v.announce && v.level == Level::Critical);
        assert!(v.message.starts_with("CRITICAL: this call is held for a person"), "{}", v.message);
        assert!(v.message.contains("generic_repeat on fetch"), "{}", v.message);
        assert!(!v.evidence_seqs.is_empty());
        assert_eq!(run.state.blocks, 0, "an ASK does not count toward abortAfterBlocks");
        assert_eq!(run.state.history().len(), 5, "the asked call is not recorded");
        let pending = &run.state.rare().asks.as_ref().unwrap().pending[0];
        assert_eq!((&*pending.tool_call_id, &*pending.warning_key, pending.asked_at, pending.cause), ("c1", v.warning_key.as_str(), 10.0, AskCause::Critical));
        stamp_decision_id(&mut run.state, "lw-1");
        assert_eq!(&*run.state.rare().asks.as_ref().unwrap().pending[0].decision_id, "lw-1");
    }

    #[test]
    fn without_accepts_ask_or_with_on_critical_block_it_is_the_block() {
        let mut run = looping(asking());
        assert_eq!(run.call_with(TOOL, ARGS, "c1", &mut AskIo::default()).action, Action::Block);
        let mut run = looping(small());
        assert_eq!(run.call_with(TOOL, ARGS, "c1", &mut io(0.0)).action, Action::Block);
        assert!(run.state.rare().asks.is_none());
    }

    #[test]
    fn approved_once_the_next_critical_asks_again() {
        let mut run = looping(asking());
        assert_eq!(run.call_with(TOOL, ARGS, "c1", &mut io(1.0)).action, Action::Ask);
        let mut answer = io(2.0);
        assert_eq!(seen(&approve(&mut run, "c1", true, false, &mut answer)), ALLOW);
        assert_eq!((answer.answer, answer.granted.is_none()), (Some(Answer::ApprovedOnce), true));
        assert!(run.state.rare().asks.is_none(), "answered");
        run.result(TOOL, ARGS, r#""same""#); // the approved call ran
        assert_eq!(run.call_with(TOOL, ARGS, "c2", &mut io(3.0)).action, Action::Ask);
    }

    #[test]
    fn a_denial_blocks_the_pattern_until_a_user_turn() {
        let mut run = looping(asking());
        assert_eq!(run.call_with(TOOL, ARGS, "c1", &mut io(1.0)).action, Action::Ask);
        let mut answer = io(2.0);
        approve(&mut run, "c1", false, false, &mut answer);
        assert_eq!(answer.answer, Some(Answer::Denied));
        assert_eq!(seen(&run.call_with(TOOL, ARGS, "c2", &mut io(3.0))), (Action::Block, Detector::GenericRepeat, 5));
        assert_eq!(run.state.blocks, 1);
        run.send(&Event::UserTurn);
        assert!(run.state.rare().asks.is_none(), "a new instruction clears the denial");
        for _ in 0..5 {
            run.round(TOOL, ARGS, r#""same""#);
        }
        assert_eq!(run.call_with(TOOL, ARGS, "c3", &mut io(4.0)).action, Action::Ask);
    }

    #[test]
    fn an_unanswered_ask_times_out_as_a_denial() {
        let mut run = looping(Settings { ask_timeout_seconds: 60, ..asking() });
        assert_eq!(run.call_with(TOOL, ARGS, "c1", &mut io(100.0)).action, Action::Ask);
        let mut early = io(159.0);
        assert_eq!(run.call_with(TOOL, ARGS, "c2", &mut early).action, Action::Ask, "still waiting: asked again");
        assert_eq!(early.timed_out, 0);
        let mut late = io(161.0);
        assert_eq!(run.call_with(TOOL, ARGS, "c3", &mut late).action, Action::Block);
        assert_eq!(late.timed_out, 1, "c1 timed out (c2's ask, at 159, has not yet)");
        let mut answer = io(162.0);
        assert_eq!(approve(&mut run, "c1", true, false, &mut answer).error_code, "no_pending_ask");
    }

    #[test]
    fn an_approval_naming_no_pending_ask_is_rejected() {
        let mut run = looping(asking());
        let v = approve(&mut run, "nope", true, false, &mut io(1.0));
        assert_eq!((v.action, v.error_code), (Action::Reject, "no_pending_ask"));
        assert!(v.message.contains(r#"approval.tool_call_id "nope""#), "{}", v.message);
        // A call without an id is answered by the ASK's decision id.
        run.call_with(TOOL, ARGS, "", &mut io(1.0));
        stamp_decision_id(&mut run.state, "lw-7");
        let v = run.send_with(&Event::Approval(Approval { tool_call_id: "", decision_id: "lw-7", approved: true, always: false, ttl_seconds: 0 }), &mut io(2.0));
        assert_eq!(v.action, Action::Allow);
    }

    #[test]
    fn always_grants_an_exemption_that_re_arms_on_new_evidence() {
        // A global breaker far off: it is not covered by an exemption (tested below).
        let mut run = looping(Settings { exemption_ttl_seconds: 600, global_circuit_breaker_threshold: 50, ..asking() });
        run.call_with(TOOL, ARGS, "c1", &mut io(1.0));
        stamp_decision_id(&mut run.state, "lw-1");
        let mut answer = io(2.0);
        approve(&mut run, "c1", true, true, &mut answer);
        let grant = answer.granted.expect("an always answer");
        assert_eq!((grant.decision_id.as_str(), grant.tool.as_str(), grant.ttl_seconds), ("lw-1", TOOL, 600));
        let exemption = Exemption {
            id: grant.decision_id, agent_id: String::new(), tool: grant.tool, args: grant.args, outcome: grant.outcome,
            created_at: 2.0, expires_at: 602.0, run_id: "r".into(),
        };
        let table = [exemption];
        let with = |now: f64| AskIo { accepts_ask: true, now, exemptions: &table, agent_id: "", ..Default::default() };
        run.result(TOOL, ARGS, r#""same""#);
        for i in 0..5 {
            let mut x = with(3.0 + i as f64);
            assert_eq!(seen(&run.call_with(TOOL, ARGS, "c", &mut x)), ALLOW, "call {i}");
            assert_eq!(x.exempted_by.as_deref(), Some("lw-1"));
            run.result(TOOL, ARGS, r#""same""#);
        }
        // Another agent's runs, or an expired exemption, are not covered.
        let other = AskIo { accepts_ask: true, now: 9.0, exemptions: &table, agent_id: "other", ..Default::default() };
        assert_eq!(peek(&run, other).action, Action::Ask);
        assert_eq!(peek(&run, with(700.0)).action, Action::Ask);
        // New evidence: the loop's latest outcome changed, so the exemption does not cover it.
        run.result(TOOL, ARGS, r#""different""#);
        for _ in 0..5 {
            run.result(TOOL, ARGS, r#""different""#);
        }
        assert_eq!(run.call_with(TOOL, ARGS, "c9", &mut with(10.0)).action, Action::Ask);
    }

    #[test]
    fn the_breakers_are_not_covered_by_an_exemption() {
        let table = [Exemption {
            id: "x".into(), agent_id: String::new(), tool: TOOL.into(), args: [0; 32], outcome: None,
            created_at: 0.0, expires_at: 1e9, run_id: String::new(),
        }];
        let mut v = Verdict::allow(TOOL);
        v.detector = Detector::GlobalCircuitBreaker;
        v.level = Level::Critical;
        let mut run = Run::new(Settings { on_critical: "block".into(), ..small() });
        let mut x = AskIo { accepts_ask: true, now: 1.0, exemptions: &table, ..Default::default() };
        assert!(matches!(on_critical(&mut run.state, &run.settings, &mut x, &mut v, Tool::new(TOOL), &[0; 32], ""), Turn::Block));
        v.detector = Detector::GenericRepeat;
        assert!(matches!(on_critical(&mut run.state, &run.settings, &mut x, &mut v, Tool::new(TOOL), &[0; 32], ""), Turn::Exempt));
    }

    #[test]
    fn a_block_that_would_end_the_run_is_never_asked_and_shadow_wins() {
        let mut run = looping(Settings { abort_after_blocks: 1, ..asking() });
        assert_eq!(run.call_with(TOOL, ARGS, "c1", &mut io(1.0)).action, Action::Abort);
        let mut run = looping(Settings { shadow: true, ..asking() });
        let v = run.call_with(TOOL, ARGS, "c1", &mut io(1.0));
        assert_eq!((v.action, v.shadow_action), (Action::Allow, Some(Action::Ask)));
        assert!(run.state.rare().asks.is_none(), "nobody is asked in shadow mode");
    }
}
