//! The evaluation role: `Core.evaluator`, one call per request (Evaluate, Check), per hook or
//! replayed event (`decide`), or per request a lazy call set aside (`resume`).

use prost::Message;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use super::event_gen::{event_from, EventFields};
use super::answers::{py_summary, py_verdict, refusal_reason, reportable, Answer, Form, MissingRun, Pending};
use super::PyCore;
use crate::pb;
use crate::service::{self, Core, EventRef, Side, Summary};

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

    /// One event, read from the attributes of `event` (offline replay, the MCP proxy's offline
    /// judge; event_gen.rs names them): an Answer whose `verdict` is the decision. A `kind` that
    /// is no Event.kind member is REJECTed `missing_event_kind`; an unknown `tool_class` or
    /// `scope` spelling is a ValueError.
    #[pyo3(signature = (event, *, tenant = "", now = 0.0, lazy = false, report = false))]
    fn decide(&self, py: Python<'_>, event: EventFields, tenant: &str, now: f64, lazy: bool, report: bool) -> PyResult<Answer> {
        let event = event_from(event)?;
        let mut cell = self.core.bind(py).try_borrow_mut()?;
        answer(py, &mut cell.core, Side::Any, Form::Decide, vec![event], tenant, now, "", lazy, report)
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
