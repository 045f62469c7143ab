"""loopwarden daemon: detection engine, config, run store, gRPC transport."""
