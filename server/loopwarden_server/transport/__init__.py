"""gRPC transport: the only server code that sees protobuf types; it converts at the edge."""
import grpc
from loopwarden.v1 import loopwarden_pb2 as pb
from loopwarden.v1 import loopwarden_pb2_grpc as pb_grpc

from .servicer import LoopDetectionServicer

SERVICE_NAME = pb.DESCRIPTOR.services_by_name["LoopDetectionService"].full_name


def register_servicer(servicer: LoopDetectionServicer, server: grpc.aio.Server) -> None:
    pb_grpc.add_LoopDetectionServiceServicer_to_server(servicer, server)


__all__ = ["SERVICE_NAME", "LoopDetectionServicer", "register_servicer"]
