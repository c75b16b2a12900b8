"""Generated gRPC code of proto package ``sandboxd.v1`` (``make proto``).

Do not edit the ``*_pb2*`` files: scripts/gen_proto.py writes them.
"""
