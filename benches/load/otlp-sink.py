#!/usr/bin/env python3
"""An OTLP/HTTP sink for benchmarks: answers every `POST /v1/traces` 200 with an
empty ExportTraceServiceResponse and counts the export requests and their bytes
(printed on SIGTERM/SIGINT). It decodes nothing: the tests' collector checks what
is sent (crates/oka-cli/tests/tracing.rs); this only lets `oka serve
--otlp-endpoint` export at full speed while its instructions are counted.

    python3 benches/load/otlp-sink.py PORT
"""
import http.server
import signal
import sys

requests = 0
received = 0


class Sink(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        global requests, received
        length = int(self.headers.get("content-length", "0"))
        received += len(self.rfile.read(length))
        requests += 1
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def stop(*_):
    print(f"otlp-sink: {requests} export requests, {received} bytes", flush=True)
    sys.exit(0)


signal.signal(signal.SIGTERM, stop)
signal.signal(signal.SIGINT, stop)
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Sink).serve_forever()
