"""What the daemon tells operators: Prometheus metrics and the per-call access log.

Both transports wrap every call in ``calls.observe`` (gRPC in
``sandboxd.transports.grpc.status``, HTTP in ``sandboxd.transports.http.observe``), so a call is
counted, timed and logged the same way whichever door it came in by.
"""
