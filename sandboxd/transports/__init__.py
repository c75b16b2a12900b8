"""The doors to the service: gRPC (``grpc``) and HTTP/JSON (``http``).

Thin: each translates its wire (protobuf, JSON) to ``SandboxService`` calls
and the error tree to its statuses, and nothing else. They share only the
bearer-token check (``auth``) and never import each other.
"""
