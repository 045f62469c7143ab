"""`loopwarden mcp-proxy [--address ADDR | --offline] [--agent ID] [--run-id ID] [--listen HOST:PORT]
[--check-timeout SECONDS] -- COMMAND ARGS…`: the arguments, the judge, and the transports.

Exit status: 0 when the client ended the session, 2 for bad arguments or a server that cannot
be started, and SERVER_EXITED_STATUS over stdio when the MCP server exited first (after every
request it had not answered got an error): the client sees the connection close, as it would
with the server itself, and a host that restarts a dead server restarts the proxy with it."""
from __future__ import annotations

import argparse
import math
import os
import sys
import uuid

INSTALL_HINT = "pip install 'loopwarden[mcp]'"
SERVER_EXITED_STATUS = 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from loopwarden.connection import add_connection_arguments
    from loopwarden.daemon_limits import MAX_PARAMS_BYTES, MAX_RESULT_BYTES

    from .listener_auth import add_listener_arguments

    judge = parser.add_argument_group("where verdicts come from")
    judge.add_argument("--offline", action="store_true",
                       help="no daemon: the daemon's engine in-process (exactly its decisions; with --config)")
    judge.add_argument("--config", metavar="FILE",
                       help="with --offline: JSON5 config (default: the embedded default config, detection on)")
    parser.add_argument("--agent", default="", metavar="ID", help="agent id for the per-agent config")
    parser.add_argument("--run-id", default="", metavar="ID",
                        help="the run's id (default: mcp-proxy-<random>): over stdio the session's run; with "
                             "--listen each session's run is ID-s1, ID-s2, …")
    parser.add_argument("--listen", metavar="HOST:PORT",
                        help="serve Streamable HTTP at http://HOST:PORT/mcp instead of stdio (port 0: any free port)")
    parser.add_argument("--max-params-bytes", type=int, default=None, metavar="N",
                        help=f"the daemon's {MAX_PARAMS_BYTES.flag}: larger tool arguments are judged by their "
                             f"sha256, length and prefix (default {MAX_PARAMS_BYTES.shown})")
    parser.add_argument("--max-result-bytes", type=int, default=None, metavar="N",
                        help=f"the daemon's {MAX_RESULT_BYTES.flag}: a larger result or error is judged by its "
                             f"sha256, length and prefix (default {MAX_RESULT_BYTES.shown})")
    parser.add_argument("--max-sessions", type=int, default=None, metavar="N",
                        help="with --listen: sessions (so server children) open at once; a new one past it is "
                             "answered 503 (default 32, at most 10000)")
    parser.add_argument("--session-idle-seconds", type=float, default=None, metavar="SECONDS",
                        help="with --listen: a session with no request and no open stream this long is ended and "
                             "its server child stopped (default 1800, 1 to 86400)")
    parser.add_argument("--max-sse-event-bytes", type=int, default=None, metavar="N",
                        help="with --listen: an answer larger than this as one server-sent event is replaced by an "
                             "error saying so, since the client would refuse it (default 1048576, the MCP Python "
                             "SDK client's limit; 0: no limit, for clients that take any size)")
    parser.add_argument("--fail-closed", action="store_true",
                        help="refuse tool calls while the daemon cannot be asked (default: they run unguarded)")
    parser.add_argument("--check-timeout", type=float, default=None, metavar="SECONDS",
                        help="longest wait for one verdict; past it the call is treated as with the daemon "
                             "down (default 5)")
    add_connection_arguments(parser)
    add_listener_arguments(parser)
    parser.add_argument("command", nargs=argparse.REMAINDER, metavar="-- COMMAND ARGS",
                        help="the MCP server to start, over stdio")


def _say(text: str) -> None:
    print(f"loopwarden mcp-proxy: {text}", file=sys.stderr, flush=True)


def _judge(args: argparse.Namespace):
    """The judge (daemon or in-process), or an error message."""
    if args.offline:
        if args.address:
            return "--offline and --address exclude each other"
        from ..config import ConfigError, load_config_file, load_default_config
        from ..replay import silence_decision_logs
        from .guard import OfflineJudge

        try:
            config = load_config_file(args.config) if args.config else load_default_config()
        except (ConfigError, OSError) as exc:
            return f"config: {exc}"
        silence_decision_logs()
        return lambda: OfflineJudge(config, agent_id=args.agent)
    if args.config:
        return "--config needs --offline (a daemon decides on its own config)"
    from loopwarden.connection import ConnectionSettingsError, connection_from

    from .guard import DaemonJudge

    try:
        connection = connection_from(args)
    except ConnectionSettingsError as exc:
        return str(exc)
    # NOTE: a factory: a grpc.aio channel belongs to the loop it is made on, which starts later.
    return lambda: DaemonJudge(connection.address, agent_id=args.agent, timeout=_check_timeout(args),
                               **connection.client_kwargs())


def _check_timeout(args: argparse.Namespace) -> float:
    from .guard import JUDGE_TIMEOUT_SECONDS

    return JUDGE_TIMEOUT_SECONDS if args.check_timeout is None else args.check_timeout


def _session_limits(args: argparse.Namespace, listen):
    """--max-sessions, --session-idle-seconds and --max-sse-event-bytes (HTTP only), or an error
    message naming the flag."""
    from .http import MAX_SESSIONS, MAX_SSE_EVENT_BYTES, SESSION_IDLE_SECONDS, SessionLimits

    if listen is None:
        given = next((flag for flag, value in (("--max-sessions", args.max_sessions),
                                               ("--session-idle-seconds", args.session_idle_seconds),
                                               ("--max-sse-event-bytes", args.max_sse_event_bytes))
                      if value is not None), None)
        return f"{given} needs --listen (over stdio the proxy is one session)" if given else None
    most = MAX_SESSIONS if args.max_sessions is None else args.max_sessions
    idle = SESSION_IDLE_SECONDS if args.session_idle_seconds is None else args.session_idle_seconds
    event = MAX_SSE_EVENT_BYTES if args.max_sse_event_bytes is None else args.max_sse_event_bytes
    if not 1 <= most <= 10_000:
        return f"--max-sessions must be 1 to 10000, got {most}"
    if not (math.isfinite(idle) and 1 <= idle <= 86_400):
        return f"--session-idle-seconds must be 1 to 86400, got {idle:g}"
    if event < 0:
        return f"--max-sse-event-bytes must be 0 (no limit) or a number of bytes, got {event}"
    return SessionLimits(most, idle, event or None)


def main(args: argparse.Namespace) -> int:
    try:
        import anyio
        from mcp.client.stdio import StdioServerParameters
    except ImportError:
        _say(f"needs the MCP SDK: {INSTALL_HINT}")
        return 2
    command = list(args.command)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        _say("give the MCP server to start after --, e.g. loopwarden mcp-proxy -- npx my-mcp-server")
        return 2
    if args.check_timeout is not None and not (math.isfinite(args.check_timeout) and 0 < args.check_timeout <= 300):
        _say(f"--check-timeout must be a number of seconds above 0 and at most 300, got {args.check_timeout:g}")
        return 2
    run_id = args.run_id or f"mcp-proxy-{uuid.uuid4().hex[:12]}"
    judge = _judge(args)
    if isinstance(judge, str):
        _say(judge)
        return 2
    listen = None
    if args.listen:
        host, _, port = args.listen.rpartition(":")
        if not host or not port.isdigit():
            _say(f"--listen must be HOST:PORT, got {args.listen!r}")
            return 2
        listen = (host.strip("[]"), int(port))
    for flag, value in (("--max-params-bytes", args.max_params_bytes), ("--max-result-bytes", args.max_result_bytes)):
        if value is not None and value < 1:
            _say(f"{flag} must be a positive number of bytes, got {value}")
            return 2
    limits = _session_limits(args, listen)
    if isinstance(limits, str):
        _say(limits)
        return 2
    from .listener_auth import ListenerGate, security_from

    security = security_from(args)
    if isinstance(security, str):
        _say(security)
        return 2
    gate = None
    if listen is not None:
        try:
            gate = ListenerGate(security)
        except (OSError, ValueError) as exc:  # ssl.SSLError and TokenFileError are both
            _say(f"--listen: cannot load its token file or TLS files: {exc}")
            return 2
    # The child gets the proxy's whole environment (the SDK's default passes only a safe few).
    server = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))
    where = "in-process (offline)" if args.offline else f"the daemon at {args.address or 'the default address'}"
    _say(f"run {run_id}: guarding {' '.join(command)} with {where}")
    try:
        sizes = {name: value for name, value in (("max_params_bytes", args.max_params_bytes),
                                                 ("max_result_bytes", args.max_result_bytes)) if value is not None}
        return anyio.run(_serve, server, judge, args.fail_closed, _check_timeout(args), listen, run_id, gate, limits,
                         sizes)
    except OSError as exc:
        _say(f"cannot start {command[0]}: {exc.strerror or exc}")
        return 2
    except KeyboardInterrupt:
        return 0


async def _serve(server, make_judge, fail_closed: bool, timeout: float, listen: tuple[str, int] | None,
                 run_id: str, gate=None, limits=None, sizes=None) -> int:
    """Serve until the client is done; the exit status."""
    import anyio

    from .guard import ProxyGuard, SessionRun

    guard = ProxyGuard(make_judge(), fail_closed=fail_closed, timeout=timeout, **(sizes or {}))
    try:
        if listen is not None:
            from .http import serve_http

            await serve_http(*listen, server, guard, run_id=run_id, gate=gate, limits=limits,
                             on_listening=lambda url: _say(f"listening on {url}"))
            return 0
        from mcp.client.stdio import stdio_client
        from mcp.server.stdio import stdio_server

        from .relay import Relay
        from .stdio import StdoutLines, stdin_lines

        run = SessionRun(run_id)
        relay = Relay(guard, run)
        stdout = StdoutLines()
        try:
            # The SDK's stdio_server ends once stdin has and its output stream is closed; once the
            # relay is done (the client ended, or the server is gone) neither is worth waiting for.
            # It types its streams as anyio's AsyncFile; ours have the methods it calls (stdio.py).
            with anyio.CancelScope() as scope:
                async with stdio_client(server) as (server_read, server_write), \
                        stdio_server(stdin=await stdin_lines(stdout),  # type: ignore[arg-type]
                                     stdout=stdout) as (client_read, client_write):  # type: ignore[arg-type]
                    await relay.run(client_read, client_write, server_read, server_write)
                    await client_write.aclose()
                    scope.cancel()
        finally:
            stdout.drain()  # whatever the cancellation left unwritten: the errors the client is owed
            await guard.end(run)
        if relay.server_exited:
            _say(f"exiting with status {SERVER_EXITED_STATUS}: the MCP server is gone")
            return SERVER_EXITED_STATUS
        return 0
    finally:
        await guard.close()
