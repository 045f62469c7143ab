"""What `loopwarden install-hooks` writes: each host's hook config (hosts), merged into the file that
is there or taken out of it (merge), read, compared and written safely (files)."""
