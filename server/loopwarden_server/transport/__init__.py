"""gRPC transport: the only server code that sees protobuf types; it converts at the edge."""
import grpc
from loopwarden.v1 import loopwarden_pb2 as pb

from .decode import message_decoder
from .servicer import LoopDetectionServicer

SERVICE_NAME = pb.DESCRIPTOR.services_by_name["LoopDetectionService"].full_name


def register_servicer(servicer: LoopDetectionServicer, server: grpc.aio.Server) -> None:
    """The service's handlers. Evaluate and Check have identity (de)serializers: the core decodes
    the request bytes (counting events before it parses) and writes the response bytes.
    InspectRun is decoded by our decoder (decode.py), so a bad request gets our status."""
    handlers = {
        "Evaluate": grpc.stream_stream_rpc_method_handler(servicer.Evaluate),
        "Check": grpc.unary_unary_rpc_method_handler(servicer.Check),
        "InspectRun": grpc.unary_unary_rpc_method_handler(
            servicer.InspectRun, request_deserializer=message_decoder(pb.InspectRunRequest, "request"),
            response_serializer=pb.InspectRunResponse.SerializeToString),
        "ListExemptions": grpc.unary_unary_rpc_method_handler(
            servicer.ListExemptions, request_deserializer=message_decoder(pb.ListExemptionsRequest, "request"),
            response_serializer=pb.ListExemptionsResponse.SerializeToString),
        "RevokeExemption": grpc.unary_unary_rpc_method_handler(
            servicer.RevokeExemption, request_deserializer=message_decoder(pb.RevokeExemptionRequest, "request"),
            response_serializer=pb.RevokeExemptionResponse.SerializeToString),
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE_NAME, handlers),))


__all__ = ["SERVICE_NAME", "LoopDetectionServicer", "register_servicer"]
