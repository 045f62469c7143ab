//! The engine's entry: one event in, one verdict out, the run state updated in place. It decodes
//! the event's JSON, gates on the run's abort and the settings, asks the detectors, and turns
//! their detection into a verdict (escalation to abort, shadow mode, announcing a warning once
//! per decade of its count). The detectors only read history; every write to it happens here.

use crate::fingerprint::{args_digest, is_known_poll, outcome_fingerprint, Catalog, MARKER, PENDING, RESULT};
use crate::exec_failure::exec_failure_key;
use crate::inconclusive::{says_nothing, transient_error};
use crate::tables::{error_codes, messages};
use crate::json::{decode, py_isspace, JsonError, Value};
use crate::tool_rules::{ToolClass, ToolRule};
use crate::toolnames::normalize_tool_name;

use super::ask::{self, AskIo, Turn};
use super::batches;
use super::compaction_guard::observe_outcome;
use super::no_tool::{on_compaction, on_model_output};
use super::output_memory;
use super::detectors::{detect, track_outcome, Context};
use super::side_effects::{class_of, remember_call, settle, succeeded};
use super::run_state::spelling_of;
use super::{same, Action, Level, Record, RunState, Settings, Tool, Verdict};

/// One event as the engine sees it (JSON still as text).
pub enum Event<'a> {
    /// `tool_class`: what the caller says the tool does (MCP annotations); a config rule wins.
    ToolCall { tool_name: &'a str, params_json: &'a str, tool_call_id: &'a str, seq: u64, tool_class: ToolClass },
    ToolOutcome { tool_name: &'a str, params_json: &'a str, tool_call_id: &'a str, result_json: Option<&'a str>, error: Option<&'a str>, seq: u64 },
    /// The runner compacted its context and retries (arms the post-compaction guard; counted by
    /// compaction_storm).
    CompactionRetry { seq: u64 },
    RunEnd,
    /// A new instruction from a person or an orchestrator: the run starts fresh for detection.
    UserTurn,
    /// A person's answer to an ASK (engine::ask).
    Approval(ask::Approval<'a>),
    /// What the model said (engine::outputs).
    ModelOutput(super::outputs::Output<'a>),
}

struct Invalid(&'static str, String);

fn decode_field<'t>(text: &'t str, field: &str, code: &'static str, max_depth: usize) -> Result<Value<'t>, Invalid> {
    decode(text, max_depth).map_err(|e| match e {
        JsonError::TooDeep(m) => Invalid(error_codes::JSON_TOO_DEEP, format!("{field} {m}")),
        JsonError::Invalid(m) => Invalid(code, format!("{field} is not valid JSON: {m}")),
    })
}

fn decode_params(text: &str, max_depth: usize) -> Result<Value<'_>, Invalid> {
    if text.is_empty() || text.chars().all(py_isspace) {
        return Ok(Value::Object(Vec::new()));
    }
    decode_field(text, "params_json", error_codes::INVALID_PARAMS_JSON, max_depth)
}

/// `args_digest`, remembering the last params text hashed: a call's outcome repeats its params
/// byte for byte, and equal text (and tool) decodes to an equal value, so to an equal digest.
fn args_digest_of(tool: &str, params_json: &str, params: &Value) -> [u8; 32] {
    thread_local! {
        static LAST: std::cell::RefCell<(String, String, [u8; 32])> = const { std::cell::RefCell::new((String::new(), String::new(), [0; 32])) };
    }
    LAST.with(|last| {
        let mut last = last.borrow_mut();
        if last.1 == params_json && last.0 == tool && !params_json.is_empty() {
            return last.2;
        }
        let digest = args_digest(tool, params);
        if params_json.len() <= 1 << 16 {
            last.0.clear();
            last.0.push_str(tool);
            last.1.clear();
            last.1.push_str(params_json);
            last.2 = digest;
        }
        digest
    })
}

/// The args digest of a call under its tool rule: the projected arguments when the rule projects
/// them (not cached: two agents' rules may project the same text differently), else as sent.
fn rule_digest(rule: Option<&ToolRule>, tool: &str, params_json: &str, params: &Value) -> [u8; 32] {
    match rule {
        Some(r) if r.projects_args() => args_digest(tool, &r.project_args(params)),
        _ => args_digest_of(tool, params_json, params),
    }
}

fn still_aborted(state: &RunState, tool_name: &str) -> Option<Verdict> {
    let abort = state.rare().abort.as_ref()?;
    let mut v = (**abort).clone();
    if !tool_name.is_empty() {
        v.tool_name = tool_name.to_string();
    }
    Some(v)
}

fn gate(state: &mut RunState, s: &Settings, tool_name: &str) -> Option<Verdict> {
    if let Some(v) = still_aborted(state, tool_name) {
        return Some(v);
    }
    if !s.recording_on() {
        return Some(Verdict::allow(tool_name));
    }
    if s.history_size != state.capacity {
        state.resize(s.history_size);
    }
    None
}

fn evidence(state: &RunState, indexes: &[usize]) -> (Vec<u64>, Vec<String>) {
    let seqs = indexes.iter().map(|&i| state.history()[i].seq()).collect();
    let ids = indexes
        .iter()
        .filter_map(|&i| state.history()[i].call_id().map(str::to_string))
        .collect();
    (seqs, ids)
}

fn record(seq: u64, tool: Tool, args: [u8; 32], call_id: &str, status: u8, result: [u8; 32], unknown: Option<&str>) -> Record {
    Record::of(seq, tool, args, result, status, (!call_id.is_empty()).then_some(call_id), unknown)
}

pub fn evaluate(state: &mut RunState, event: &Event, s: &Settings, catalog: &Catalog, max_depth: usize) -> Verdict {
    evaluate_with(state, event, s, catalog, max_depth, &mut AskIo::default())
}

/// `evaluate` with what ASK needs from the service and gives back (engine::ask::AskIo).
pub fn evaluate_with(state: &mut RunState, event: &Event, s: &Settings, catalog: &Catalog, max_depth: usize, io: &mut AskIo) -> Verdict {
    if state.rare().asks.is_some() {
        ask::expire(state, s.ask_timeout_seconds, io);
    }
    let result = match event {
        Event::ToolCall { tool_name, params_json, tool_call_id, seq, tool_class } => {
            on_tool_call(state, tool_name, params_json, tool_call_id, *seq, *tool_class, s, catalog, max_depth, io)
        }
        Event::ToolOutcome { tool_name, params_json, tool_call_id, result_json, error, seq } => {
            on_tool_outcome(state, tool_name, params_json, tool_call_id, *result_json, *error, *seq, s, catalog, max_depth)
        }
        Event::CompactionRetry { seq } => Ok(still_aborted(state, "").unwrap_or_else(|| on_compaction(state, s, *seq))),
        Event::RunEnd => Ok(Verdict::allow("")),
        Event::UserTurn => Ok(still_aborted(state, "").unwrap_or_else(|| user_turn(state, s))),
        Event::Approval(a) => Ok(still_aborted(state, "").unwrap_or_else(|| ask::on_approval(state, s, io, a))),
        Event::ModelOutput(output) => Ok(still_aborted(state, "").unwrap_or_else(|| on_model_output(state, s, output))),
    };
    result.unwrap_or_else(|Invalid(code, message)| Verdict::reject(code, message))
}

/// A user turn (loopwarden.userTurnResets): forget the repeat streaks (history, warnings
/// announced, the run-wide streak and triples, the output streaks of the turn), the sticky
/// blocks' count and the batch recovery. The post-compaction guard, duplicate_side_effect's
/// memory and repeated_final_answer's count of turns stay; an abort is gated before.
fn user_turn(state: &mut RunState, s: &Settings) -> Verdict {
    if s.user_turn_resets {
        state.clear_history();
        if let Some(r) = state.rare_if_any() {
            r.announced = None;
        }
        state.blocks = 0;
        if let Some(r) = state.rare_if_any() {
            r.seen_triples = None;
        }
        state.no_new_streak = 0;
        if let Some(r) = state.rare_if_any() {
            r.batch = None;
        }
        ask::forget_denials(state);
        output_memory::user_turn(state);
    }
    Verdict::allow("")
}

#[allow(clippy::too_many_arguments)]
fn on_tool_call(
    state: &mut RunState, raw_tool: &str, params_json: &str, call_id: &str, seq: u64, sent_class: ToolClass,
    s: &Settings, catalog: &Catalog, max_depth: usize, io: &mut AskIo,
) -> Result<Verdict, Invalid> {
    let tool = normalize_tool_name(raw_tool);
    // Messages and the verdict name the tool as the host spelled it; everything else folds it.
    let spelled = spelling_of(raw_tool, &tool);
    let params = decode_params(params_json, max_depth)?;
    if let Some(v) = gate(state, s, spelled) {
        return Ok(v);
    }
    let rule = s.tool_rules.find(&tool);
    let class = class_of(rule, sent_class);
    let digest = rule_digest(rule, &tool, params_json, &params);
    let t = Tool::spelled(&tool, spelled);
    // duplicate_side_effect remembers a mutating call once it is let through (or shadowed).
    let side_effect = s.duplicate_side_effect && class == ToolClass::Mutating;
    let batched = batches::tracking(s);
    let link = if batched { batches::place_call(state) } else { 0 };
    if batched && batches::scope_is_batch(s) {
        if let Some(v) = sibling_of_critical(state, spelled) {
            return Ok(if s.shadow { v.shadowed() } else { v });
        }
    }
    // The call as it runs (allowed, warned, exempt or shadowed): recorded pending, linked to its
    // batch, and remembered by duplicate_side_effect once let through.
    let runs = |state: &mut RunState| {
        let mut r = record(seq, t, digest, call_id, PENDING, [0; 32], None);
        if !state.incoming_carried.is_empty() {  // no lookup of the extras for a call that carries nothing
            r.set_carried(state.incoming_carried);
        }
        append_call(state, batched, link, r);
        if side_effect {
            remember_call(state, &tool, digest, seq, call_id);
        }
    };
    let found = if s.rolling_on() {
        let ids = s.parallel_batches.then(|| batches::batch_ids(state.history(), batches::outcomes_seen(state)));
        let this_batch = ids.as_deref().map_or(u32::MAX, |ids| batches::this_batch(state, link, ids));
        let progress_floor = if s.progress_floor_on() {
            batches::progress_floor(state.history(), |r| same(&r.args, &digest) && r.is_tool(t))
        } else {
            None
        };
        let mut ctx = Context {
            history: state.history(),
            tool: &tool,
            spelled,
            t,
            args: digest,
            known_poll: class == ToolClass::Poll || is_known_poll(&tool, &params, catalog),
            no_new_streak: state.no_new_streak,
            counts: None,
            tool_class: class,
            side_effects: state.rare().side_effects.as_deref().map_or(&[], Vec::as_slice),
            exec_failures: s.exec_failure_streak && tool == "exec",
            batches: ids,
            this_batch,
            progress_floor,
        };
        detect(&mut ctx, s)
    } else {
        None
    };
    let Some(mut det) = found else {
        runs(state);
        return Ok(allow_owned(tool, raw_tool));
    };
    let (seqs, ids) = match det.cited.take() {
        Some(cited) => cited,
        None => evidence(state, &det.evidence),
    };
    let mut v = Verdict {
        action: Action::Warn,
        detector: det.detector,
        level: det.level,
        count: det.count,
        message: det.message,
        warning_key: det.warning_key,
        announce: false,
        paired_tool_name: det.paired_tool_name,
        error_code: "",
        tool_name: spelled.to_string(),
        evidence_seqs: seqs,
        evidence_call_ids: ids,
        shadow_action: None,
        guard_armed: false,
    };
    if det.level == Level::Critical {
        match ask::on_critical(state, s, io, &mut v, t, &digest, call_id) {
            Turn::Block => {}
            // An exempt critical runs as an allowed call does (recorded, no message).
            Turn::Exempt => {
                runs(state);
                return Ok(allow_owned(tool, raw_tool));
            }
            // Not a block: not counted toward abortAfterBlocks, the call not recorded (it runs,
            // if at all, after an approval; its outcome arrives as any call's does).
            Turn::Ask => {
                if s.shadow {
                    runs(state);
                    return Ok(v.shadowed());
                }
                return Ok(v);
            }
        }
        state.blocks += 1;
        v.action = Action::Block;
        v.announce = true;
        if s.abort_after_blocks > 0 && state.blocks >= s.abort_after_blocks {
            let last = v.message.strip_prefix("CRITICAL: ").unwrap_or(&v.message).to_string();
            v.message = messages::escalation_abort(state.blocks, v.detector.name(), &v.tool_name, last);
            v.action = Action::Abort;
            v.error_code = error_codes::TOOL_LOOP_PERSISTED;
        }
        if batched && batches::scope_is_batch(s) {
            critical_in_batch_scope(state, &mut v);
        }
        if s.shadow {
            runs(state);
            return Ok(v.shadowed());
        }
        if v.action == Action::Abort {
            state.rare_mut().abort = Some(Box::new(v.clone()));
        }
        return Ok(v);
    }
    runs(state);
    v.announce = state.announce(&v.warning_key, v.count);
    Ok(v)
}

/// A call's record, linked to its batch when batches are tracked.
fn append_call(state: &mut RunState, batched: bool, link: u8, mut r: Record) {
    if batched {
        r.flags = batches::record_link(state, link);
    }
    state.append(r);
}

/// criticalScope "batch": a call of the batch whose earlier call was the run's first critical
/// is blocked with it (not recorded, not counted toward abortAfterBlocks).
fn sibling_of_critical(state: &RunState, tool: &str) -> Option<Verdict> {
    let batch = state.rare().batch.as_ref()?;
    let first = batch.critical.as_ref().filter(|c| c.batch == batch.number)?;
    let mut v = Verdict::allow(tool);
    v.action = Action::Block;
    v.level = Level::Critical;
    v.detector = first.detector;
    v.announce = true;
    v.message = messages::batch_sibling_critical(first.detector.name(), &first.tool);
    v.warning_key = format!("batch:{}", batch.number);
    Some(v)
}

/// criticalScope "batch": the run's first critical leaves one recovery turn (its batch's other
/// calls are blocked with it); a critical in any later batch ends the run.
fn critical_in_batch_scope(state: &mut RunState, v: &mut Verdict) {
    let Some(batch) = state.rare_if_any().and_then(|r| r.batch.as_mut()) else { return };
    if batch.critical.as_ref().is_some_and(|c| c.batch != batch.number) {
        let last = v.message.strip_prefix("CRITICAL: ").unwrap_or(&v.message).to_string();
        v.message = messages::recovery_failed_abort(v.detector.name(), &v.tool_name, last);
        v.action = Action::Abort;
        v.error_code = error_codes::LOOP_RECOVERY_FAILED;
        return;
    }
    if batch.critical.is_none() {
        batch.critical = Some(Box::new(batches::FirstCritical { batch: batch.number, detector: v.detector, tool: v.tool_name.clone() }));
    }
}

#[allow(clippy::too_many_arguments)]
fn on_tool_outcome(
    state: &mut RunState, raw_tool: &str, params_json: &str, call_id: &str, result_json: Option<&str>,
    error: Option<&str>, seq: u64, s: &Settings, catalog: &Catalog, max_depth: usize,
) -> Result<Verdict, Invalid> {
    let tool = normalize_tool_name(raw_tool);
    let spelled = spelling_of(raw_tool, &tool);
    let params = decode_params(params_json, max_depth)?;
    let has_result = error.is_none() && matches!(result_json, Some(r) if !r.is_empty());
    let mut result = if has_result {
        Some(decode_field(result_json.unwrap_or(""), "result_json", error_codes::INVALID_RESULT_JSON, max_depth)?)
    } else {
        None
    };
    if let Some(v) = gate(state, s, spelled) {
        return Ok(v);
    }
    let rule = s.tool_rules.find(&tool);
    // Success is judged on the result as sent, before any ignoreResult path is removed from it.
    let ok = s.duplicate_side_effect && error.is_none() && succeeded(RESULT, result.as_ref());
    if let (Some(r), Some(value)) = (rule, result.as_mut()) {
        r.project_result(value); // volatile fields a host adds are not part of the outcome
    }
    let raw = error.or(result_json);
    let wrapped = matches!(raw, Some(r) if r.contains(MARKER));
    let fp = outcome_fingerprint(&tool, &params, result.as_ref(), error, catalog, wrapped);
    if fp.status == PENDING {
        return Ok(allow_owned(tool, raw_tool));
    }
    let digest = rule_digest(rule, &tool, params_json, &params);
    let t = Tool::spelled(&tool, spelled);
    if s.duplicate_side_effect {
        let mutating = class_of(rule, ToolClass::Unknown) == ToolClass::Mutating;
        settle(state, &tool, &digest, call_id, seq, ok, mutating);
    }
    // Only kept when asked for: a record without one costs nothing and persists nothing.
    let failure = if s.exec_failure_streak && tool == "exec" { exec_failure_key(result.as_ref()) } else { None };
    let inconclusive = s.same_outcome_block_at > 0
        && match error {
            Some(e) => transient_error(e),
            None => fp.status == RESULT && result.as_ref().is_some_and(|r| says_nothing(r)),
        };
    let inconclusive = if inconclusive { batches::INCONCLUSIVE } else { 0 };
    // Fill the newest matching pending call, or append a completed record.
    let mut filled = false;
    let mut index = state.history().len();
    for i in (0..state.history().len()).rev() {
        let r = &state.history()[i];
        if !same(&r.args, &digest) || !r.is_tool(t) || r.status != PENDING {
            continue;
        }
        if !call_id.is_empty() && r.call_id() != Some(call_id) {
            continue;
        }
        let r = state.record_mut(i);
        r.status = fp.status;
        r.result = fp.digest;
        r.complete(fp.unknown_tool_name.as_deref());
        r.set_failure_key(failure);
        r.flags |= inconclusive;
        filled = true;
        index = i;
        break;
    }
    if !filled {
        let mut completed = record(seq, t, digest, call_id, fp.status, fp.digest, fp.unknown_tool_name.as_deref());
        completed.set_failure_key(failure);
        completed.flags |= inconclusive;
        state.append(completed);
        index = state.history().len() - 1;
    }
    if batches::tracking(s) {
        batches::place_outcome(state);
    }
    if s.run_wide_breaker_threshold > 0 || s.progress_floor_on() || s.no_tool_on() {
        let before = state.no_new_streak;
        let new = track_outcome(state, &tool, &digest, fp.status, &fp.digest);
        if new && s.no_tool_on() {
            output_memory::tool_work(state);
        }
        if new && s.progress_floor_on() {
            state.record_mut(index).flags |= batches::NEW_TRIPLE;
        }
        // A batch is one step of the run-wide streak: its first completed call decides it.
        if !new && s.parallel_batches && batches::sibling_completed(state.history(), index) {
            state.no_new_streak = before;
        }
    }
    if let Some(abort) = observe_outcome(state, &tool, spelled, digest, fp.status, fp.digest, seq) {
        if s.shadow {
            return Ok(abort.shadowed());
        }
        state.rare_mut().abort = Some(Box::new(abort.clone()));
        return Ok(abort);
    }
    Ok(allow_owned(tool, raw_tool))
}

/// `Verdict::allow` naming the tool as the host spelled it (`raw`, as `spelling_of` trims it),
/// in the normalised name's buffer: no allocation when the two agree (most hosts' names) nor,
/// mostly, when they differ (`Bash` fits where `exec` was, as does any name only lower-cased).
fn allow_owned(mut tool: String, raw: &str) -> Verdict {
    let trimmed = raw.trim_matches(py_isspace);
    if !trimmed.is_empty() && trimmed != tool {
        tool.clear();
        tool.push_str(trimmed);
    }
    let mut v = Verdict::allow("");
    v.tool_name = tool;
    v
}

#[cfg(test)]
mod tests {
    use crate::engine::testing::{seen, small, Run, ALLOW};
    use crate::engine::{Action, Detector, Event, Settings, Verdict};

    /// A host's spelling (`Bash`) is what messages and the verdict name, while
    /// matching, keys and hashes fold it (`exec`), so a loop spelled two ways is one loop.
    #[test]
    fn messages_name_the_tool_as_the_host_spelled_it_and_matching_folds_it() {
        let mut run = Run::new(small());
        let cmd = r#"{"command": "ls"}"#;
        run.round("Bash", cmd, r#""a""#);
        run.round("exec", cmd, r#""a""#);
        run.round("BASH", cmd, r#""a""#);
        let v = run.call(" Bash ", cmd);
        assert_eq!(seen(&v), (Action::Warn, Detector::GenericRepeat, 3), "the calls are one loop");
        assert_eq!(v.tool_name, "Bash", "the event's own spelling, trimmed");
        assert!(v.message.starts_with("WARNING: Bash has been called 3 times"), "{}", v.message);
        assert!(v.warning_key.starts_with("generic:exec:"), "keys keep the normalised name: {}", v.warning_key);
        run.result("Bash", cmd, r#""a""#);
        let v = run.call("exec", cmd);
        assert!(v.message.starts_with("WARNING: exec has been called 4 times"), "the current call's spelling: {}", v.message);
        let spellings: Vec<_> = run.state.history().iter().map(|r| (r.tool(), r.spelling())).collect();
        assert_eq!(spellings, [("exec", "Bash"), ("exec", "exec"), ("exec", "BASH"), ("exec", "Bash"), ("exec", "exec")]);
        assert_eq!(run.call("  ", "{}").tool_name, "tool", "a blank name is shown as its normalised name");
    }

    #[test]
    fn a_ping_pong_names_the_other_tool_as_its_call_spelled_it() {
        let mut run = Run::new(small());
        let (a, b) = (("Bash", r#"{"command": "make"}"#), ("Read", r#"{"path": "x"}"#));
        let mut last = Verdict::allow("");
        for i in 0..4 {
            let (tool, params) = if i % 2 == 0 { a } else { b };
            last = run.round(tool, params, &format!(r#""{i}""#));
        }
        assert_eq!(last.detector, Detector::PingPong);
        assert_eq!((last.tool_name.as_str(), last.paired_tool_name.as_str()), ("Read", "Bash"));
        assert!(last.message.contains("between Read and Bash"), "{}", last.message);
        assert!(!last.warning_key.contains("Bash"), "{}", last.warning_key);
    }

    const CALL: (&str, &str) = ("fetch", r#"{"url": "x"}"#);

    /// Five identical rounds: the next call is generic_repeat's block (W 3, C 5).
    fn looping(settings: Settings) -> Run {
        let mut run = Run::new(settings);
        for _ in 0..5 {
            run.round(CALL.0, CALL.1, r#""same""#);
        }
        run
    }

    #[test]
    fn blocks_escalate_to_an_abort_at_abort_after_blocks() {
        let mut run = looping(Settings { abort_after_blocks: 2, ..small() });
        assert_eq!(seen(&run.call(CALL.0, CALL.1)), (Action::Block, Detector::GenericRepeat, 5));
        let v = run.call(CALL.0, CALL.1);
        assert_eq!(seen(&v), (Action::Abort, Detector::GenericRepeat, 5));
        assert_eq!(v.error_code, "tool_loop_persisted");
        assert!(v.message.starts_with("CRITICAL: run aborted: this is block 2 of the run"), "{}", v.message);
        let next = run.call("other", "{}");
        assert_eq!((next.action, next.error_code, next.tool_name.as_str()), (Action::Abort, "tool_loop_persisted", "other"));
    }

    #[test]
    fn a_user_turn_starts_the_run_fresh_for_detection() {
        let mut run = looping(Settings { abort_after_blocks: 2, run_wide_breaker_threshold: 6, ..small() });
        assert_eq!(seen(&run.call(CALL.0, CALL.1)), (Action::Block, Detector::GenericRepeat, 5));
        assert_eq!(run.state.blocks, 1);
        run.send(&Event::CompactionRetry { seq: 0 });
        assert!(run.state.rare().guard.is_some());
        let v = run.send(&Event::UserTurn);
        assert_eq!(seen(&v), ALLOW);
        assert!(run.state.history().is_empty() && run.state.rare().announced.is_none() && run.state.rare().seen_triples.is_none());
        assert_eq!((run.state.blocks, run.state.no_new_streak), (0, 0));
        assert!(run.state.rare().guard.is_some(), "the post-compaction guard stays armed");
        // The same call is allowed again, and its streak counts from the turn.
        assert_eq!(seen(&run.round(CALL.0, CALL.1, r#""same""#)), ALLOW);
    }

    #[test]
    fn an_aborted_run_stays_aborted_after_a_user_turn() {
        let mut run = looping(Settings { abort_after_blocks: 1, ..small() });
        assert_eq!(run.call(CALL.0, CALL.1).action, Action::Abort);
        let v = run.send(&Event::UserTurn);
        assert_eq!((v.action, v.error_code), (Action::Abort, "tool_loop_persisted"));
        assert_eq!(run.call(CALL.0, CALL.1).action, Action::Abort);
    }

    #[test]
    fn user_turn_resets_off_keeps_the_block() {
        let mut run = looping(Settings { user_turn_resets: false, ..small() });
        assert_eq!(run.call(CALL.0, CALL.1).action, Action::Block);
        assert_eq!(seen(&run.send(&Event::UserTurn)), ALLOW);
        assert_eq!(run.state.blocks, 1);
        assert_eq!(seen(&run.call(CALL.0, CALL.1)), (Action::Block, Detector::GenericRepeat, 5));
    }

    #[test]
    fn a_user_turn_keeps_the_side_effect_memory() {
        use crate::tool_rules::ToolClass;
        let mut run = Run::new(Settings { duplicate_side_effect: true, ..small() });
        let send = |run: &mut Run, seq| run.send(&Event::ToolCall { tool_name: "send_email", params_json: "{}", tool_call_id: "", seq, tool_class: ToolClass::Mutating });
        assert_eq!(send(&mut run, 1).action, Action::Allow);
        run.send(&Event::ToolOutcome { tool_name: "send_email", params_json: "{}", tool_call_id: "", result_json: Some(r#""sent""#), error: None, seq: 2 });
        run.send(&Event::UserTurn);
        assert!(run.state.rare().side_effects.is_some());
        let v = send(&mut run, 3);
        assert_eq!(v.detector, Detector::DuplicateSideEffect, "a duplicate send is still one after a new prompt");
    }

    #[test]
    fn shadow_mode_allows_and_says_what_it_would_have_done() {
        let mut run = looping(Settings { shadow: true, ..small() });
        let v = run.call(CALL.0, CALL.1);
        assert_eq!((v.action, v.shadow_action, v.detector), (Action::Allow, Some(Action::Block), Detector::GenericRepeat));
        assert!(v.announce);
        assert_eq!(run.state.history().len(), 6, "the shadowed call is recorded as if it ran");
    }

    #[test]
    fn warnings_are_announced_once_per_decade_of_their_count() {
        let mut run = Run::new(small());
        let announced: Vec<(u32, bool)> = (0..11)
            .map(|_| run.call(CALL.0, CALL.1))
            .filter(|v| v.action == Action::Warn)
            .map(|v| (v.count, v.announce))
            .collect();
        assert_eq!(announced, [(3, true), (4, false), (5, false), (6, false), (7, false), (8, false), (9, false), (10, true)]);
    }

    #[test]
    fn disabled_records_nothing() {
        let mut run = Run::new(Settings { enabled: Some(false), ..small() });
        for _ in 0..6 {
            assert_eq!(seen(&run.round(CALL.0, CALL.1, r#""same""#)), ALLOW);
        }
        assert!(run.state.history().is_empty());
    }

    #[test]
    fn undecodable_json_is_rejected_and_changes_nothing() {
        let mut run = Run::new(small());
        let v = run.call(CALL.0, "{not json");
        assert_eq!((v.action, v.error_code), (Action::Reject, "invalid_params_json"));
        let v = run.result(CALL.0, CALL.1, "[1,");
        assert_eq!((v.action, v.error_code), (Action::Reject, "invalid_result_json"));
        let deep = format!("{}{}", "[".repeat(100), "]".repeat(100));
        let v = run.call(CALL.0, &deep);
        assert_eq!((v.action, v.error_code), (Action::Reject, "json_too_deep"));
        assert!(run.state.history().is_empty());
        // Blank params are {}: the same call as "{}".
        run.call(CALL.0, "  ");
        assert_eq!(run.state.history().len(), 1);
    }

    #[test]
    fn an_outcome_completes_the_newest_pending_call_of_its_id() {
        let mut run = Run::new(small());
        for id in ["c1", "c2"] {
            run.send(&crate::engine::Event::ToolCall { tool_name: CALL.0, params_json: CALL.1, tool_call_id: id, seq: 1, tool_class: Default::default() });
        }
        run.send(&crate::engine::Event::ToolOutcome {
            tool_name: CALL.0, params_json: CALL.1, tool_call_id: "c1", result_json: Some(r#""ok""#), error: None, seq: 2,
        });
        let pending: Vec<Option<&str>> = run.state.history().iter().map(|r| r.call_id()).collect();
        assert_eq!(pending, [None, Some("c2")], "c1 completed (its id dropped), c2 still pending");
        assert_eq!(run.state.history().len(), 2);
    }

    mod tool_rules {
        use std::sync::Arc;

        use crate::engine::testing::{seen, small, Run, ALLOW};
        use crate::engine::{Action, Detector, Settings};
        use crate::tool_rules::{parse_path, ArgsProjection, ToolClass, ToolRule, ToolRules};

        fn with(rule: ToolRule) -> Settings {
            Settings { tool_rules: Arc::new(ToolRules::new(vec![rule])), ..small() }
        }

        fn paths(texts: &[&str]) -> Vec<Vec<crate::tool_rules::Step>> {
            texts.iter().map(|t| parse_path(t).unwrap()).collect()
        }

        /// Calls that differ only in an ignored path are one call to every detector.
        #[test]
        fn ignored_args_make_a_nonce_loop_a_repeat() {
            let rule = ToolRule { pattern: "fetch".into(), args: ArgsProjection::Ignore(paths(&["$.nonce"])), ..Default::default() };
            let mut run = Run::new(with(rule));
            let verdicts: Vec<_> = (0..6)
                .map(|i| run.round("fetch", &format!(r#"{{"url": "x", "nonce": "n{i}"}}"#), r#""same""#))
                .map(|v| seen(&v))
                .collect();
            assert_eq!(verdicts[..3], [ALLOW; 3]);
            assert_eq!(verdicts[3], (Action::Warn, Detector::GenericRepeat, 3));
            assert_eq!(verdicts[5], (Action::Block, Detector::GenericRepeat, 5));
            // Without the rule the same calls are all different.
            let mut run = Run::new(small());
            for i in 0..6 {
                assert_eq!(seen(&run.round("fetch", &format!(r#"{{"url": "x", "nonce": "n{i}"}}"#), r#""same""#)), ALLOW);
            }
        }

        #[test]
        fn kept_args_are_the_only_ones_hashed_and_a_glob_rule_applies() {
            let rule = ToolRule { pattern: "search_*".into(), args: ArgsProjection::Keep(paths(&["$.query"])), ..Default::default() };
            let mut run = Run::new(with(rule));
            for i in 0..3 {
                run.round("search_web", &format!(r#"{{"query": "q", "page_token": {i}, "trace": [{i}]}}"#), r#""same""#);
            }
            assert_eq!(seen(&run.call("search_web", r#"{"query": "q", "page_token": 9}"#)), (Action::Warn, Detector::GenericRepeat, 3));
            assert_eq!(seen(&run.call("search_web", r#"{"query": "other"}"#)), ALLOW);
        }

        /// A volatile field of the result no longer makes each outcome new.
        #[test]
        fn ignored_result_paths_make_outcomes_identical() {
            let rule = ToolRule { pattern: "status".into(), ignore_result: paths(&["$.details.requestId", "$.content[*].ts"]), ..Default::default() };
            let result = |i: u32| format!(r#"{{"content": [{{"type": "text", "text": "up", "ts": {i}}}], "details": {{"requestId": "r{i}", "state": "up"}}}}"#);
            let mut run = Run::new(with(rule));
            for i in 0..5 {
                run.round("status", "{}", &result(i));
            }
            assert_eq!(seen(&run.call("status", "{}")), (Action::Block, Detector::GenericRepeat, 5));
            let mut run = Run::new(small());
            for i in 0..5 {
                run.round("status", "{}", &result(i));
            }
            assert_eq!(seen(&run.call("status", "{}")), (Action::Warn, Detector::GenericRepeat, 5), "each outcome differs");
        }

        /// `class: poll` makes a tool a known poll, as extraPollTools does.
        #[test]
        fn a_poll_class_is_judged_as_a_known_poll() {
            let rule = ToolRule { pattern: "job_status".into(), class: ToolClass::Poll, ..Default::default() };
            let mut run = Run::new(with(rule));
            for _ in 0..3 {
                run.round("job_status", r#"{"id": 1}"#, r#""running""#);
            }
            assert_eq!(seen(&run.call("job_status", r#"{"id": 1}"#)).1, Detector::KnownPollNoProgress);
        }
    }
}
