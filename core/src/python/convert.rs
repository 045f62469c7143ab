//! The hand-written conversions `event_gen.rs` names: how a field spelled out for Python (an
//! enum as the config spells it, a oneof as its members) becomes its protobuf form.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::pb;

/// ToolCall.tool_class from a class as the config spells it ("" for none).
pub(super) fn tool_class(name: &str) -> PyResult<pb::ToolClass> {
    use crate::tool_rules::ToolClass;
    Ok(match ToolClass::from_name(name) {
        Some(ToolClass::ReadOnly) => pb::ToolClass::ReadOnly,
        Some(ToolClass::Mutating) => pb::ToolClass::Mutating,
        Some(ToolClass::Poll) => pb::ToolClass::Poll,
        Some(ToolClass::Unknown) => pb::ToolClass::Unspecified,
        None => return Err(PyValueError::new_err(format!("tool_class: unknown class {name:?}"))),
    })
}

/// Approval.scope from "once" or "always" ("" for unspecified, taken as once).
pub(super) fn scope(name: &str) -> PyResult<pb::ApprovalScope> {
    Ok(match name {
        "" => pb::ApprovalScope::Unspecified,
        "once" => pb::ApprovalScope::Once,
        "always" => pb::ApprovalScope::Always,
        other => return Err(PyValueError::new_err(format!("scope: {other:?} is not once or always"))),
    })
}

/// ToolOutcome.outcome: the error when there is one, else the result, else none.
pub(super) fn outcome(result_json: Option<String>, error: Option<String>) -> Option<pb::tool_outcome::Outcome> {
    match (error, result_json) {
        (Some(e), _) => Some(pb::tool_outcome::Outcome::Error(e)),
        (None, Some(r)) => Some(pb::tool_outcome::Outcome::ResultJson(r)),
        (None, None) => None,
    }
}

/// ModelOutput.output_kind from "message", "thought" or "final_answer" ("" for unspecified,
/// taken as a message).
pub(super) fn output_kind(name: &str) -> PyResult<pb::OutputKind> {
    Ok(match name {
        "" => pb::OutputKind::Unspecified,
        "message" => pb::OutputKind::Message,
        "thought" => pb::OutputKind::Thought,
        "final_answer" => pb::OutputKind::FinalAnswer,
        other => return Err(PyValueError::new_err(format!("output_kind: {other:?} is not message, thought or final_answer"))),
    })
}
