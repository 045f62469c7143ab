"""The daemon's hook listener that install-hooks writes into the entries, and whether it answers.

The order is the one the daemon itself follows when `make serve` starts it: its --url here (the
flag), then LOOPWARDEN_HOOKS_LISTEN (the daemon's own variable, which wins over the make variable),
then HOOKS_PORT (`make serve HOOKS_PORT=…`, which the README says to export when 50052 is taken),
then the default. A listener on a wildcard address (0.0.0.0, ::) is reached on loopback.
"""
from __future__ import annotations

import http.client
import os
import socket
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass

DEFAULT_LISTEN = "127.0.0.1:50052"
PROBE_TIMEOUT_SECONDS = 2.0
_WILDCARDS = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1", "[::]": "[::1]"}


class TargetError(ValueError):
    """A URL or a variable that cannot name the hook listener."""


@dataclass(frozen=True)
class Target:
    url: str
    why: str  # which setting chose it, said to the person


def _from_listen(listen: str, name: str) -> str:
    host, colon, port = listen.rpartition(":")
    if not colon or not port.isdigit() or not 0 < int(port) < 65536:
        raise TargetError(f"{name}={listen!r} is not HOST:PORT")
    host = _WILDCARDS.get(host, host)
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{port}"


def choose(flag: str, environ: Mapping[str, str] | None = None) -> Target:
    environ = os.environ if environ is None else environ
    if flag:
        return Target(flag.rstrip("/"), "--url")
    listen = environ.get("LOOPWARDEN_HOOKS_LISTEN", "").strip()
    if listen:
        return Target(_from_listen(listen, "LOOPWARDEN_HOOKS_LISTEN"), f"from LOOPWARDEN_HOOKS_LISTEN={listen}")
    port = environ.get("HOOKS_PORT", "").strip()
    if port:
        if not port.isdigit() or not 0 < int(port) < 65536:
            raise TargetError(f"HOOKS_PORT={port!r} is not a port number")
        return Target(f"http://127.0.0.1:{port}", f"from HOOKS_PORT={port}")
    return Target(_from_listen(DEFAULT_LISTEN, "default"),
                  "the default: no --url, LOOPWARDEN_HOOKS_LISTEN or HOOKS_PORT is set")


def probe(url: str, dialect: str, timeout: float = PROBE_TIMEOUT_SECONDS) -> str | None:
    """None when a loopwarden hook listener answers at `url`, else what was found instead.

    A GET on the dialect's path: the daemon answers it 405 (hook endpoints take POST) with
    `Server: loopwarden`, without evaluating anything, so the probe leaves no event behind."""
    parts = urllib.parse.urlsplit(url)
    try:
        port = parts.port or 80
    except ValueError:
        return f"{url!r} has no valid port"
    if not parts.hostname:
        return f"{url!r} names no host"
    connection = http.client.HTTPConnection(parts.hostname, port, timeout=timeout)
    try:
        connection.request("GET", parts.path.rstrip("/") + f"/v1/hooks/{dialect}")
        response = connection.getresponse()
        response.read()
    except ConnectionRefusedError:
        return "nothing listens there (connection refused)"
    except (TimeoutError, socket.timeout):
        return f"no answer within {timeout:g} s"
    except (http.client.HTTPException, ConnectionError) as exc:
        return f"what listens there does not answer plain HTTP ({type(exc).__name__}; a TLS listener? " \
               f"loopwarden-hook speaks plain http)"
    except OSError as exc:
        return f"cannot connect ({exc.strerror or exc})"
    finally:
        connection.close()
    server = response.getheader("Server", "")
    if server != "loopwarden":
        return f"an HTTP server answers there, but not loopwarden's hook listener (HTTP {response.status}" \
               + (f", Server: {server}" if server else "") + ")"
    return None
