//! Nothing here: tests/proto_fresh.rs checks (and with LOOPWARDEN_REGENERATE=1 rewrites)
//! loopwarden-core's committed prost code, in a crate that does not build the core.
