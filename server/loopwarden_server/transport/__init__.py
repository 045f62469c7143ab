"""gRPC transport: the only server code that sees protobuf types; it converts at the edge."""
import grpc
from loopwarden.v1 import loopwarden_pb2 as pb

from .decode import evaluate_request_decoder, message_decoder
from .servicer import LoopDetectionServicer

SERVICE_NAME = pb.DESCRIPTOR.services_by_name["LoopDetectionService"].full_name


def register_servicer(servicer: LoopDetectionServicer, server: grpc.aio.Server, *, max_events_per_request: int) -> None:
    """The service's handlers with our own request decoders (see decode.py), not the generated
    ones: a request is counted and checked before it is parsed, and a refusal gets our status."""
    handlers = {
        "Evaluate": grpc.stream_stream_rpc_method_handler(
            servicer.Evaluate, request_deserializer=evaluate_request_decoder(max_events_per_request),
            response_serializer=pb.EvaluateResponse.SerializeToString),
        "Check": grpc.unary_unary_rpc_method_handler(
            servicer.Check, request_deserializer=message_decoder(pb.CheckRequest, "request"),
            response_serializer=pb.CheckResponse.SerializeToString),
        "InspectRun": grpc.unary_unary_rpc_method_handler(
            servicer.InspectRun, request_deserializer=message_decoder(pb.InspectRunRequest, "request"),
            response_serializer=pb.InspectRunResponse.SerializeToString),
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE_NAME, handlers),))


__all__ = ["SERVICE_NAME", "LoopDetectionServicer", "register_servicer"]
