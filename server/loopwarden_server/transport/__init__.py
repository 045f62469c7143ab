"""gRPC transport: the only server code that sees protobuf types; it converts at the edge."""
