"""OTLP receivers written for the tests, on loopback: what a daemon process exports arrives here.

`Received` flattens each span to a dict: service, name, ids, kind, attributes, its `loopwarden.verdict`
events' attributes (`events`) and every event as (name, attributes) (`all_events`)."""
from __future__ import annotations

import threading
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from loopwarden_server.tracing import VERDICT_EVENT
from tests.support.tracing import SERVICE


class Received:
    """Spans a receiver got, flattened (see the module docstring)."""

    def __init__(self) -> None:
        self.spans: list[dict] = []
        self._lock = threading.Lock()

    def add(self, request: trace_service_pb2.ExportTraceServiceRequest) -> None:
        with self._lock:
            for resource_spans in request.resource_spans:
                service = {a.key: a.value.string_value for a in resource_spans.resource.attributes}.get("service.name")
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        self.spans.append({
                            "service": service, "name": span.name, "trace_id": span.trace_id.hex(),
                            "span_id": span.span_id.hex(), "parent_span_id": span.parent_span_id.hex(),
                            "attributes": _attributes(span.attributes),
                            "events": [_attributes(event.attributes)
                                       for event in span.events if event.name == VERDICT_EVENT],
                            "all_events": [(event.name, _attributes(event.attributes)) for event in span.events]})

    def named(self, method: str, trace_id: int) -> list[dict]:
        with self._lock:
            return [span for span in self.spans if span["name"] == f"/{SERVICE}/{method}"
                    and span["trace_id"] == f"{trace_id:032x}"]


def _attributes(attributes) -> dict:
    return {a.key: _value(a.value) for a in attributes}


def _value(value):
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind else None


def http_receiver_running():
    """An OTLP/HTTP receiver: POST /v1/traces with an ExportTraceServiceRequest (protobuf).
    A generator for a fixture: yields (endpoint URL, Received)."""
    received = Received()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # the http.server hook's name
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if self.path != "/v1/traces":
                self.send_response(404)
                self.end_headers()
                return
            received.add(trace_service_pb2.ExportTraceServiceRequest.FromString(body))
            reply = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *_args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}", received
    server.shutdown()
    server.server_close()


def grpc_receiver_running():
    """An OTLP/gRPC receiver (opentelemetry.proto.collector.trace.v1.TraceService) on loopback,
    plaintext. A generator for a fixture: yields (host:port, Received)."""
    received = Received()

    class TraceService(trace_service_pb2_grpc.TraceServiceServicer):
        def Export(self, request, context):  # the service's method name
            received.add(request)
            return trace_service_pb2.ExportTraceServiceResponse()

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(TraceService(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield f"127.0.0.1:{port}", received
    server.stop(0)
