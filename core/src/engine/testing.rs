//! Tests only: a run driven through the public `evaluate`, with small thresholds, so that a
//! detector's tests read as the events of a loop and the verdict each one earns. Going through
//! `evaluate` (not calling a detector directly) tests what the service sees: the precedence
//! table, the ranking and the history writes included.

use crate::engine::{evaluate, Action, Detector, Event, RunState, Settings, Verdict};
use crate::fingerprint::Catalog;

/// Rolling detection on with W = 3, C = 5, G = 7, U = 4 (W < C < G, as config resolution
/// insists); the opt-in detectors off.
pub(crate) fn small() -> Settings {
    Settings {
        enabled: Some(true),
        warning_threshold: 3,
        critical_threshold: 5,
        global_circuit_breaker_threshold: 7,
        unknown_tool_threshold: 4,
        ..Default::default()
    }
}

/// What a test asserts of a verdict.
pub(crate) fn seen(v: &Verdict) -> (Action, Detector, u32) {
    (v.action, v.detector, v.count)
}

pub(crate) const ALLOW: (Action, Detector, u32) = (Action::Allow, Detector::None, 0);

/// `small()` for the detectors of loops without tool calls: each test switches its own on.
pub(crate) fn no_tool() -> Settings {
    small()
}

/// One run: its state, its settings and the next event's seq (every event takes one).
pub(crate) struct Run {
    pub(crate) state: RunState,
    pub(crate) settings: Settings,
    catalog: Catalog,
    seq: u64,
}

impl Run {
    pub(crate) fn new(settings: Settings) -> Run {
        Run { state: RunState::new(settings.history_size), settings, catalog: Catalog::default(), seq: 0 }
    }

    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// A model output of `kind` ("message", "thought", "final_answer").
    pub(crate) fn said(&mut self, kind: &str, text: &str) -> Verdict {
        self.output(kind, text, "", false)
    }

    /// A model output sent as the caller's digest of its text.
    pub(crate) fn said_digest(&mut self, kind: &str, digest: &str) -> Verdict {
        self.output(kind, "", digest, false)
    }

    /// A model output sent while a stop hook keeps its turn going.
    pub(crate) fn said_active(&mut self, kind: &str, text: &str) -> Verdict {
        self.output(kind, text, "", true)
    }

    /// A final answer at a stop: the turn's own (`active` false) or a stop hook's continuation.
    pub(crate) fn stop(&mut self, text: &str, active: bool) -> Verdict {
        self.output("final_answer", text, "", active)
    }

    fn output(&mut self, kind: &str, text: &str, text_digest: &str, stop_hook_active: bool) -> Verdict {
        use crate::engine::outputs::{Output, OutputKind};
        let kind = OutputKind::ALL.into_iter().find(|k| k.name() == kind).expect("an output kind");
        let seq = self.next_seq();
        self.send(&Event::ModelOutput(Output { text, text_digest, kind, stop_hook_active, seq }))
    }

    /// A compaction retry.
    pub(crate) fn compaction(&mut self) -> Verdict {
        let seq = self.next_seq();
        self.send(&Event::CompactionRetry { seq })
    }

    pub(crate) fn send(&mut self, event: &Event) -> Verdict {
        evaluate(&mut self.state, event, &self.settings, &self.catalog, 64)
    }

    /// `send` with what ASK reads and writes (engine::ask::AskIo).
    pub(crate) fn send_with(&mut self, event: &Event, io: &mut crate::engine::ask::AskIo) -> Verdict {
        crate::engine::evaluate_with(&mut self.state, event, &self.settings, &self.catalog, 64, io)
    }

    /// A call with its id, sent with `io`.
    pub(crate) fn call_with(&mut self, tool: &str, params: &str, call_id: &str, io: &mut crate::engine::ask::AskIo) -> Verdict {
        let seq = self.next_seq();
        self.send_with(&Event::ToolCall { tool_name: tool, params_json: params, tool_call_id: call_id, seq, tool_class: Default::default() }, io)
    }

    pub(crate) fn call(&mut self, tool: &str, params: &str) -> Verdict {
        let seq = self.next_seq();
        self.send(&Event::ToolCall { tool_name: tool, params_json: params, tool_call_id: "", seq, tool_class: Default::default() })
    }

    pub(crate) fn result(&mut self, tool: &str, params: &str, result_json: &str) -> Verdict {
        let seq = self.next_seq();
        self.send(&Event::ToolOutcome { tool_name: tool, params_json: params, tool_call_id: "", result_json: Some(result_json), error: None, seq })
    }

    pub(crate) fn error(&mut self, tool: &str, params: &str, error: &str) -> Verdict {
        let seq = self.next_seq();
        self.send(&Event::ToolOutcome { tool_name: tool, params_json: params, tool_call_id: "", result_json: None, error: Some(error), seq })
    }

    /// A call and, unless it was stopped, its result (as an agent would): the call's verdict.
    pub(crate) fn round(&mut self, tool: &str, params: &str, result_json: &str) -> Verdict {
        let v = self.call(tool, params);
        if matches!(v.action, Action::Allow | Action::Warn) {
            self.result(tool, params, result_json);
        }
        v
    }

    /// A call and, unless it was stopped, its failure: the call's verdict.
    pub(crate) fn failing_round(&mut self, tool: &str, params: &str, error: &str) -> Verdict {
        let v = self.call(tool, params);
        if matches!(v.action, Action::Allow | Action::Warn) {
            self.error(tool, params, error);
        }
        v
    }
}
