"""A fault-injecting HTTP proxy for storage tests: sits between a client (CloudStore, sds,
sdsfs) and an object-store server on loopback (moto for S3, tests/python/gcs_server.py for
GCS), and fails a configurable share of requests.

    fault_proxy.py --upstream http://127.0.0.1:PORT [--rate 0.3] [--modes 503,reset_before]
                   [--delay-ms 200] [--seed N]

Prints the port it listens on (one line) once ready, then serves until killed.

Fault modes (one is drawn uniformly for each faulted request):

- ``503``, ``500``, ``429``: answered with that status and an XML error body (the shape S3 and
  the GCS XML API share); the request never reaches the server.
- ``reset_before``: the connection is reset (RST) before anything is forwarded.
- ``reset_after``: the request is forwarded (the server applies it), then the connection is
  reset instead of answering: the "lost response" case that makes non-idempotent retries
  dangerous.
- ``reset_mid``: forwarded; the status line, the headers and half the body are sent, then the
  connection is reset (a cut-off body).
- ``delay``: forwarded after ``delay_ms`` (not a failure; slows the request down).

Control endpoints (never faulted; S3 and GCS bucket names cannot start with ``_``):

- ``GET /__proxy/stats``: JSON counters: ``requests``, ``forwarded``, ``injected`` (per mode),
  ``in_flight``, ``max_in_flight``, and the request ``log`` when ``?log=1`` (paths decoded).
- ``POST /__proxy/config`` with a JSON body: any of ``rate``, ``modes``, ``delay_ms``,
  ``path_contains`` (fault only requests whose path contains it; "" for all), ``limit`` (inject
  at most this many more faults; null for no limit), ``latency_ms``
  (added to every forwarded request, to make overlap observable).
- ``POST /__proxy/reset``: zeroes the counters and the log.
"""

import argparse
import http.client
import json
import random
import socket
import struct
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
}
ALL_MODES = ["503", "500", "429", "reset_before", "reset_after", "reset_mid", "delay"]


class State:
    def __init__(self, rate, modes, delay_ms, seed):
        self.lock = threading.Lock()
        self.rng = random.Random(seed)
        self.rate = rate
        self.modes = modes
        self.delay_ms = delay_ms
        self.latency_ms = 0
        self.path_contains = ""
        self.limit = None
        self.reset()

    def reset(self):
        self.requests = 0
        self.forwarded = 0
        self.injected = {mode: 0 for mode in ALL_MODES}
        self.in_flight = 0
        self.max_in_flight = 0
        self.log = []
        self.started = time.monotonic()

    def configure(self, config):
        with self.lock:
            if "rate" in config:
                self.rate = float(config["rate"])
            if "modes" in config:
                modes = list(config["modes"])
                unknown = [m for m in modes if m not in ALL_MODES]
                if unknown:
                    raise ValueError(f"unknown fault modes {unknown}")
                self.modes = modes
            if "delay_ms" in config:
                self.delay_ms = int(config["delay_ms"])
            if "latency_ms" in config:
                self.latency_ms = int(config["latency_ms"])
            if "limit" in config:
                self.limit = None if config["limit"] is None else int(config["limit"])
            if "path_contains" in config:
                self.path_contains = str(config["path_contains"])

    def begin(self, entry):
        """Counts a request in and decides its fault (None for none)."""
        with self.lock:
            self.requests += 1
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            entry["seq"] = self.requests
            entry["start"] = time.monotonic() - self.started
            self.log.append(entry)
            if len(self.log) > 200_000:
                del self.log[:100_000]
            eligible = self.path_contains in entry["path"]
            if self.limit is not None and self.limit <= 0:
                eligible = False
            if eligible and self.modes and self.rng.random() < self.rate:
                if self.limit is not None:
                    self.limit -= 1
                mode = self.rng.choice(self.modes)
                self.injected[mode] += 1
                return mode
            return None

    def end(self, entry, forwarded):
        with self.lock:
            self.in_flight -= 1
            if forwarded:
                self.forwarded += 1
            entry["end"] = time.monotonic() - self.started

    def stats(self, with_log):
        with self.lock:
            out = {
                "requests": self.requests,
                "forwarded": self.forwarded,
                "injected": dict(self.injected),
                "faults": sum(v for k, v in self.injected.items() if k != "delay"),
                "in_flight": self.in_flight,
                "max_in_flight": self.max_in_flight,
            }
            if with_log:
                out["log"] = list(self.log)
            return out


class Upstream(threading.local):
    """One persistent connection to the server per proxy thread."""

    def __init__(self):
        self.conn = None


def make_handler(state, host, port):
    upstream = Upstream()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def setup(self):
            super().setup()
            # Headers and body go out in separate writes: without TCP_NODELAY, Nagle's
            # algorithm and the peer's delayed ACK stall every response by ~40 ms.
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def read_body(self):
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                body = b""
                while True:
                    size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                    if size == 0:
                        while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                            pass
                        return body
                    body += self.rfile.read(size)
                    self.rfile.readline()
            length = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(length) if length else b""

        def reset_connection(self):
            # SO_LINGER with a zero timeout turns close() into a TCP reset.
            self.connection.setsockopt(
                socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
            )
            self.close_connection = True
            try:
                self.connection.close()
            except OSError:
                pass

        def send_plain(self, status, body, content_type="application/json"):
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def control(self, body):
            parsed = urllib.parse.urlsplit(self.path)
            if parsed.path == "/__proxy/stats":
                with_log = "log=1" in parsed.query
                self.send_plain(200, json.dumps(state.stats(with_log)).encode())
            elif parsed.path == "/__proxy/config":
                try:
                    state.configure(json.loads(body or b"{}"))
                except (ValueError, TypeError) as e:
                    self.send_plain(400, str(e).encode(), "text/plain")
                    return
                self.send_plain(200, b"{}")
            elif parsed.path == "/__proxy/reset":
                with state.lock:
                    state.reset()
                self.send_plain(200, b"{}")
            else:
                self.send_plain(404, b"unknown control path", "text/plain")

        def forward(self, body):
            headers = {
                k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP
            }
            if body or self.command in ("PUT", "POST"):
                headers["Content-Length"] = str(len(body))
            for attempt in range(2):
                if upstream.conn is None:
                    upstream.conn = http.client.HTTPConnection(host, port, timeout=60)
                    upstream.conn.connect()
                    upstream.conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                try:
                    upstream.conn.request(self.command, self.path, body=body, headers=headers)
                    response = upstream.conn.getresponse()
                    data = response.read()
                    return response, data
                except (OSError, http.client.HTTPException):
                    upstream.conn.close()
                    upstream.conn = None
                    if attempt == 1:
                        raise
            raise RuntimeError("unreachable")

        def send_upstream(self, response, data, cut):
            self.send_response(response.status, response.reason)
            for k, v in response.getheaders():
                if k.lower() in HOP_BY_HOP or k.lower() == "content-length":
                    continue
                self.send_header(k, v)
            if self.command == "HEAD":
                length = response.getheader("Content-Length")
                if length is not None:
                    self.send_header("Content-Length", length)
            else:
                self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command == "HEAD":
                return
            if cut:
                self.wfile.write(data[: len(data) // 2])
                self.wfile.flush()
                self.reset_connection()
            else:
                self.wfile.write(data)

        def handle_any(self):
            body = self.read_body()
            if self.path.startswith("/__proxy/"):
                self.control(body)
                return
            parsed = urllib.parse.urlsplit(self.path)
            entry = {
                "method": self.command,
                # Decoded: GCS clients send the object name with "/" as %2F.
                "path": urllib.parse.unquote(parsed.path),
                "query": parsed.query,
                "range": self.headers.get("Range"),
                "body": len(body),
            }
            fault = state.begin(entry)
            entry["fault"] = fault
            forwarded = False
            try:
                if fault in ("503", "500", "429"):
                    code = {"503": "SlowDown", "500": "InternalError", "429": "SlowDown"}
                    xml = (
                        f"<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>{code[fault]}"
                        f"</Code><Message>injected by fault_proxy</Message></Error>"
                    ).encode()
                    entry["status"] = int(fault)
                    self.send_plain(int(fault), xml, "application/xml")
                    return
                if fault == "reset_before":
                    self.reset_connection()
                    return
                if fault == "delay":
                    time.sleep(state.delay_ms / 1000.0)
                if state.latency_ms:
                    time.sleep(state.latency_ms / 1000.0)
                response, data = self.forward(body)
                forwarded = True
                entry["status"] = response.status
                entry["bytes"] = len(data)
                if fault == "reset_after":
                    self.reset_connection()
                    return
                self.send_upstream(response, data, cut=fault == "reset_mid" and len(data) > 1)
            finally:
                state.end(entry, forwarded)

        do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = handle_any

    return Handler


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream", required=True)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--rate", type=float, default=0.0)
    parser.add_argument("--modes", default="503,reset_before")
    parser.add_argument("--delay-ms", type=int, default=200)
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args()
    upstream = urllib.parse.urlsplit(args.upstream)
    modes = [m for m in args.modes.split(",") if m]
    state = State(args.rate, [], args.delay_ms, args.seed)
    state.configure({"modes": modes})
    server = ThreadingHTTPServer(
        ("127.0.0.1", args.port), make_handler(state, upstream.hostname, upstream.port)
    )
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
