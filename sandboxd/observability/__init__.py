"""What the daemon tells operators: Prometheus metrics and the per-call access log.

Both transports wrap every call in ``calls.observe`` (gRPC in
``sandboxd.grpc.status``, HTTP in ``sandboxd.http.observe``), so a call is
counted, timed and logged the same way whichever door it came in by.
"""
