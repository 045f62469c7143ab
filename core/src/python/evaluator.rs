//! The evaluation role: `Core.evaluator`, one call per request (Evaluate, Check), per hook or
//! replayed event (`decide`), or per request a lazy call set aside (`resume`).

use prost::Message;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use super::answers::{py_summary, py_verdict, refusal_reason, reportable, Answer, Form, MissingRun, Pending};
use super::PyCore;
use crate::pb;
use crate::service::{self, Core, EventRef, Side, Summary};

/// A hook's or an in-process caller's event fields (`decide`'s keywords), whatever its kind.
#[derive(Default)]
pub(super) struct EventFields {
    pub(super) run_id: String,
    pub(super) agent_id: String,
    pub(super) session_id: String,
    pub(super) seq: u64,
    pub(super) parent_run_id: String,
    pub(super) accepts_ask: bool,
    pub(super) tool_name: String,
    pub(super) params_json: String,
    pub(super) tool_call_id: String,
    pub(super) result_json: Option<String>,
    pub(super) error: Option<String>,
    pub(super) duration_ms: u64,
    pub(super) tool_class: i32,
    pub(super) batch_id: String,
    pub(super) prompt_id: String,
    pub(super) input_tokens: u64,
    pub(super) output_tokens: u64,
    pub(super) cost_usd: f64,
    pub(super) model: String,
    pub(super) decision_id: String,
    pub(super) approved: bool,
    pub(super) scope: i32,
    pub(super) ttl_seconds: u32,
}

/// The event of `kind` from its fields, built without a protobuf round trip.
pub(super) fn event_from(kind: &str, f: EventFields) -> pb::Event {
    use pb::event::Kind;
    let kind = match kind {
        "tool_call" => Some(Kind::ToolCall(pb::ToolCall {
            tool_name: f.tool_name, params_json: f.params_json, tool_call_id: f.tool_call_id, tool_class: f.tool_class, batch_id: f.batch_id,
        })),
        "tool_outcome" => {
            let outcome = match (f.error, f.result_json) {
                (Some(e), _) => Some(pb::tool_outcome::Outcome::Error(e)),
                (None, Some(r)) => Some(pb::tool_outcome::Outcome::ResultJson(r)),
                (None, None) => None,
            };
            Some(Kind::ToolOutcome(pb::ToolOutcome {
                tool_name: f.tool_name, params_json: f.params_json, tool_call_id: f.tool_call_id, outcome, duration_ms: f.duration_ms,
            }))
        }
        "compaction_retry" => Some(Kind::CompactionRetry(pb::CompactionRetry {})),
        "run_end" => Some(Kind::RunEnd(pb::RunEnd {})),
        "user_turn" => Some(Kind::UserTurn(pb::UserTurn { prompt_id: f.prompt_id })),
        "usage" => Some(Kind::Usage(pb::Usage { input_tokens: f.input_tokens, output_tokens: f.output_tokens, cost_usd: f.cost_usd, model: f.model })),
        "approval" => Some(Kind::Approval(pb::Approval {
            tool_call_id: f.tool_call_id, decision_id: f.decision_id, approved: f.approved, scope: f.scope, ttl_seconds: f.ttl_seconds,
        })),
        _ => None,
    };
    pb::Event {
        run_id: f.run_id, agent_id: f.agent_id, session_id: f.session_id, seq: f.seq, kind, parent_run_id: f.parent_run_id,
        accepts_ask: f.accepts_ask,
    }
}

fn side_of(agent_only: bool) -> Side {
    if agent_only { Side::Agent } else { Side::Any }
}

/// Evaluate `events` (or, lazily, first name the runs to load) and answer in `form`.
#[allow(clippy::too_many_arguments)]
fn answer(py: Python<'_>, core: &mut Core, side: Side, form: Form, events: Vec<pb::Event>, tenant: &str, now: f64,
          routed: &str, lazy: bool, report: bool) -> PyResult<Answer> {
    let mut summary = Summary::default();
    let refs: Vec<EventRef> = events.iter().map(EventRef::from).collect();
    if lazy {
        let missing = core.missing_runs(&refs, tenant, routed, now, &mut summary);
        if !missing.is_empty() {
            return Ok(Answer {
                response: None, verdict: None, refusal: "",
                missing_runs: missing.into_iter().map(|(run_id, root)| MissingRun { run_id, root }).collect(),
                pending: Some(Py::new(py, Pending { form, events, side })?),
                summary: Some(py_summary(py, summary, Vec::new())?),
            });
        }
    }
    evaluated(py, core, side, form, &refs, tenant, now, routed, report, summary)
}

/// `events` evaluated (their runs are in memory), answered in `form`.
#[allow(clippy::too_many_arguments)]
fn evaluated(py: Python<'_>, core: &mut Core, side: Side, form: Form, events: &[EventRef], tenant: &str, now: f64,
             routed: &str, report: bool, mut summary: Summary) -> PyResult<Answer> {
    let decisions = core.evaluate_refs_from(side, events, tenant, routed, now, &mut summary);
    let reported = if report {
        decisions.iter().zip(events).filter(|(d, _)| reportable(d)).map(|(d, e)| py_verdict(d, e)).collect()
    } else {
        Vec::new()
    };
    let (response, verdict) = match form {
        Form::Evaluate => {
            (Some(PyBytes::new(py, &service::evaluate_response(&decisions)).unbind()), None)
        }
        Form::Check => {
            let verdict = decisions.first().map(service::verdict_message);
            (Some(PyBytes::new(py, &pb::CheckResponse { verdict }.encode_to_vec()).unbind()), None)
        }
        Form::Decide => {
            let d = decisions.first().map(|d| py_verdict(d, &events[0]));
            (None, d.map(|v| Py::new(py, v)).transpose()?)
        }
    };
    Ok(Answer { response, verdict, refusal: "", missing_runs: Vec::new(), pending: None,
                summary: Some(py_summary(py, summary, reported)?) })
}

/// The evaluation role over a daemon's core (`Core.evaluator`).
#[pyclass(module = "loopwarden_core", frozen)]
pub(super) struct Evaluator {
    pub(super) core: Py<PyCore>,
}

#[pymethods]
impl Evaluator {
    /// EvaluateRequest bytes -> an Answer with EvaluateResponse bytes (or a refusal, or the runs
    /// to load first when `lazy`). `routed`: the stream's x-loopwarden-run-id. `agent_only`: the
    /// caller's token is limited to agent-side events (user turns and approvals are REJECTed).
    #[pyo3(signature = (data, tenant, now, routed = "", lazy = false, report = false, agent_only = false))]
    #[allow(clippy::too_many_arguments)]
    fn evaluate(&self, py: Python<'_>, data: &[u8], tenant: &str, now: f64, routed: &str, lazy: bool, report: bool,
                agent_only: bool) -> PyResult<Answer> {
        let mut cell = self.core.bind(py).try_borrow_mut()?;
        let core = &mut cell.core;
        let side = side_of(agent_only);
        if lazy {  // the request may be set aside (Pending): decoded into owned events
            return match core.decode_evaluate(data) {
                Ok(events) => answer(py, core, side, Form::Evaluate, events, tenant, now, routed, lazy, report),
                Err(r) => Ok(Answer::refused(refusal_reason(r))),
            };
        }
        match core.decode_request(data) {  // read in place where it can be (service/wire.rs)
            Ok(events) => evaluated(py, core, side, Form::Evaluate, &events.refs(), tenant, now, routed, report, Summary::default()),
            Err(r) => Ok(Answer::refused(refusal_reason(r))),
        }
    }

    /// CheckRequest bytes -> an Answer with CheckResponse bytes; "missing_event" when it has none.
    #[pyo3(signature = (data, tenant, now, routed = "", lazy = false, report = false, agent_only = false))]
    #[allow(clippy::too_many_arguments)]
    fn check(&self, py: Python<'_>, data: &[u8], tenant: &str, now: f64, routed: &str, lazy: bool, report: bool,
             agent_only: bool) -> PyResult<Answer> {
        let mut cell = self.core.bind(py).try_borrow_mut()?;
        let core = &mut cell.core;
        let Ok(request) = pb::CheckRequest::decode(data) else { return Ok(Answer::refused("undecodable")) };
        let Some(event) = request.event else { return Ok(Answer::refused("missing_event")) };
        answer(py, core, side_of(agent_only), Form::Check, vec![event], tenant, now, routed, lazy, report)
    }

    /// One event from its fields (offline replay, the MCP proxy's offline judge): an Answer whose
    /// `verdict` is the decision. `kind`: tool_call, tool_outcome, compaction_retry, user_turn
    /// (`prompt_id`), usage (`input_tokens`, `output_tokens`, `cost_usd`, `model`), approval
    /// (`tool_call_id` or `decision_id`, `approved`, `scope` "once" | "always", `ttl_seconds`) or
    /// run_end (anything else is REJECTed `missing_event_kind`). `tool_class`: a call's class as
    /// its caller knows it ("", "readOnly", "mutating", "poll"). `batch_id`: a call's
    /// ToolCall.batch_id. `parent_run_id`, `accepts_ask`: the Event's; `duration_ms`: an outcome's.
    #[pyo3(signature = (kind, run_id, *, tenant = "", now = 0.0, agent_id = String::new(), session_id = String::new(),
                        seq = 0, tool_name = String::new(), params_json = String::new(), tool_call_id = String::new(),
                        result_json = None, error = None, lazy = false, report = false, tool_class = "",
                        batch_id = String::new(), prompt_id = String::new(), parent_run_id = String::new(),
                        accepts_ask = false, duration_ms = 0, input_tokens = 0, output_tokens = 0, cost_usd = 0.0,
                        model = String::new(), decision_id = String::new(), approved = false, scope = "",
                        ttl_seconds = 0))]
    #[allow(clippy::too_many_arguments)]
    fn decide(&self, py: Python<'_>, kind: &str, run_id: String, tenant: &str, now: f64, agent_id: String,
              session_id: String, seq: u64, tool_name: String, params_json: String, tool_call_id: String,
              result_json: Option<String>, error: Option<String>, lazy: bool, report: bool, tool_class: &str,
              batch_id: String, prompt_id: String, parent_run_id: String, accepts_ask: bool, duration_ms: u64,
              input_tokens: u64, output_tokens: u64, cost_usd: f64, model: String, decision_id: String, approved: bool,
              scope: &str, ttl_seconds: u32) -> PyResult<Answer> {
        let mut cell = self.core.bind(py).try_borrow_mut()?;
        let core = &mut cell.core;
        use crate::tool_rules::ToolClass;
        let class = match ToolClass::from_name(tool_class) {
            Some(ToolClass::ReadOnly) => pb::ToolClass::ReadOnly,
            Some(ToolClass::Mutating) => pb::ToolClass::Mutating,
            Some(ToolClass::Poll) => pb::ToolClass::Poll,
            Some(ToolClass::Unknown) => pb::ToolClass::Unspecified,
            None => return Err(PyValueError::new_err(format!("tool_class: unknown class {tool_class:?}"))),
        };
        let scope = match scope {
            "" => pb::ApprovalScope::Unspecified,
            "once" => pb::ApprovalScope::Once,
            "always" => pb::ApprovalScope::Always,
            other => return Err(PyValueError::new_err(format!("scope: {other:?} is not once or always"))),
        };
        let event = event_from(kind, EventFields {
            run_id, agent_id, session_id, seq, parent_run_id, accepts_ask, tool_name, params_json, tool_call_id, result_json, error,
            duration_ms, tool_class: class as i32, batch_id, prompt_id, input_tokens, output_tokens, cost_usd, model, decision_id,
            approved, scope: scope as i32, ttl_seconds,
        });
        answer(py, core, Side::Any, Form::Decide, vec![event], tenant, now, "", lazy, report)
    }

    /// Evaluate a request a lazy call decoded and set aside (its runs are loaded now).
    #[pyo3(signature = (pending, tenant, now, routed = "", report = false))]
    fn resume(&self, py: Python<'_>, pending: &Bound<'_, Pending>, tenant: &str, now: f64, routed: &str, report: bool) -> PyResult<Answer> {
        let mut cell = self.core.bind(py).try_borrow_mut()?;
        let core = &mut cell.core;
        let pending = pending.get();
        answer(py, core, pending.side, pending.form, pending.events.clone(), tenant, now, routed, false, report)
    }
}
