//! The engine: one event in, one verdict out, run state updated in place. It is the only engine
//! the daemon runs. The Python reference engine in tests/reference/engine (`evaluate.py`,
//! `state.py`, `detectors/`, `compaction_guard.py`) is the oracle, and the differential suite
//! (tests/core) holds the two to the same verdicts.
//!
//! Split by job, each module beside its tests: the verdict vocabulary, the settings, the run
//! state, the evaluation entry, the compaction guard and one module per detector. Everything
//! other code uses is re-exported here, so `crate::engine::X` is the one path to it.

pub mod ask;
pub mod batches;
mod compaction_guard;
mod detectors;
mod evaluation;
mod no_tool;
pub mod output_memory;
pub mod outputs;
mod run_state;
mod settings;
mod side_effects;
#[cfg(test)]
mod testing;
mod verdict;

pub use evaluation::{evaluate, evaluate_with, Event};
pub use run_state::{
    args_hash_text, hex, result_hash_text, same, spelling_of, Guard, Rare, Record, RecordExtra, RunState, SideEffect, Tool, Triple,
    MAX_ANNOUNCED_KEYS, MAX_SEEN_TRIPLES, MAX_SIDE_EFFECTS,
};
pub use settings::Settings;
pub use verdict::{Action, Detector, Level, Verdict};
