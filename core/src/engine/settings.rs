//! The effective settings of one agent, compiled by Python and handed in whole: kept apart from
//! the engine's logic so that adding a knob touches one struct, and the switches that turn whole
//! groups of detectors on or off are named once.

/// Effective settings of one agent (engine/settings.py's LoopDetectionSettings).
#[derive(Clone, Debug)]
pub struct Settings {
    pub enabled: Option<bool>,
    pub history_size: usize,
    pub warning_threshold: u32,
    pub critical_threshold: u32,
    pub unknown_tool_threshold: u32,
    pub global_circuit_breaker_threshold: u32,
    pub generic_repeat: bool,
    pub known_poll_no_progress: bool,
    pub ping_pong: bool,
    pub compaction_window_size: u32,
    pub abort_after_blocks: u32,
    pub run_wide_breaker_threshold: u32,
    pub shadow: bool,
    pub argument_churn_warn_at: u32,
    pub argument_churn_block_at: u32,
    pub error_repeat_threshold: u32,
    pub ping_pong_needs_answers: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            enabled: None,
            history_size: 30,
            warning_threshold: 10,
            critical_threshold: 20,
            unknown_tool_threshold: 10,
            global_circuit_breaker_threshold: 30,
            generic_repeat: true,
            known_poll_no_progress: true,
            ping_pong: true,
            compaction_window_size: 3,
            abort_after_blocks: 0,
            run_wide_breaker_threshold: 0,
            shadow: false,
            argument_churn_warn_at: 0,
            argument_churn_block_at: 0,
            error_repeat_threshold: 0,
            ping_pong_needs_answers: false,
        }
    }
}

impl Settings {
    pub(crate) fn ranked_after_on(&self) -> bool {
        self.argument_churn_warn_at > 0 || self.argument_churn_block_at > 0 || self.error_repeat_threshold > 0
    }
    pub(crate) fn rolling_on(&self) -> bool {
        self.enabled == Some(true)
    }
    pub(crate) fn recording_on(&self) -> bool {
        self.enabled != Some(false)
    }
}
