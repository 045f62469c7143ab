"""loopwarden client library and CLI."""
