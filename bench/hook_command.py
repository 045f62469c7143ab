"""What one command-hook invocation costs, as the host pays it: wall time from spawning the command
to its exit, for one Claude Code PreToolUse answered by a real daemon.

  loopwarden-hook   the compiled command hook (core/hook), posting to the HTTP hook endpoint
  curl              `curl -s -X POST --data-binary @payload URL`: the floor for any process that
                    makes one HTTP request (the bar: loopwarden-hook's median at most 2x it)
  loopwarden hook   the Python command form (gRPC), the fallback

Each round runs the three once each, in turn, so noise on this shared machine falls on all of
them alike; each has its own session, sending the same payload (so each session's history, warn
at 11 and deny at 21 included, is the same). Times are per invocation: median, min, max.

Run: .venv/bin/python bench/hook_command.py [--runs 200] [--python-runs 50]
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from tests.client.python.hooks import payloads  # noqa: E402
from tests.support.daemon import started  # noqa: E402
from tests.support.hook_binary import hook_binary  # noqa: E402


def timed(command: list[str], stdin_path: pathlib.Path | None) -> float:
    with open(stdin_path or os.devnull, "rb") as stdin:
        began = time.perf_counter()
        done = subprocess.run(command, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        elapsed = time.perf_counter() - began
    if done.returncode != 0 or not done.stdout.strip().startswith(b"{"):
        raise RuntimeError(f"{command[0]} failed ({done.returncode}): {done.stdout!r} {done.stderr!r}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=200, help="invocations of loopwarden-hook and of curl")
    parser.add_argument("--python-runs", type=int, default=50, help="invocations of `loopwarden hook` (~150 ms each)")
    args = parser.parse_args()
    curl = shutil.which("curl")
    if curl is None:
        sys.exit("curl is not installed: the benchmark measures against it")
    binary = str(hook_binary())
    loopwarden = str(pathlib.Path(sys.executable).parent / "loopwarden")
    serve = [sys.executable, "-m", "loopwarden", "serve", "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0",
             "--hooks-listen", "127.0.0.1:0"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOPWARDEN_")}
    with tempfile.TemporaryDirectory(prefix="hook-bench-") as tmp, started(serve, env) as daemon:
        hooks = daemon.listening["hooks_address"]
        grpc = daemon.listening["grpc_address"]
        url = f"http://{hooks}/v1/hooks/claude-code"
        files = {}
        for name in ("loopwarden-hook", "curl", "loopwarden hook"):
            files[name] = pathlib.Path(tmp) / f"{name.replace(' ', '-')}.json"
            files[name].write_text(json.dumps(payloads.claude_pre_tool_use(f"bench-{name}", "toolu_1")))
        commands = {
            "loopwarden-hook": ([binary, "claude-code", "--url", f"http://{hooks}"], files["loopwarden-hook"]),
            "curl": ([curl, "-s", "-X", "POST", "-H", "Content-Type: application/json", "--data-binary",
                      f"@{files['curl']}", url], None),
            "loopwarden hook": ([loopwarden, "hook", "claude-code", "--address", grpc], files["loopwarden hook"]),
        }
        times: dict[str, list[float]] = {name: [] for name in commands}
        for command, stdin in commands.values():  # warm-up: page cache, the daemon's first request
            timed(command, stdin)
        for index in range(max(args.runs, args.python_runs)):
            for name, (command, stdin) in commands.items():
                if index < (args.python_runs if name == "loopwarden hook" else args.runs):
                    times[name].append(timed(command, stdin))
    curl_median = statistics.median(times["curl"])
    print("| command | runs | median ms | min ms | max ms | median / curl's |")
    print("|---|---|---|---|---|---|")
    for name, samples in times.items():
        median = statistics.median(samples)
        print(f"| `{name}` | {len(samples)} | {median * 1e3:.2f} | {min(samples) * 1e3:.2f} | {max(samples) * 1e3:.2f} "
              f"| {median / curl_median:.2f}x |")


if __name__ == "__main__":
    main()
