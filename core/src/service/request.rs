//! The request path: bytes in, bytes out. Whole-request refusals decided on the raw bytes (an
//! undecodable request, too many events), the lazy-load check, routing, then per event a short
//! list of named stages (`Core::stages`, a method each, in this order, which is the contract):
//! `admit` (counted, the envelope limits, a run's end), `touch` (the run touched, a retry answered
//! from its window), `open_run` (its agent, its parent, created, its tree joined), `spend` (its
//! totals, a budget's stop), `judge` (the engine, a panic answered as REJECT internal_error),
//! `settle` (exemptions granted, budgets extended, the tree's bookkeeping), `record` (the
//! decision id, the run's recent decisions and retry window) and `account_event` (the summary).
//! A stage that answers the event itself breaks off the list with its decision.

use std::collections::VecDeque;
use std::ops::ControlFlow::{self, Break, Continue};

use prost::Message;

use super::retries::{content_digest_of, Retries};
use super::store::RECENT_DECISIONS;
use super::summary::{counter, LogLine, Summary, ERROR};
use super::views::evaluate_response;
use super::wire::{decode_in_place, kind_name, EventRef, Events, KindRef, OutcomeRef, UsageRef};
use super::{Core, Decision};
use crate::engine::ask::{Answer, AskIo, Grant};
use crate::engine::outputs::{Output, OutputKind};
use crate::engine::{evaluate_with, Action, Event, RunState, Verdict};
use crate::tables::error_codes;
use crate::json::py_isspace;
use crate::py_repr::py_repr;
use crate::pb;

/// Refusals of a whole request (the transport's decode.py), decided on raw bytes.
pub enum Refusal {
    Undecodable,
    TooManyEvents,
    /// Not a refusal: with a shared state store, the request names runs not in memory (their
    /// ids, each with its tree's root, which its stored key names) and nothing was evaluated;
    /// Python loads them and asks again (keeper.py).
    NotLoaded(Vec<(String, String)>),
}

const MAX_OTHER_FIELDS: usize = 64;

fn varint(data: &[u8], pos: &mut usize) -> Option<u64> {
    let mut result = 0u64;
    let mut shift = 0;
    loop {
        if *pos >= data.len() || shift > 63 {
            return None;
        }
        let byte = data[*pos];
        *pos += 1;
        result |= ((byte & 0x7F) as u64) << shift;
        if byte < 0x80 {
            return Some(result);
        }
        shift += 7;
    }
}

/// How many top-level field-1 messages `data` holds, counting at most limit + 1.
pub fn count_events(data: &[u8], limit: usize) -> Option<usize> {
    let (mut count, mut others, mut pos) = (0usize, 0usize, 0usize);
    while pos < data.len() {
        let tag = varint(data, &mut pos)?;
        let (field, wire) = (tag >> 3, tag & 7);
        match wire {
            2 => {
                let length = varint(data, &mut pos)? as usize;
                pos = pos.checked_add(length)?;
                if field == 1 {
                    count += 1;
                    if count > limit {
                        return Some(count);
                    }
                    continue;
                }
            }
            0 => {
                varint(data, &mut pos)?;
            }
            1 => pos += 8,
            5 => pos += 4,
            _ => return None,
        }
        others += 1;
        if others > MAX_OTHER_FIELDS {
            return None;
        }
    }
    if pos != data.len() {
        return None;
    }
    Some(count)
}

fn too_long(what: &str, chars: usize, limit: usize) -> String {
    format!("{what} is {chars} characters; the limit is {limit}")
}

/// Who sent a request, as its credential says: anyone (no token, a user-side token), or the
/// agent's side only (a token the token file limits to agent-side events).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Side {
    #[default]
    Any,
    Agent,
}

/// Events only the person's side may send: a user turn lifts blocks and starts streaks anew, an
/// approval answers an ask. The agent a loop guard restrains must not send them for itself.
fn speaks_for_the_person(event: &EventRef) -> bool {
    matches!(event.kind, Some(KindRef::UserTurn { .. }) | Some(KindRef::Approval { .. }))
}

/// A model output's own refusals: no text nor digest, either over the limit, a usage whose cost
/// is no amount of dollars.
fn output_error(text: &str, text_digest: &str, usage: Option<&UsageRef>, limit: usize) -> Option<Verdict> {
    if text.is_empty() && text_digest.is_empty() {
        return Some(Verdict::reject(
            error_codes::MISSING_OUTPUT_TEXT,
            "model_output carries neither text nor text_digest: send what the model said, or your own digest of it".into(),
        ));
    }
    for (name, value) in [("text", text), ("text_digest", text_digest)] {
        if value.len() > limit {
            return Some(Verdict::reject(error_codes::OUTPUT_TEXT_TOO_LARGE, format!("model_output.{name} is {} bytes; the limit is {limit}", value.len())));
        }
    }
    usage.and_then(|u| invalid_cost("model_output.usage.cost_usd", u.cost_usd))
}

/// A usage's cost that is no amount of dollars (a Usage event's, a model output's usage).
fn invalid_cost(field: &str, cost_usd: f64) -> Option<Verdict> {
    (!cost_usd.is_finite() || cost_usd < 0.0).then(|| {
        Verdict::reject(error_codes::INVALID_USAGE, format!("{field} is {cost_usd}; it must be a finite number of dollars, 0 or more"))
    })
}

impl Core {
    /// `routed`: the stream's x-loopwarden-run-id ("" = none): events of other runs are refused.
    /// `lazy`: a shared state store holds runs this replica may not: runs the request names
    /// that are not in memory are returned (Refusal::NotLoaded) before anything is evaluated.
    pub fn evaluate_request(&mut self, data: &[u8], tenant: &str, routed: &str, now: f64, summary: &mut Summary, lazy: bool) -> Result<Vec<u8>, Refusal> {
        let events = self.decode_request(data)?;
        let events = events.refs();
        if lazy {
            self.not_loaded(&events, tenant, routed, now, summary)?;
        }
        Ok(evaluate_response(&self.evaluate_refs(&events, tenant, routed, now, summary)))
    }

    fn count_refusal(&self, data: &[u8]) -> Result<(), Refusal> {
        match count_events(data, self.limits.max_events_per_request) {
            None => Err(Refusal::Undecodable),
            Some(n) if n > self.limits.max_events_per_request => Err(Refusal::TooManyEvents),
            _ => Ok(()),
        }
    }

    /// An EvaluateRequest's events, refused whole when it is undecodable or carries more events
    /// than the limit (counted on the raw bytes first, so a huge request is never parsed).
    pub fn decode_evaluate(&self, data: &[u8]) -> Result<Vec<pb::Event>, Refusal> {
        self.count_refusal(data)?;
        Ok(pb::EvaluateRequest::decode(data).map_err(|_| Refusal::Undecodable)?.events)
    }

    /// `decode_evaluate`, with the events read in place when the request is in the plain form
    /// (wire.rs), so no string is copied out of it.
    pub fn decode_request<'d>(&self, data: &'d [u8]) -> Result<Events<'d>, Refusal> {
        self.count_refusal(data)?;
        match decode_in_place(data) {
            Some(events) => Ok(Events::InPlace(events)),
            None => Ok(Events::Owned(pb::EvaluateRequest::decode(data).map_err(|_| Refusal::Undecodable)?.events)),
        }
    }

    /// The runs `events` name that are not in memory (a shared state store loads them first),
    /// or whose owner lease lapsed by `now` (another replica may have taken them meanwhile: their
    /// stored copy is read again before memory's answers).
    pub fn missing_runs(&self, events: &[EventRef], tenant: &str, routed: &str, now: f64, summary: &mut Summary) -> Vec<(String, String)> {
        match self.not_loaded(events, tenant, routed, now, summary) {
            Err(Refusal::NotLoaded(ids)) => ids,
            _ => Vec::new(),
        }
    }

    /// Decoded events, each evaluated and timed in order (one request's worth).
    pub fn evaluate_events(&mut self, events: &[pb::Event], tenant: &str, routed: &str, now: f64, summary: &mut Summary) -> Vec<Decision> {
        self.evaluate_refs(&events.iter().map(EventRef::from).collect::<Vec<_>>(), tenant, routed, now, summary)
    }

    /// `evaluate_events` of events however they were read.
    pub fn evaluate_refs(&mut self, events: &[EventRef], tenant: &str, routed: &str, now: f64, summary: &mut Summary) -> Vec<Decision> {
        self.evaluate_refs_from(Side::Any, events, tenant, routed, now, summary)
    }

    /// `evaluate_refs` for a caller of `side`: an agent-side caller's events that speak for the
    /// person are REJECTed `user_side_only`, nothing recorded; its other events as anyone's.
    pub fn evaluate_refs_from(&mut self, side: Side, events: &[EventRef], tenant: &str, routed: &str, now: f64,
                              summary: &mut Summary) -> Vec<Decision> {
        summary.latency_buckets = vec![0; self.latency_bounds.len() + 1];
        self.requests += 1;
        events.iter().map(|event| {
            if side == Side::Agent && speaks_for_the_person(event) {
                self.refused_agent_side(event, summary)
            } else {
                self.evaluate_timed(event, tenant, routed, now, summary)
            }
        }).collect()
    }

    /// REJECT `user_side_only`: a user turn or an approval from an agent-side caller.
    fn refused_agent_side(&self, event: &EventRef, summary: &mut Summary) -> Decision {
        let kind = kind_name(&event.kind);
        summary.count(counter::EVENTS, [kind, ""], "");
        let run_id = event.run_id.trim_matches(py_isspace);
        let message = format!(
            "a {kind} speaks for the person (it lifts blocks or answers an ask), and this caller's token is limited to agent-side events: send it with a user-side credential (the host's hook path, the operator's token)"
        );
        self.rejected(event, run_id, Verdict::reject(error_codes::USER_SIDE_ONLY, message), summary)
    }

    /// keeper.py's `missing`: the request's runs (trimmed, run_end and misrouted events aside)
    /// not held in memory, each once with its tree's root: the run, and for a new child its
    /// parent and its root; the held ones are counted in the summary.
    fn not_loaded(&self, events: &[EventRef], tenant: &str, routed: &str, now: f64, summary: &mut Summary) -> Result<(), Refusal> {
        let mut missing: Vec<(String, String)> = Vec::new();
        let mut need = |id: &str, root: &str| {
            // A run whose load failed is asked for again (merged before it is evaluated), and so
            // is one whose lease lapsed (re-read: another replica may have written it since).
            let absent = !self.store.current(tenant, id, now);
            if !id.is_empty() && absent && !missing.iter().any(|(m, _)| m == id) {
                missing.push((id.to_string(), root.to_string()));
            }
        };
        for event in events {
            if let Some(KindRef::RunEnd) = event.kind {
                continue;
            }
            let run_id = event.run_id.trim_matches(py_isspace);
            let parent = event.parent_run_id.trim_matches(py_isspace);
            let root = self.tree_root(tenant, run_id, parent, routed);
            if !routed.is_empty() && root != routed {
                // A later event of a child (no parent named) held only in the store: it is keyed
                // under the header's root, so it is looked for there (not found: a new run, refused).
                if parent.is_empty() && !run_id.is_empty() && self.store.get(tenant, run_id).is_none() {
                    need(run_id, routed);
                    need(routed, routed);
                }
                continue;
            }
            if self.store.current(tenant, run_id, now) {
                summary.held_runs += 1;
                continue;
            }
            need(run_id, &root);
            if !parent.is_empty() && parent != run_id {
                need(parent, &root);
                need(&root, &root);
            }
        }
        if missing.is_empty() { Ok(()) } else { Err(Refusal::NotLoaded(missing)) }
    }

    pub(super) fn evaluate_timed(&mut self, event: &EventRef, tenant: &str, routed: &str, now: f64, summary: &mut Summary) -> Decision {
        let started = std::time::Instant::now();
        let run_id = event.run_id.trim_matches(py_isspace);
        // Routed: the header names the run's tree root (a root run: the run itself).
        // A run_end of a run not held here is taken as one of the header's tree (it frees nothing
        // here; with a shared store it deletes the run's key under that root).
        let ends_unheld = matches!(event.kind, Some(KindRef::RunEnd)) && self.store.get(tenant, run_id).is_none();
        let misrouted = !routed.is_empty() && run_id != routed && !ends_unheld
            && self.tree_root(tenant, run_id, event.parent_run_id.trim_matches(py_isspace), routed) != routed;
        let decision = if misrouted {
            self.misrouted(event, routed, summary)
        } else {
            self.evaluate_ref(event, tenant, routed, now, summary)
        };
        let seconds = started.elapsed().as_secs_f64();
        let bucket = self.latency_bounds.iter().position(|b| seconds <= *b).unwrap_or(self.latency_bounds.len());
        if let Some(slot) = summary.latency_buckets.get_mut(bucket) {
            *slot += 1;
        }
        summary.latency_sum += seconds;
        decision
    }

    fn envelope_error(&self, event: &EventRef, run_id: &str) -> Option<Verdict> {
        let l = &self.limits;
        if run_id.is_empty() {
            return Some(Verdict::reject(error_codes::MISSING_RUN_ID, "run_id is required (a non-blank string)".into()));
        }
        let n = run_id.chars().count();
        if n > l.max_run_id_chars {
            return Some(Verdict::reject(error_codes::RUN_ID_TOO_LONG, format!("run_id is {n} characters; the limit is {}", l.max_run_id_chars)));
        }
        let n = event.agent_id.chars().count();
        if n > l.max_agent_id_chars {
            return Some(Verdict::reject(error_codes::AGENT_ID_TOO_LONG, too_long("agent_id", n, l.max_agent_id_chars)));
        }
        let n = event.session_id.chars().count();
        if n > l.max_session_id_chars {
            return Some(Verdict::reject(error_codes::SESSION_ID_TOO_LONG, too_long("session_id", n, l.max_session_id_chars)));
        }
        let parent = event.parent_run_id.trim_matches(py_isspace);
        let n = parent.chars().count();
        if n > l.max_run_id_chars {
            return Some(Verdict::reject(error_codes::PARENT_RUN_ID_TOO_LONG, too_long("parent_run_id", n, l.max_run_id_chars)));
        }
        if parent == run_id {
            return Some(Verdict::reject(error_codes::INVALID_PARENT_RUN_ID, "parent_run_id names the run itself; a run cannot be its own parent".into()));
        }
        let (tool_name, call_id, params) = match &event.kind {
            None => {
                return Some(Verdict::reject(
                    error_codes::MISSING_EVENT_KIND,
                    "event has no kind: set one of tool_call, tool_outcome, compaction_retry, user_turn, usage, model_output, approval, run_end".into(),
                ));
            }
            Some(KindRef::Usage { cost_usd, .. }) => return invalid_cost("usage.cost_usd", *cost_usd),
            Some(KindRef::ModelOutput { text, text_digest, usage, .. }) => return output_error(text, text_digest, usage.as_ref(), l.max_output_text_bytes),
            Some(KindRef::ToolCall { tool_name, tool_call_id, params_json, .. }) => (tool_name, tool_call_id, params_json),
            Some(KindRef::ToolOutcome { tool_name, tool_call_id, params_json, .. }) => (tool_name, tool_call_id, params_json),
            _ => return None,
        };
        let n = tool_name.chars().count();
        if n > l.max_tool_name_chars {
            return Some(Verdict::reject(error_codes::TOOL_NAME_TOO_LONG, too_long("tool_name", n, l.max_tool_name_chars)));
        }
        let n = call_id.chars().count();
        if n > l.max_tool_call_id_chars {
            return Some(Verdict::reject(error_codes::TOOL_CALL_ID_TOO_LONG, too_long("tool_call_id", n, l.max_tool_call_id_chars)));
        }
        if params.len() > l.max_params_bytes {
            return Some(Verdict::reject(error_codes::PARAMS_TOO_LARGE, format!("params_json is {} bytes; the limit is {}", params.len(), l.max_params_bytes)));
        }
        if let Some(KindRef::ToolOutcome { outcome, .. }) = event.kind {
            let (name, text) = match outcome {
                Some(OutcomeRef::ResultJson(r)) => ("result_json", r),
                Some(OutcomeRef::Error(e)) => ("error", e),
                None => return None,
            };
            if text.len() > l.max_result_bytes {
                return Some(Verdict::reject(error_codes::RESULT_TOO_LARGE, format!("{name} is {} bytes; the limit is {}", text.len(), l.max_result_bytes)));
            }
        }
        None
    }

    /// REJECT `run_id_mismatch` (service.py's refuse_misrouted).
    fn misrouted(&self, event: &EventRef, routed: &str, summary: &mut Summary) -> Decision {
        summary.count(counter::EVENTS, [kind_name(&event.kind), ""], "");
        let run_id = event.run_id.trim_matches(py_isspace);
        let head = |s: &str| py_repr(&s.chars().take(80).collect::<String>());
        let message = format!(
            "run_id {} differs from this stream's x-loopwarden-run-id {} and is not in its run tree; the header must name the run's tree root (the run itself for a run without a parent): open one Evaluate stream per run tree (the header routes the stream to the tree's replica)",
            head(run_id), head(routed)
        );
        self.rejected(event, run_id, Verdict::reject(error_codes::RUN_ID_MISMATCH, message), summary)
    }

    fn rejected(&self, event: &EventRef, run_id: &str, verdict: Verdict, summary: &mut Summary) -> Decision {
        summary.count(counter::REJECTED, [verdict.error_code, ""], "");
        let agent = self.config.agent_label(event.agent_id).to_string();
        summary.count(counter::VERDICTS, ["reject", "none"], &agent);
        Decision { seq: event.seq, run_id: run_id.to_string(), verdict, decision_id: String::new() }
    }

    pub fn evaluate_event(&mut self, event: &pb::Event, tenant: &str, now: f64, summary: &mut Summary) -> Decision {
        self.requests += 1;
        self.evaluate_ref(&EventRef::from(event), tenant, "", now, summary)
    }

    /// One event through the request path: the stages below, in this order (the order is the
    /// contract). A stage that answers the event itself (a REJECT, a run's end, a retry, a
    /// budget's stop already decided, a panic) ends it there with its decision.
    fn evaluate_ref(&mut self, event: &EventRef, tenant: &str, routed: &str, now: f64, summary: &mut Summary) -> Decision {
        match self.stages(event, tenant, routed, now, summary) {
            Continue(decision) | Break(decision) => decision,
        }
    }

    fn stages(&mut self, event: &EventRef, tenant: &str, routed: &str, now: f64, summary: &mut Summary) -> ControlFlow<Decision, Decision> {
        let incoming = self.admit(event, tenant, routed, summary)?;
        let touched = self.touch(&incoming, tenant, now, summary)?;
        let mut run = self.open_run(&incoming, tenant, routed, touched.held, now, summary)?;
        let stop = self.spend(&incoming, tenant, &mut run, now, summary);
        let judged = self.judge(&incoming, tenant, &run, stop, now, summary)?;
        let verdict = self.settle(&incoming, tenant, &mut run, judged.verdict, judged.granted, judged.extended, now);
        let decision = self.record(&incoming, tenant, &mut run, verdict, touched.digest);
        self.account_event(&incoming, tenant, &run, &decision, judged.answer, judged.timed_out, summary);
        Continue(decision)
    }

    /// Admitted: the event counted, within the envelope limits (else REJECT with its code); a
    /// run_end ends its run here (ALLOW).
    fn admit<'e, 'a>(&mut self, event: &'e EventRef<'a>, tenant: &str, routed: &str, summary: &mut Summary) -> ControlFlow<Decision, Incoming<'e, 'a>> {
        let kind = kind_name(&event.kind);
        summary.count(counter::EVENTS, [kind, ""], "");
        let run_id = event.run_id.trim_matches(py_isspace);
        if let Some(invalid) = self.envelope_error(event, run_id) {
            return Break(self.rejected(event, run_id, invalid, summary));
        }
        let parent = event.parent_run_id.trim_matches(py_isspace);
        if let Some(KindRef::RunEnd) = event.kind {
            let held = self.store.get(tenant, run_id).is_some();
            let root = if !held && !routed.is_empty() { routed.to_string() } else { self.tree_root(tenant, run_id, parent, routed) };
            self.end_run(tenant, run_id, &root);
            let agent = self.config.agent_label(event.agent_id).to_string();
            summary.count(counter::VERDICTS, ["allow", "none"], &agent);
            return Break(Decision { seq: event.seq, run_id: run_id.to_string(), verdict: Verdict::allow(""), decision_id: String::new() });
        }
        Continue(Incoming { event, run_id, parent, kind })
    }

    /// The run touched in the store (LRU, idle clock); an approval for a run not held is
    /// REJECTed no_pending_ask (no run made); a resent event is answered from the run's retry
    /// window with its first verdict, nothing evaluated again.
    fn touch(&mut self, incoming: &Incoming, tenant: &str, now: f64, summary: &mut Summary) -> ControlFlow<Decision, Touched> {
        let Incoming { event, run_id, .. } = *incoming;
        let held = self.store.touch(tenant, run_id, now, &mut summary.evictions);
        if let (false, Some(KindRef::Approval { tool_call_id, decision_id, .. })) = (held, event.kind) {
            // An answer for a run this daemon does not hold: nothing to answer, and no run made.
            let message = crate::engine::ask::no_pending_ask_message(tool_call_id, decision_id);
            return Break(self.rejected(event, run_id, Verdict::reject(error_codes::NO_PENDING_ASK, message), summary));
        }
        let mut digest: Option<[u8; 8]> = None;
        if held && event.seq != 0 {
            let entry = self.store.get(tenant, run_id).expect("held");
            if let Some(retries) = &entry.retries {
                let d = content_digest_of(&event.kind);
                digest = Some(d);
                if let Some(slot) = retries.find(event.seq, &d) {
                    summary.count(counter::RETRIED, ["", ""], "");
                    if let Some(kept) = retries.decision(slot) {
                        return Break(Decision { seq: event.seq, run_id: run_id.to_string(), verdict: kept.verdict.clone(), decision_id: kept.decision_id.clone() });
                    }
                    let tool = match event.kind {
                        Some(KindRef::ToolCall { tool_name, .. } | KindRef::ToolOutcome { tool_name, .. }) => {
                            let normalised = crate::toolnames::normalize_tool_name(tool_name);
                            crate::engine::spelling_of(tool_name, &normalised).to_string()
                        }
                        _ => String::new(),
                    };
                    return Break(Decision { seq: event.seq, run_id: run_id.to_string(), verdict: Verdict::allow(&tool), decision_id: String::new() });
                }
            }
        }
        Continue(Touched { held, digest })
    }

    /// The run the event is evaluated in: its agent (the event's, else the run's), its parent
    /// checked (else REJECT), created when new (its parent first, then its place in the tree; a
    /// tree bound it passes aborts it, or in shadow mode is kept to report).
    fn open_run(&mut self, incoming: &Incoming, tenant: &str, routed: &str, held: bool, now: f64, summary: &mut Summary) -> ControlFlow<Decision, Opened> {
        let Incoming { event, run_id, parent, .. } = *incoming;
        let event_agent = event.agent_id.trim_matches(py_isspace);
        let agent_id = if !event_agent.is_empty() {
            event_agent.to_string()
        } else if held {
            self.store.get(tenant, run_id).map(|e| e.agent_id.to_string()).unwrap_or_default()
        } else {
            String::new()
        };
        if let Some(invalid) = self.parent_error(tenant, run_id, parent) {
            return Break(self.rejected(event, run_id, invalid, summary));
        }
        let created = !held;
        if created && !parent.is_empty() {
            self.ensure_parent(tenant, run_id, parent, routed, now, summary);
        }
        if created {
            let capacity = self.config.settings_for(&agent_id).history_size;
            self.store.create(tenant, run_id, RunState::new(capacity), now, &mut summary.evictions);
        }
        let tree_abort = if created && !parent.is_empty() { self.join_tree(tenant, run_id, parent, now) } else { None };
        let (was_aborted, blocks_before) = {
            let entry = self.store.get(tenant, run_id).expect("created");
            (entry.state.rare().abort.is_some(), entry.state.blocks)
        };
        // A run past a tree bound is aborted; in shadow mode its verdict only reports the abort.
        let shadow_abort = match tree_abort {
            Some(abort) if !self.config.settings_for(&agent_id).shadow => {
                self.store.get_mut(tenant, run_id).expect("created").state.rare_mut().abort = Some(Box::new(abort));
                None
            }
            shadowed => shadowed,
        };
        Continue(Opened { agent_id, created, shadow_abort, was_aborted, blocks_before, tree_root: String::new() })
    }

    /// What the event spends, counted into its run's and tree's totals; a budget already past
    /// its cap is the verdict (the engine is not asked). A plain run (no tree, no budget, nothing
    /// budgets count) keeps no totals but the count of its calls (service/budgets.rs).
    fn spend(&mut self, incoming: &Incoming, tenant: &str, run: &mut Opened, now: f64, summary: &mut Summary) -> Option<Verdict> {
        let Incoming { event, run_id, .. } = *incoming;
        run.tree_root = self.keep_totals(event, tenant, run_id, &run.agent_id, now, &mut summary.evictions);
        if run.plain() {
            return None;
        }
        self.budget_stop(event, tenant, run_id, &run.tree_root, &run.agent_id, now)
    }

    /// The engine's verdict on the event in its run (or `stop`, a budget's), with what the ask
    /// rules hand back; a panic in the engine is answered REJECT internal_error, the run as it
    /// was (a run the event created is dropped).
    fn judge(&mut self, incoming: &Incoming, tenant: &str, run: &Opened, stop: Option<Verdict>, now: f64, summary: &mut Summary) -> ControlFlow<Decision, Judged> {
        let Incoming { event, run_id, kind, .. } = *incoming;
        let config = &self.config;
        let settings = config.settings_for(&run.agent_id);
        let max_depth = self.limits.max_json_depth;
        let state = &mut self.store.get_mut(tenant, run_id).expect("created").state;
        if let Some(KindRef::ToolCall { .. }) = event.kind {
            state.incoming_carried = event.carried();
            // The call's batch: its batch id, else its request (engine::batches).
            state.incoming_batch = if event.batch_id().is_empty() {
                crate::engine::batches::request_key(self.requests)
            } else {
                crate::engine::batches::batch_id_key(event.batch_id())
            };
        }
        #[cfg(feature = "testing")]
        let panic_tool = self.panic_tool.as_deref();
        let mut io = AskIo { accepts_ask: event.accepts_ask, now, exemptions: self.exemptions.of_tenant(tenant), agent_id: &run.agent_id, ..Default::default() };
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            #[cfg(feature = "testing")]
            if let (Some(tool), Some(KindRef::ToolCall { tool_name, .. })) = (panic_tool, event.kind) {
                assert!(tool_name != tool, "planted panic for a test");
            }
            if let Some(stop) = stop {
                return stop;
            }
            evaluate_with(state, &engine_event(event), settings, &config.catalog, max_depth, &mut io)
        }));
        match outcome {
            Ok(verdict) => Continue(Judged { verdict, granted: io.granted.take(), answer: io.answer, timed_out: io.timed_out, extended: io.extended.take() }),
            Err(_) => Break(self.internal_error(event, tenant, run_id, run.created, kind, summary)),
        }
    }

    /// What the verdict changes beyond the run: an "always" approval becomes a standing
    /// exemption, an approved budget ask extends the budget, a tree bound in shadow mode is
    /// reported on an ALLOW, and a run in a tree has its tree's bookkeeping after the verdict.
    #[allow(clippy::too_many_arguments)]
    fn settle(&mut self, incoming: &Incoming, tenant: &str, run: &mut Opened, mut verdict: Verdict, granted: Option<Grant>,
              extended: Option<Box<str>>, now: f64) -> Verdict {
        let Incoming { event, run_id, .. } = *incoming;
        let shadow_abort = run.shadow_abort.take();
        let root = run.root(run_id);
        if let Some(grant) = granted {
            self.exemptions.grant(tenant, &run.agent_id, run_id, grant, now);
        }
        if let Some(key) = extended {
            self.extend_budget(tenant, run_id, root, &key);
        }
        if verdict.action != Action::Reject {
            if let Some(abort) = shadow_abort {
                if verdict.action == Action::Allow && verdict.shadow_action.is_none() {
                    verdict = abort.shadowed();
                }
            }
            if !run.plain() {
                self.after_verdict(event, tenant, run_id, root, &run.agent_id, now, &mut verdict, run.blocks_before, run.was_aborted);
            }
        }
        verdict
    }

    /// The decision recorded in the run: its agent and session noted, an evaluated event
    /// counted, a decision id given to anything but a plain ALLOW (kept among the run's recent
    /// decisions, stamped on an ASK), and the event's verdict remembered in the retry window.
    fn record(&mut self, incoming: &Incoming, tenant: &str, run: &mut Opened, verdict: Verdict, digest: Option<[u8; 8]>) -> Decision {
        let Incoming { event, run_id, .. } = *incoming;
        let entry = self.store.get_mut(tenant, run_id).expect("held");
        if entry.tree.is_none() && verdict.action != Action::Reject && matches!(event.kind, Some(KindRef::ToolCall { .. })) {
            // Counted without a link, so a run that later becomes a parent brings its calls.
            entry.unlinked_calls = entry.unlinked_calls.saturating_add(1);
        }
        if *entry.agent_id != *run.agent_id {
            entry.agent_id = std::mem::take(&mut run.agent_id).into();
        }
        if !event.session_id.is_empty() && *entry.session_id != *event.session_id {
            entry.session_id = event.session_id.into();
        }
        if verdict.action == Action::Reject {
            return Decision { seq: event.seq, run_id: run_id.to_string(), verdict, decision_id: String::new() };
        }
        entry.events_evaluated += 1;
        let needs_id = !(verdict.action == Action::Allow && verdict.shadow_action.is_none());
        let decision_id = if needs_id {
            self.decisions += 1;
            format!("{}-{:x}", self.instance_id, self.decisions)
        } else {
            String::new()
        };
        let decision = Decision { seq: event.seq, run_id: run_id.to_string(), verdict, decision_id };
        if decision.verdict.action == Action::Ask {
            crate::engine::ask::stamp_decision_id(&mut entry.state, &decision.decision_id);
        }
        if !decision.decision_id.is_empty() {
            let recent = entry.recent.get_or_insert_with(|| Box::new(VecDeque::with_capacity(RECENT_DECISIONS)));
            if recent.len() >= RECENT_DECISIONS {
                recent.pop_front();
            }
            recent.push_back(decision.clone());
        }
        if event.seq != 0 {
            let v = &decision.verdict;
            let plain = v.action == Action::Allow && v.message.is_empty() && v.shadow_action.is_none();
            let d = digest.unwrap_or_else(|| content_digest_of(&event.kind));
            entry.retries.get_or_insert_with(|| Box::new(Retries::for_history(entry.state.capacity))).remember(event.seq, d, if plain { None } else { Some(decision.clone()) });
        }
        decision
    }

    /// The decision in the summary: approvals answered or timed out, then its counters and log
    /// line (summary.rs `account`).
    #[allow(clippy::too_many_arguments)]
    fn account_event(&self, incoming: &Incoming, tenant: &str, run: &Opened, decision: &Decision, answer: Option<Answer>,
                     timed_out: u32, summary: &mut Summary) {
        let Incoming { event, run_id, kind, .. } = *incoming;
        let entry = self.store.get(tenant, run_id).expect("held");
        let agent_label = self.config.agent_label(&entry.agent_id);
        for (answered, times) in [(answer.map(Answer::name), 1), (Some("timed_out"), timed_out)] {
            for _ in 0..times {
                if let Some(name) = answered {
                    summary.count(counter::APPROVALS, [name, ""], agent_label);
                }
            }
        }
        let who = (&*entry.tenant, &*entry.agent_id, &*entry.session_id);
        Core::account(self.debug_logs, event, decision, agent_label, run.was_aborted, kind, who, summary);
    }

    fn internal_error(&mut self, event: &EventRef, tenant: &str, run_id: &str, created: bool, kind: &'static str, summary: &mut Summary) -> Decision {
        if created {
            self.store.remove(tenant, run_id);
        }
        let decision_id = self.next_decision_id();
        let verdict = Verdict::reject(
            error_codes::INTERNAL_ERROR,
            format!("loopwarden could not evaluate this event (decision {decision_id}); it changed nothing. The daemon log has the details under that id."),
        );
        summary.logs.push(LogLine {
            level: ERROR,
            message: "internal error evaluating an event; answered REJECT internal_error".into(),
            decision_id: decision_id.clone(),
            tenant: tenant.to_string(),
            run_id: run_id.to_string(),
            agent_id: String::new(),
            session_id: String::new(),
            seq: event.seq,
            verdict: verdict.clone(),
            kind,
        });
        let mut decision = self.rejected(event, run_id, verdict, summary);
        decision.decision_id = decision_id;
        decision
    }
}

/// An event admitted to the request path: its run id and parent as the path reads them
/// (trimmed), its kind's name.
#[derive(Clone, Copy)]
struct Incoming<'e, 'a> {
    event: &'e EventRef<'a>,
    run_id: &'a str,
    parent: &'a str,
    kind: &'static str,
}

/// What `touch` found: whether the run was held before the event, and the event's content
/// digest when the retry window already took it.
struct Touched {
    held: bool,
    digest: Option<[u8; 8]>,
}

/// The run an event is evaluated in, as `open_run` and `spend` leave it.
struct Opened {
    agent_id: String,
    created: bool,
    /// A tree bound the run passed in shadow mode: reported on its verdict, not enforced.
    shadow_abort: Option<Verdict>,
    was_aborted: bool,
    blocks_before: u32,
    /// The run's tree root; "" for a plain run (no tree, no budget bookkeeping).
    tree_root: String,
}

impl Opened {
    fn plain(&self) -> bool {
        self.tree_root.is_empty()
    }

    fn root<'s>(&'s self, run_id: &'s str) -> &'s str {
        if self.plain() { run_id } else { &self.tree_root }
    }
}

/// The engine's verdict and what the ask rules handed back with it.
struct Judged {
    verdict: Verdict,
    granted: Option<Grant>,
    answer: Option<Answer>,
    timed_out: u32,
    extended: Option<Box<str>>,
}

/// The engine's event for an event read off the wire.
fn engine_event<'a>(event: &EventRef<'a>) -> Event<'a> {
    match event.kind {
        Some(KindRef::ToolCall { tool_name, tool_call_id, params_json, tool_class, .. }) => {
            let tool_class = tool_class_of(tool_class);
            Event::ToolCall { tool_name, params_json, tool_call_id, seq: event.seq, tool_class }
        }
        Some(KindRef::ToolOutcome { tool_name, tool_call_id, params_json, outcome, .. }) => Event::ToolOutcome {
            tool_name,
            params_json,
            tool_call_id,
            result_json: match outcome {
                Some(OutcomeRef::ResultJson(r)) => Some(r),
                _ => None,
            },
            error: match outcome {
                Some(OutcomeRef::Error(e)) => Some(e),
                _ => None,
            },
            seq: event.seq,
        },
        Some(KindRef::CompactionRetry) => Event::CompactionRetry { seq: event.seq },
        Some(KindRef::UserTurn { .. }) => Event::UserTurn,
        Some(KindRef::Approval { tool_call_id, decision_id, approved, scope, ttl_seconds, .. }) => {
            let always = scope == pb::ApprovalScope::Always as i32;
            Event::Approval(crate::engine::ask::Approval { tool_call_id, decision_id, approved, always, ttl_seconds })
        }
        Some(KindRef::ModelOutput { text, text_digest, output_kind, stop_hook_active, .. }) => Event::ModelOutput(Output {
            text,
            text_digest,
            kind: OutputKind::from_wire(output_kind),
            stop_hook_active,
            seq: event.seq,
        }),
        // Usage is spent by the service (budgets.rs); the engine has nothing to judge in it.
        Some(KindRef::Usage { .. }) | Some(KindRef::RunEnd) | None => Event::RunEnd,
    }
}


/// ToolCall.tool_class's wire value as the engine's class (an unknown value: unspecified).
fn tool_class_of(wire: i32) -> crate::tool_rules::ToolClass {
    use crate::tool_rules::ToolClass;
    match pb::ToolClass::try_from(wire) {
        Ok(pb::ToolClass::ReadOnly) => ToolClass::ReadOnly,
        Ok(pb::ToolClass::Mutating) => ToolClass::Mutating,
        Ok(pb::ToolClass::Poll) => ToolClass::Poll,
        _ => ToolClass::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::{Config, Limits};

    fn event(run_id: &str, tool: &str) -> pb::Event {
        pb::Event {
            run_id: run_id.into(),
            seq: 1,
            kind: Some(pb::event::Kind::ToolCall(pb::ToolCall { tool_name: tool.into(), params_json: "{}".into(), ..Default::default() })),
            ..Default::default()
        }
    }

    fn request(events: usize) -> Vec<u8> {
        pb::EvaluateRequest { events: (0..events).map(|_| event("r", "t")).collect() }.encode_to_vec()
    }

    #[test]
    fn count_events_counts_up_to_one_past_the_limit() {
        assert_eq!(count_events(&request(3), 10), Some(3));
        assert_eq!(count_events(&request(0), 10), Some(0));
        assert_eq!(count_events(&request(50), 2), Some(3));
        let bytes = request(3);
        assert_eq!(count_events(&bytes[..bytes.len() - 1], 10), None, "truncated");
        assert_eq!(count_events(&[0x0b], 10), None, "a group wire type");
    }

    fn core(limits: Limits) -> Core {
        Core::new(Config::default(), limits, 100, 3600.0, "test".into(), vec![])
    }

    #[test]
    fn whole_requests_are_refused_on_their_bytes() {
        let mut core = core(Limits { max_events_per_request: 2, ..Default::default() });
        let mut summary = Summary::default();
        let too_many = core.evaluate_request(&request(3), "t", "", 0.0, &mut summary, false);
        assert!(matches!(too_many, Err(Refusal::TooManyEvents)));
        let garbage = core.evaluate_request(&[0xff, 0xff], "t", "", 0.0, &mut summary, false);
        assert!(matches!(garbage, Err(Refusal::Undecodable)));
        assert!(core.store.is_empty());
        let ok = core.evaluate_request(&request(2), "t", "", 0.0, &mut summary, false).ok().expect("evaluated");
        assert_eq!(pb::EvaluateResponse::decode(ok.as_slice()).unwrap().verdicts.len(), 2);
    }

    #[test]
    fn envelope_limits_and_routing_reject_single_events() {
        let mut core = core(Limits { max_tool_name_chars: 4, ..Default::default() });
        let mut summary = Summary::default();
        let d = core.evaluate_event(&event("  ", "t"), "t", 0.0, &mut summary);
        assert_eq!((d.verdict.action, d.verdict.error_code), (Action::Reject, "missing_run_id"));
        let d = core.evaluate_event(&event("r", "toolong"), "t", 0.0, &mut summary);
        assert_eq!((d.verdict.action, d.verdict.error_code), (Action::Reject, "tool_name_too_long"));
        assert!(core.store.is_empty(), "a rejected event creates no run");
        let d = core.evaluate_timed(&EventRef::from(&event("other", "t")), "t", "r", 0.0, &mut summary);
        assert_eq!((d.verdict.action, d.verdict.error_code), (Action::Reject, "run_id_mismatch"));
        assert!(d.verdict.message.starts_with("run_id 'other' differs"), "{}", d.verdict.message);
    }

    #[test]
    fn model_outputs_without_text_over_the_limit_or_with_a_bad_cost_are_rejected() {
        let mut core = core(Limits { max_output_text_bytes: 8, ..Default::default() });
        let mut summary = Summary::default();
        let said = |output: pb::ModelOutput| pb::Event { run_id: "r".into(), seq: 1, kind: Some(pb::event::Kind::ModelOutput(output)), ..Default::default() };
        let mut answer = |output| {
            let d = core.evaluate_event(&said(output), "t", 0.0, &mut summary);
            (d.verdict.action, d.verdict.error_code, d.verdict.message)
        };
        let (action, code, message) = answer(pb::ModelOutput::default());
        assert_eq!((action, code), (Action::Reject, "missing_output_text"));
        assert!(message.contains("neither text nor text_digest"), "{message}");
        let (action, code, message) = answer(pb::ModelOutput { text: "123456789".into(), ..Default::default() });
        assert_eq!((action, code, message.as_str()), (Action::Reject, "output_text_too_large", "model_output.text is 9 bytes; the limit is 8"));
        let (_, code, _) = answer(pb::ModelOutput { text_digest: "123456789".into(), ..Default::default() });
        assert_eq!(code, "output_text_too_large");
        let bad = pb::Usage { cost_usd: f64::NAN, ..Default::default() };
        let (_, code, _) = answer(pb::ModelOutput { text: "hi".into(), usage: Some(bad), ..Default::default() });
        assert_eq!(code, "invalid_usage");
        let (action, code, _) = answer(pb::ModelOutput { text_digest: "d1".into(), output_kind: 99, ..Default::default() });
        assert_eq!((action, code), (Action::Allow, ""), "a digest alone will do; an unknown kind is a message");
        assert_eq!(core.store.len(), 1, "only the accepted output made a run");
    }

    #[test]
    fn an_agent_side_caller_cannot_speak_for_the_person() {
        let mut core = core(Limits::default());
        let mut summary = Summary::default();
        let turn = pb::Event { run_id: "r".into(), kind: Some(pb::event::Kind::UserTurn(pb::UserTurn::default())), ..Default::default() };
        let approval = pb::Event {
            run_id: "r".into(),
            kind: Some(pb::event::Kind::Approval(pb::Approval { tool_call_id: "c".into(), approved: true, ..Default::default() })),
            ..Default::default()
        };
        let events = [event("r", "t"), turn.clone(), approval];
        let refs: Vec<EventRef> = events.iter().map(EventRef::from).collect();
        let agent = core.evaluate_refs_from(Side::Agent, &refs, "t", "", 0.0, &mut summary);
        let codes: Vec<_> = agent.iter().map(|d| (d.verdict.action, d.verdict.error_code)).collect();
        assert_eq!(codes, [(Action::Allow, ""), (Action::Reject, "user_side_only"), (Action::Reject, "user_side_only")]);
        let anyone = core.evaluate_refs_from(Side::Any, &[EventRef::from(&turn)], "t", "", 0.0, &mut summary);
        assert_eq!(anyone[0].verdict.action, Action::Allow, "the person's side sends it");
    }

    #[test]
    fn lazy_requests_name_the_runs_not_in_memory_first() {
        let mut core = core(Limits::default());
        let mut summary = Summary::default();
        let bytes = pb::EvaluateRequest { events: vec![event("a", "t"), event("b", "t"), event("a", "t")] }.encode_to_vec();
        match core.evaluate_request(&bytes, "t", "", 0.0, &mut summary, true) {
            Err(Refusal::NotLoaded(ids)) => assert_eq!(ids, [("a".to_string(), "a".to_string()), ("b".to_string(), "b".to_string())]),
            _ => panic!("expected NotLoaded"),
        }
        assert!(core.store.is_empty(), "nothing evaluated");
        // Run trees: a new child names its parent and root; a later event of a child (no parent
        // named) on a stream routed to its root is looked for under that root.
        let mut child = event("c", "t");
        child.parent_run_id = "p".into();
        let bytes = pb::EvaluateRequest { events: vec![child, event("later", "t")] }.encode_to_vec();
        let owned = |pairs: &[(&str, &str)]| pairs.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect::<Vec<_>>();
        match core.evaluate_request(&bytes, "t", "root", 0.0, &mut summary, true) {
            Err(Refusal::NotLoaded(ids)) => assert_eq!(ids, owned(&[("c", "root"), ("p", "root"), ("root", "root"), ("later", "root")])),
            _ => panic!("expected NotLoaded"),
        }
    }
}
