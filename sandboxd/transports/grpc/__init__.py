"""The gRPC transport: protobuf stays in this package."""
