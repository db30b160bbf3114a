#!/usr/bin/env python3
"""moto's S3, served one request at a time, on loopback, for tests.

Why not `moto_server` itself: moto applies a conditional `PUT` (`If-Match: ETAG`,
`If-None-Match: *`) as "check, then store" without holding anything across the two steps,
and `moto_server` runs every request on its own thread. Two writers conditioned on the same
ETag can then both pass the check and both store: an update is lost, and under load some
requests answer 500. Compare-and-swap tests against it fail by chance (a race test counted
30 of 32 increments once). Here one lock is held around moto's whole handling of a request
(body read, state change, response built), so the store is linearisable: of two `PUT`s
conditioned on the same ETag exactly one succeeds. Everything else is moto's own S3: SigV4
requests are accepted, multipart uploads, ranged `GET`, `HEAD`, listings and ETags behave
as in `moto_server`.

The connection handling stays threaded: a slow client sending its body does not hold the
lock (the body is read in full before the lock is taken), and one client's kept-alive
connection does not starve another's.

`--ignore-preconditions` makes the server *wrong on purpose*: `If-Match` and
`If-None-Match` are dropped from `PUT` and `POST` requests before moto sees them, and each
such write then waits `--write-delay-ms` (default 50) before it is applied, so readers in
between see the value it will overwrite. Tests use it to prove a lost-update detector can
fail.

Outside the S3 API, for tests only (S3 bucket names cannot start with `_`):
`GET /__test/stats` answers JSON counters: `requests`, `conditional_writes` (writes that
carried `If-Match` / `If-None-Match`), `preconditions_ignored`.

Usage: s3_server.py [--host 127.0.0.1] [--port 0] [--bucket NAME]... [--ignore-preconditions]
The first stdout line is `READY <port>` once the server accepts connections.
"""

import argparse
import io
import json
import sys
import threading
import time

from werkzeug.serving import make_server

from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)

PRECONDITIONS = ("HTTP_IF_MATCH", "HTTP_IF_NONE_MATCH")


class Serialised:
    """A WSGI middleware running the wrapped app for one request at a time."""

    def __init__(self, app, ignore_preconditions, write_delay):
        self.app = app
        self.lock = threading.Lock()
        self.ignore_preconditions = ignore_preconditions
        self.write_delay = write_delay
        self.counters = {"requests": 0, "conditional_writes": 0, "preconditions_ignored": 0}
        self.counters_lock = threading.Lock()

    def count(self, name):
        with self.counters_lock:
            self.counters[name] += 1

    def __call__(self, environ, start_response):
        if environ.get("PATH_INFO", "").startswith("/__test/"):
            return self.inspect(environ, start_response)
        self.count("requests")
        buffer_body(environ)
        conditional = environ["REQUEST_METHOD"] in ("PUT", "POST") and any(
            name in environ for name in PRECONDITIONS
        )
        if conditional:
            self.count("conditional_writes")
            if self.ignore_preconditions:
                for name in PRECONDITIONS:
                    environ.pop(name, None)
                self.count("preconditions_ignored")
                # Outside the lock: other clients read the old value meanwhile.
                time.sleep(self.write_delay)
        captured = {}

        def capture(status, headers, exc_info=None):
            captured["start"] = (status, headers, exc_info)
            return lambda data: captured.setdefault("written", []).append(data)

        with self.lock:
            # The whole response is built under the lock: moto may answer with a lazy body.
            chunks = self.app(environ, capture)
            try:
                body = b"".join(captured.get("written", [])) + b"".join(chunks)
            finally:
                close = getattr(chunks, "close", None)
                if close is not None:
                    close()
        status, headers, exc_info = captured["start"]
        start_response(status, headers, exc_info)
        return [body]

    def inspect(self, environ, start_response):
        if environ.get("PATH_INFO") != "/__test/stats":
            start_response("404 Not Found", [("Content-Type", "text/plain")])
            return [b"unknown test path"]
        with self.counters_lock:
            body = json.dumps(self.counters).encode()
        start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        return [body]


def buffer_body(environ):
    """Reads the request body now, so the lock is never held while a client is sending."""
    length = environ.get("CONTENT_LENGTH") or ""
    stream = environ["wsgi.input"]
    if length.isdigit():
        data = stream.read(int(length))
    elif environ.get("wsgi.input_terminated"):
        data = stream.read()
    else:
        data = b""
    environ["wsgi.input"] = io.BytesIO(data)
    environ["CONTENT_LENGTH"] = str(len(data))


def create_buckets(app, names):
    """Creates `names` through the served app, as a client would."""
    for name in names:
        environ = {
            "REQUEST_METHOD": "PUT",
            "PATH_INFO": "/" + name,
            "QUERY_STRING": "",
            "SERVER_NAME": "127.0.0.1",
            "SERVER_PORT": "80",
            "HTTP_HOST": "127.0.0.1",
            "wsgi.url_scheme": "http",
            "wsgi.input": io.BytesIO(b""),
            "wsgi.errors": sys.stderr,
            "CONTENT_LENGTH": "0",
        }
        answer = {}
        body = b"".join(app(environ, lambda status, headers, exc_info=None: answer.update(status=status)))
        if not answer.get("status", "").startswith("200"):
            sys.exit("s3_server: creating bucket %s: %s %r" % (name, answer.get("status"), body))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--bucket", action="append", default=[])
    parser.add_argument("--ignore-preconditions", action="store_true")
    parser.add_argument("--write-delay-ms", type=int, default=50)
    args = parser.parse_args()

    app = Serialised(
        DomainDispatcherApplication(create_backend_app),
        args.ignore_preconditions,
        args.write_delay_ms / 1000.0,
    )
    create_buckets(app, args.bucket)
    server = make_server(args.host, args.port, app, threaded=True, request_handler=MotoRequestHandler)
    print("READY %d" % server.server_address[1], flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
