"""Generated loopwarden.v1 stubs (do not edit; regenerate with scripts/gen_proto.py)."""
