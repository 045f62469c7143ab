//! What a decision is made of: the action, the detector that answered, its level and the
//! verdict that carries them out to the service. One vocabulary, so the detectors, the service's
//! wire form (`verdict_message`) and the state store's records spell a decision the same way.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Allow = 1,
    Warn = 2,
    Block = 3,
    Abort = 4,
    Reject = 5,
    /// Hold the call for a human (only for events that declared accepts_ask).
    Ask = 6,
}

impl Action {
    pub fn name(self) -> &'static str {
        match self {
            Action::Allow => "allow",
            Action::Warn => "warn",
            Action::Block => "block",
            Action::Abort => "abort",
            Action::Reject => "reject",
            Action::Ask => "ask",
        }
    }
}

/// Detector ids are generated from tables/loopwarden.toml with the other shared tables.
pub use crate::tables::Detector;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    None = 0,
    Warning = 1,
    Critical = 2,
}

impl Level {
    pub fn name(self) -> &'static str {
        match self {
            Level::None => "none",
            Level::Warning => "warning",
            Level::Critical => "critical",
        }
    }
}

#[derive(Clone, Debug)]
pub struct Verdict {
    pub action: Action,
    pub detector: Detector,
    pub level: Level,
    pub count: u32,
    pub message: String,
    pub warning_key: String,
    pub announce: bool,
    pub paired_tool_name: String,
    pub error_code: &'static str,
    pub tool_name: String,
    pub evidence_seqs: Vec<u64>,
    pub evidence_call_ids: Vec<String>,
    pub shadow_action: Option<Action>,
    pub guard_armed: bool,
}

impl Verdict {
    pub fn allow(tool_name: &str) -> Verdict {
        Verdict {
            action: Action::Allow,
            detector: Detector::None,
            level: Level::None,
            count: 0,
            message: String::new(),
            warning_key: String::new(),
            announce: false,
            paired_tool_name: String::new(),
            error_code: "",
            tool_name: tool_name.to_string(),
            evidence_seqs: Vec::new(),
            evidence_call_ids: Vec::new(),
            shadow_action: None,
            guard_armed: false,
        }
    }
    /// Shadow mode: the verdict reported (`shadow_action`), not enforced (ALLOW), and announced.
    pub fn shadowed(mut self) -> Verdict {
        self.shadow_action = Some(self.action);
        self.action = Action::Allow;
        self.announce = true;
        self
    }
    pub fn reject(code: &'static str, message: String) -> Verdict {
        let mut v = Verdict::allow("");
        v.action = Action::Reject;
        v.error_code = code;
        v.message = message;
        v
    }
}
