//! The effective settings of one agent, resolved by Python and handed in whole (as the typed
//! `loopwarden_core.Settings`, python/settings_gen.rs): kept apart from
//! the engine's logic so that adding a knob touches one struct, and the switches that turn whole
//! groups of detectors on or off are named once.

/// Effective settings of one agent: generated from tables/loopwarden.toml (core/src/tables.rs).
pub use crate::tables::Settings;

impl Settings {
    pub(crate) fn ranked_after_on(&self) -> bool {
        self.argument_churn_warn_at > 0 || self.argument_churn_block_at > 0 || self.error_repeat_threshold > 0
            || self.duplicate_side_effect
            || self.cycle_warn_after > 0 || self.cycle_block_after > 0
            || self.failure_cascade_threshold > 0
    }
    /// A repeat counts only since another call brought the run something new: asked for by
    /// progressResetsRepeats, and part of what sameOutcome's evidence is.
    pub(crate) fn progress_floor_on(&self) -> bool {
        self.progress_resets_repeats || self.same_outcome_block_at > 0
    }
    pub(crate) fn rolling_on(&self) -> bool {
        self.enabled == Some(true)
    }
    pub(crate) fn recording_on(&self) -> bool {
        self.enabled != Some(false)
    }
}
