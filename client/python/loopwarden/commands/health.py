"""`loopwarden health`: ask a daemon's standard gRPC health service; exit 0 when SERVING."""
from __future__ import annotations

import argparse
import sys

from ..connection import add_connection_arguments
from .common import EXIT_ERROR, connection_or_none, hint

LOOPWARDEN_SERVICE = "loopwarden.v1.LoopDetectionService"


def add(commands) -> None:
    health = commands.add_parser("health", help="ask a daemon's gRPC health service; exit 0 when SERVING")
    health.add_argument("--service", default="",
                        help=f'service name: "" (default) for the whole server, or {LOOPWARDEN_SERVICE}')
    health.add_argument("--timeout", type=float, default=3.0, help="seconds (default 3)")
    add_connection_arguments(health)
    health.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    import grpc
    try:
        from grpc_health.v1 import health_pb2, health_pb2_grpc
    except ImportError:
        print("error: `loopwarden health` needs grpcio-health-checking: pip install 'loopwarden-client[health]'",
              file=sys.stderr)
        return EXIT_ERROR
    connection = connection_or_none(args)
    if connection is None:
        return EXIT_ERROR
    address = connection.address
    if connection.tls:
        credentials = grpc.ssl_channel_credentials(connection.root_certificates, connection.private_key,
                                                   connection.certificate_chain)
        channel = grpc.secure_channel(address, credentials)
    else:
        channel = grpc.insecure_channel(address)
    # Health is open on a daemon that requires tokens, but a proxy in front of it may not be.
    metadata = (("authorization", f"Bearer {connection.token}"),) if connection.token else ()
    with channel:
        try:
            response = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=args.service), timeout=args.timeout, metadata=metadata)
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.NOT_FOUND:
                print(f"error: {address}: unknown health service {args.service!r}: the daemon reports "
                      f'"" (the whole server) and {LOOPWARDEN_SERVICE}', file=sys.stderr)
                return EXIT_ERROR
            print(f"{address}: {exc.code().name}: {exc.details()}", file=sys.stderr)
            advice = hint(exc.code().name, exc.details() or "", connection)
            if advice:
                print(f"hint: {advice}", file=sys.stderr)
            return 1
    status = health_pb2.HealthCheckResponse.ServingStatus.Name(response.status)
    print(f"{address} {args.service or '(server)'}: {status}")
    return 0 if response.status == health_pb2.HealthCheckResponse.SERVING else 1
