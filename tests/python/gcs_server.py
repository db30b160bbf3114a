#!/usr/bin/env python3
"""A small Google Cloud Storage XML-API server for tests, on loopback.

It implements exactly what `object_store`'s GCS client (0.14) sends for the operations sdsfs
uses, with the semantics of a *versioned* GCS bucket:

- `GET` / `HEAD /BUCKET/KEY[?generation=N]`: the live object, or generation N of it (live or
  not). `Range: bytes=a-b`, `bytes=a-` and `bytes=-n` give 206 with `Content-Range`; a range
  starting at or past the end gives 416. Responses carry `ETag` (the MD5, quoted),
  `Last-Modified`, `Content-Length`, `x-goog-generation`, `x-goog-metageneration`,
  `x-goog-stored-content-length` and `x-goog-hash`.
- `PUT /BUCKET/KEY`: a new generation. `x-goog-if-generation-match: 0` means "only if there is
  no live object", `x-goog-if-generation-match: N` "only if the live generation is N"; a failed
  precondition is 412 and changes nothing. `x-goog-copy-source: BUCKET/KEY` copies.
- `DELETE /BUCKET/KEY[?generation=N]`: makes the live object noncurrent (its generations stay
  readable), or removes generation N for good.
- XML multipart uploads, as `object_store`'s `MultipartStore` sends them: `POST
  /BUCKET/KEY?uploads` answers an `InitiateMultipartUploadResult` with a fresh `UploadId`;
  `PUT /BUCKET/KEY?partNumber=N&uploadId=U` stores part N (replacing an earlier one) and
  answers its `ETag`; `POST /BUCKET/KEY?uploadId=U` with a `CompleteMultipartUpload` body
  (parts in ascending order, each `ETag` matching the stored part, all but the last at least
  5 MiB) makes the concatenation a new generation and answers a
  `CompleteMultipartUploadResult`; `DELETE /BUCKET/KEY?uploadId=U` aborts. An unknown upload
  is 404 `NoSuchUpload`, a wrong part list 400 `InvalidPart` / `InvalidPartOrder` /
  `EntityTooSmall`.
- `PUT /BUCKET` creates a bucket (also `--bucket NAME` at start).
- `--seed FILE` (repeatable) loads objects at exact generations before serving, so a dataset
  whose documents pin generations (like one `signal-dataset` 0.2.3 wrote) can be served as it
  was written. FILE is `{"objects": {"gs://BUCKET/KEY": {"generation": N, "payload": BASE64}}}`
  (the shape of the library's `tests/data/legacy-0.2.3-gcs.json`); buckets are created as
  needed, each object is live at generation N, and later writes get larger generations.
- Outside the API, for tests only and without authentication (GCS bucket names cannot start
  with `_`): `GET /__test/objects?bucket=B&prefix=P` lists the live keys under P and the
  open multipart uploads as JSON; `GET /__test/requests` lists every authenticated object
  request so far as JSON (`method`, `bucket`, `key`, `generation`: the `generation=` asked for,
  or null), so a test can tell which reads were pinned; `POST /__test/requests/reset` empties it;
  `GET /__test/stats` counts object `PUT`s that carried generation preconditions
  (`conditional_writes`) and those whose preconditions were ignored (`preconditions_ignored`).
- `--ignore-preconditions` makes the server wrong on purpose: object `PUT`s apply whatever their
  `x-goog-if-generation-*` headers say, each after `--write-delay-ms` (default 50) spent outside
  the lock, so compare-and-swap loses updates. Tests use it to prove a lost-update check can fail.

Every generation of every object is kept. One lock serialises all state, so concurrent
conditional writers see a linearisable store: of two PUTs conditioned on the same generation,
exactly one succeeds.

Authentication is real: with `--credentials-out PATH` the server writes a service-account key
file (a fresh RSA key) to PATH and then accepts only requests whose `Authorization: Bearer` is
a JWT signed with that key, naming that key id and account; that is what `object_store` sends
when pointed at the file with `GOOGLE_APPLICATION_CREDENTIALS`.

JSON API (google-cloud-storage 3, for `signal-dataset`'s own gs:// store): `POST
/upload/storage/v1/b/B/o?uploadType=multipart` (with `ifGenerationMatch`, checking a sent
`crc32c`/`md5Hash`), `GET /storage/v1/b/B/o/K` (object metadata), `GET
/download/storage/v1/b/B/o/K?alt=media` (media, `x-goog-hash` with CRC32C), `GET
/storage/v1/b/B/o/K?alt=media` (the same, ranged, as ArrayRecord's native `gs://` reader asks for
shards), `generation=N` on reads, and `GET /storage/v1/b/B` (bucket metadata); errors as JSON.
`--allow-anonymous` also serves requests without `Authorization` (google-cloud-storage sends none
once `STORAGE_EMULATOR_HOST` is set, nor ArrayRecord's reader under
`CLOUD_STORAGE_EMULATOR_ENDPOINT`); a token that is sent is still checked.

Not implemented (used neither by sdsfs nor by the library's reads and writes): listing,
resumable uploads; those answer 501 so a new use shows up as a clear failure rather than a
silent wrong answer.

Usage: gcs_server.py [--host 127.0.0.1] [--port 0] [--bucket NAME]... [--seed FILE]...
                     [--credentials-out PATH] [--ignore-preconditions [--write-delay-ms N]]
The first stdout line is `READY <port>` once the server accepts connections.
"""

import argparse
import base64
import email.utils
import hashlib
import json
import os
import re
import sys
import threading
import time
import urllib.parse
from xml.etree import ElementTree
from xml.sax.saxutils import escape
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Version:
    """One stored generation of an object."""

    def __init__(self, data, generation, content_type="application/octet-stream"):
        self.data = data
        self.generation = generation
        self.content_type = content_type
        self.md5 = hashlib.md5(data).digest()
        self.created = time.time()
        self.modified = email.utils.formatdate(self.created, usegmt=True)

    def etag(self):
        return '"%s"' % self.md5.hex()

    def crc32c(self):
        """Base64 of the big-endian CRC32C, as the JSON API reports it. Computed only for the
        JSON API, whose one client here (google-cloud-storage) depends on google-crc32c."""
        import google_crc32c

        return base64.b64encode(google_crc32c.value(self.data).to_bytes(4, "big")).decode()


class Store:
    """Buckets of versioned objects behind one lock."""

    def __init__(self):
        self.lock = threading.Lock()
        self.buckets = {}  # bucket -> key -> {"versions": {gen: Version}, "live": gen or None}
        self.uploads = {}  # upload id -> {"bucket", "key", "parts": {number: bytes}}
        self.last_generation = 0
        self.requests = []  # {"method", "bucket", "key", "generation"} of each object request
        self.stats = {"conditional_writes": 0, "preconditions_ignored": 0}

    def next_generation(self):
        # Like GCS: microseconds since the epoch, strictly increasing.
        self.last_generation = max(self.last_generation + 1, int(time.time() * 1e6))
        return self.last_generation

    def create_bucket(self, name):
        with self.lock:
            if name in self.buckets:
                return False
            self.buckets[name] = {}
            return True

    def seed(self, path):
        """Loads the objects of the seed file `path` at their generations (see the module doc)."""
        with open(path) as f:
            document = json.load(f)
        objects = document.get("objects") if isinstance(document, dict) else None
        if not isinstance(objects, dict):
            raise ValueError("%s: no \"objects\" mapping" % path)
        for uri, entry in objects.items():
            bucket, key = split_gs_uri(path, uri)
            generation = entry.get("generation") if isinstance(entry, dict) else None
            if not isinstance(generation, int) or isinstance(generation, bool) or generation <= 0:
                raise ValueError("%s: %s: \"generation\" must be a positive integer" % (path, uri))
            try:
                data = base64.b64decode(entry.get("payload", ""), validate=True)
            except (TypeError, ValueError) as e:
                raise ValueError("%s: %s: \"payload\" is not base64: %s" % (path, uri, e))
            with self.lock:
                entry = self.buckets.setdefault(bucket, {}).setdefault(key, {"versions": {}, "live": None})
                entry["versions"][generation] = Version(data, generation)
                if entry["live"] is None or generation > entry["live"]:
                    entry["live"] = generation
                self.last_generation = max(self.last_generation, generation)


def split_gs_uri(path, uri):
    """(bucket, key) of `gs://BUCKET/KEY` in the seed file `path`."""
    rest = uri[len("gs://"):] if uri.startswith("gs://") else None
    bucket, _, key = (rest or "").partition("/")
    if not bucket or not key:
        raise ValueError("%s: %r is not gs://BUCKET/KEY" % (path, uri))
    return bucket, key


JSON_API_PREFIXES = ("/storage/v1/", "/download/storage/v1/", "/upload/storage/v1/")
JSON_OBJECT = re.compile(r"^/(download/)?storage/v1/b/([^/]+)/o/([^/]+)$")
JSON_UPLOAD = re.compile(r"^/upload/storage/v1/b/([^/]+)/o$")
JSON_BUCKET = re.compile(r"^/storage/v1/b/([^/]+)$")
#: The JSON API's error `reason` for each status this server answers.
JSON_REASONS = {400: "invalid", 401: "required", 404: "notFound", 412: "conditionNotMet", 416: "requestedRangeNotSatisfiable", 501: "notImplemented"}
GENERATION_PRECONDITIONS = ("x-goog-if-generation-match", "x-goog-if-generation-not-match")


class Failure(Exception):
    def __init__(self, status, code, message, headers=()):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = list(headers)


def parse_range(header, size):
    """(start, end_exclusive) of a `bytes=` range over `size` bytes; None for the whole body."""
    if header is None:
        return None
    unit, _, spec = header.partition("=")
    if unit.strip() != "bytes" or "," in spec:
        raise Failure(400, "InvalidArgument", "unsupported Range %r" % header)
    first, _, last = spec.strip().partition("-")
    try:
        if first == "":
            count = int(last)
            return (max(size - count, 0), size) if size else unsatisfiable(size)
        start = int(first)
        end = int(last) + 1 if last else size
    except ValueError:
        raise Failure(400, "InvalidArgument", "malformed Range %r" % header)
    if start >= size or end <= start:
        unsatisfiable(size)
    return start, min(end, size)


def unsatisfiable(size):
    raise Failure(
        416,
        "InvalidRange",
        "The requested range cannot be satisfied (size %d)." % size,
        [("Content-Range", "bytes */%d" % size)],
    )


class JsonApi:
    """The JSON-API requests google-cloud-storage 3 sends for what `signal-dataset`'s GCS store
    does (a mixin of `Handler`, sharing its store, preconditions and request log)."""

    def json_request(self, method):
        parsed = urllib.parse.urlsplit(self.path)
        query = dict(urllib.parse.parse_qsl(parsed.query, keep_blank_values=True))
        upload = JSON_UPLOAD.match(parsed.path)
        found = JSON_OBJECT.match(parsed.path)
        bucket_only = JSON_BUCKET.match(parsed.path)
        if upload is not None and method == "POST":
            bucket = urllib.parse.unquote(upload.group(1))
            self.json_upload(bucket, query)
        elif bucket_only is not None and method == "GET":
            self.json_bucket(urllib.parse.unquote(bucket_only.group(1)))
        elif found is not None and method in ("GET", "HEAD"):
            bucket, key = (urllib.parse.unquote(found.group(i)) for i in (2, 3))
            self.record(method, bucket, key, query)
            if found.group(1) or query.get("alt") == "media":
                self.object_get(bucket, key, query, head=method == "HEAD")
            else:
                self.json_metadata(bucket, key, query)
        else:
            raise Failure(501, "NotImplemented", "JSON API %s %s is not implemented by the test server" % (method, parsed.path))

    def json_metadata(self, bucket, key, query):
        with self.server.store.lock:
            _, version = self.selected(bucket, key, query)
            self.check_generation_preconditions(version.generation)
        self.json_reply(200, self.json_resource(bucket, key, version))

    def json_bucket(self, bucket):
        """Bucket metadata (google-cloud-storage asks for it while the library reads)."""
        with self.server.store.lock:
            self.objects(bucket)
        self.json_reply(200, {
            "kind": "storage#bucket", "id": bucket, "name": bucket, "projectNumber": "1",
            "metageneration": "1", "location": "US", "storageClass": "STANDARD",
            "locationType": "multi-region", "etag": "CAE=", "versioning": {"enabled": True},
            "timeCreated": "2026-01-01T00:00:00.000Z", "updated": "2026-01-01T00:00:00.000Z",
        })

    def json_upload(self, bucket, query):
        """`uploadType=multipart`: a JSON metadata part, then the media part."""
        if query.get("uploadType") != "multipart":
            raise Failure(501, "NotImplemented", "uploadType %r (only multipart)" % query.get("uploadType"))
        metadata, data = self.multipart_related()
        key = metadata.get("name") or query.get("name")
        if not key:
            raise Failure(400, "InvalidArgument", "the upload names no object")
        self.check_upload_hashes(metadata, data)
        self.record("POST", bucket, key, query)
        store = self.server.store
        ignore = self.conditional_write()
        content_type = metadata.get("contentType", "application/octet-stream")
        with store.lock:
            entry = self.objects(bucket).setdefault(key, {"versions": {}, "live": None})
            if not ignore:
                self.check_generation_preconditions(entry["live"])
            version = Version(data, store.next_generation(), content_type)
            entry["versions"][version.generation] = version
            entry["live"] = version.generation
        self.json_reply(200, self.json_resource(bucket, key, version))

    def multipart_related(self):
        """(metadata, media) of a `multipart/related` body."""
        found = re.search(r'boundary="?([^";]+)"?', self.headers.get("Content-Type", ""))
        if found is None:
            raise Failure(400, "InvalidArgument", "a multipart upload without a boundary")
        parts = self.payload.split(b"--" + found.group(1).encode())
        if len(parts) != 4 or parts[3].strip() != b"--":
            raise Failure(400, "InvalidArgument", "a multipart upload needs exactly two parts")
        bodies = []
        for part in parts[1:3]:
            head, separator, body = part.partition(b"\r\n\r\n")
            if not separator or not body.endswith(b"\r\n"):
                raise Failure(400, "InvalidArgument", "a malformed multipart part")
            bodies.append(body[:-2])
        try:
            metadata = json.loads(bodies[0])
        except ValueError:
            raise Failure(400, "InvalidArgument", "the metadata part is not JSON")
        return metadata, bodies[1]

    def check_upload_hashes(self, metadata, data):
        """A `crc32c` or `md5Hash` the client sends must match the media, as GCS checks."""
        version = Version(data, 0)
        for field, actual in (("crc32c", version.crc32c), ("md5Hash", lambda: base64.b64encode(version.md5).decode())):
            if field in metadata and metadata[field] != actual():
                raise Failure(400, "InvalidArgument", "Provided %s %r doesn't match calculated %r" % (field, metadata[field], actual()))

    def json_resource(self, bucket, key, version):
        base = "http://%s" % self.headers.get("Host", "")
        quoted = "b/%s/o/%s" % (urllib.parse.quote(bucket, safe=""), urllib.parse.quote(key, safe=""))
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(version.created))
        stamp += ".%03dZ" % (int(version.created * 1000) % 1000)
        return {
            "kind": "storage#object",
            "id": "%s/%s/%d" % (bucket, key, version.generation),
            "selfLink": "%s/storage/v1/%s" % (base, quoted),
            "mediaLink": "%s/download/storage/v1/%s?generation=%d&alt=media" % (base, quoted, version.generation),
            "name": key,
            "bucket": bucket,
            "generation": str(version.generation),
            "metageneration": "1",
            "contentType": version.content_type,
            "storageClass": "STANDARD",
            "size": str(len(version.data)),
            "md5Hash": base64.b64encode(version.md5).decode(),
            "crc32c": version.crc32c(),
            "etag": version.etag().strip('"'),
            "timeCreated": stamp,
            "updated": stamp,
        }

    def json_reply(self, status, document, head=False):
        body = json.dumps(document).encode()
        self.reply(status, [("Content-Type", "application/json; charset=UTF-8")], body, head)

    def json_fail(self, failure, head=False):
        error = {"message": failure.message, "domain": "global", "reason": JSON_REASONS.get(failure.status, "invalid")}
        self.send_response(failure.status)
        for name, value in failure.headers:
            self.send_header(name, value)
        body = json.dumps({"error": {"code": failure.status, "message": failure.message, "errors": [error]}}).encode()
        self.send_header("Content-Type", "application/json; charset=UTF-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head:
            self.wfile.write(body)


class Handler(JsonApi, BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "sds-test-gcs"
    # Headers and body go out in separate writes; with Nagle's algorithm on, each response on a
    # kept-alive connection would wait for the client's delayed ACK (~40 ms).
    disable_nagle_algorithm = True

    # -- plumbing -------------------------------------------------------------------------

    def log_message(self, fmt, *args):
        if self.server.verbose:
            sys.stderr.write("gcs_server: " + (fmt % args) + "\n")

    def body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def reply(self, status, headers=(), body=b"", head=False, length=None):
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body) if length is None else length))
        self.end_headers()
        if not head and body:
            self.wfile.write(body)

    def fail(self, failure, head=False):
        if self.json_api:
            self.json_fail(failure, head)
            return
        text = (
            "<?xml version='1.0' encoding='UTF-8'?><Error><Code>%s</Code><Message>%s</Message></Error>"
            % (failure.code, failure.message)
        ).encode()
        headers = [("Content-Type", "application/xml; charset=UTF-8")] + failure.headers
        self.reply(failure.status, headers, text, head)

    def target(self):
        """(bucket, key or None, query dict) of the request line."""
        parsed = urllib.parse.urlsplit(self.path)
        query = dict(urllib.parse.parse_qsl(parsed.query, keep_blank_values=True))
        parts = parsed.path.lstrip("/").split("/", 1)
        bucket = urllib.parse.unquote(parts[0])
        key = urllib.parse.unquote(parts[1]) if len(parts) == 2 and parts[1] else None
        return bucket, key, query

    def dispatch(self, method):
        head = method == "HEAD"
        # The body is read before anything can fail, so a refused request leaves a kept-alive
        # connection ready for the next one.
        self.payload = self.body() if method in ("PUT", "POST") else b""
        self.json_api = self.path.startswith(JSON_API_PREFIXES)
        try:
            if self.path.startswith("/__test/"):
                self.inspect()
                return
            self.authenticate()
            if self.json_api:
                self.json_request(method)
                return
            bucket, key, query = self.target()
            if bucket == "" or bucket == "storage":
                raise Failure(501, "NotImplemented", "%s %s is not implemented by the test server" % (method, self.path))
            if key is None:
                self.bucket_request(method, bucket, query, head)
            elif "uploads" in query or "uploadId" in query:
                self.multipart(method, bucket, key, query)
            else:
                self.record(method, bucket, key, query)
                getattr(self, "object_" + method.lower())(bucket, key, query)
        except Failure as failure:
            self.fail(failure, head)

    def record(self, method, bucket, key, query):
        """Logs an object request for `GET /__test/requests`."""
        wanted = query.get("generation")
        generation = int(wanted) if wanted is not None and wanted.isdigit() else wanted
        entry = {
            "method": method,
            "bucket": bucket,
            "key": key,
            "generation": generation,
            "api": "json" if self.json_api else "xml",
            "anonymous": "Authorization" not in self.headers,
        }
        with self.server.store.lock:
            self.server.store.requests.append(entry)

    def inspect(self):
        """The `/__test/` endpoints of the module doc (tests only)."""
        parsed = urllib.parse.urlsplit(self.path)
        query = dict(urllib.parse.parse_qsl(parsed.query, keep_blank_values=True))
        store = self.server.store
        if parsed.path == "/__test/requests":
            with store.lock:
                body = json.dumps(store.requests).encode()
            self.reply(200, [("Content-Type", "application/json")], body)
            return
        if parsed.path == "/__test/stats":
            with store.lock:
                body = json.dumps(store.stats).encode()
            self.reply(200, [("Content-Type", "application/json")], body)
            return
        if parsed.path == "/__test/requests/reset":
            with store.lock:
                store.requests.clear()
            self.reply(200)
            return
        if parsed.path != "/__test/objects":
            raise Failure(404, "NoSuchKey", "unknown test path %s" % parsed.path)
        prefix = query.get("prefix", "")
        with store.lock:
            objects = self.objects(query.get("bucket", ""))
            keys = sorted(k for k, e in objects.items() if e["live"] is not None and k.startswith(prefix))
            uploads = sorted(u["key"] for u in store.uploads.values())
        body = json.dumps({"keys": keys, "uploads": uploads}).encode()
        self.reply(200, [("Content-Type", "application/json")], body)

    do_GET = lambda self: self.dispatch("GET")  # noqa: E731
    do_HEAD = lambda self: self.dispatch("HEAD")  # noqa: E731
    do_PUT = lambda self: self.dispatch("PUT")  # noqa: E731
    do_DELETE = lambda self: self.dispatch("DELETE")  # noqa: E731
    do_POST = lambda self: self.dispatch("POST")  # noqa: E731

    # -- authentication -------------------------------------------------------------------

    def authenticate(self):
        account = self.server.account
        if account is None:
            return
        if self.server.allow_anonymous and "Authorization" not in self.headers:
            return
        header = self.headers.get("Authorization", "")
        if not header.startswith("Bearer "):
            raise Failure(401, "AuthenticationRequired", "no bearer token")
        account.verify(header[len("Bearer "):].strip())

    # -- buckets --------------------------------------------------------------------------

    def bucket_request(self, method, bucket, query, head):
        if method == "PUT":
            if not self.server.store.create_bucket(bucket):
                raise Failure(409, "BucketAlreadyOwnedByYou", "bucket %s exists" % bucket)
            self.reply(200)
            return
        raise Failure(501, "NotImplemented", "bucket-level %s (listing) is not implemented" % method)

    def objects(self, bucket):
        objects = self.server.store.buckets.get(bucket)
        if objects is None:
            raise Failure(404, "NoSuchBucket", "The specified bucket does not exist.")
        return objects

    # -- objects --------------------------------------------------------------------------

    def selected(self, bucket, key, query):
        """The version a read or delete names: `generation=N`, or the live one."""
        entry = self.objects(bucket).get(key)
        wanted = query.get("generation")
        if entry is not None:
            if wanted is None and entry["live"] is not None:
                return entry, entry["versions"][entry["live"]]
            if wanted is not None and wanted.isdigit() and int(wanted) in entry["versions"]:
                return entry, entry["versions"][int(wanted)]
        raise Failure(404, "NoSuchKey", "No such object: %s/%s" % (bucket, key))

    def generation_preconditions(self):
        """(match, not-match) as the request gives them: `x-goog-if-generation-*` headers on
        the XML API, `ifGeneration*` query parameters on the JSON API."""
        if self.json_api:
            query = self.target()[2]
            return query.get("ifGenerationMatch"), query.get("ifGenerationNotMatch")
        return tuple(self.headers.get(h) for h in GENERATION_PRECONDITIONS)

    def check_generation_preconditions(self, live):
        """The generation preconditions against the live generation (0: none)."""
        current = 0 if live is None else live
        match, not_match = self.generation_preconditions()
        for header, value, holds in (
            ("if-generation-match", match, lambda wanted: wanted == current),
            ("if-generation-not-match", not_match, lambda wanted: wanted != current),
        ):
            if value is None:
                continue
            if not value.isdigit():
                raise Failure(400, "InvalidArgument", "%s: %r is not a generation" % (header, value))
            if not holds(int(value)):
                raise Failure(412, "PreconditionFailed", "At least one of the pre-conditions you specified did not hold.")

    def object_headers(self, version):
        return [
            ("ETag", version.etag()),
            ("Last-Modified", version.modified),
            ("x-goog-generation", str(version.generation)),
            ("x-goog-metageneration", "1"),
            ("x-goog-stored-content-length", str(len(version.data))),
            ("x-goog-stored-content-encoding", "identity"),
            ("x-goog-hash", self.hashes(version)),
            ("Content-Type", version.content_type),
            ("Accept-Ranges", "bytes"),
        ]

    def hashes(self, version):
        """`x-goog-hash`: the MD5, and on the JSON API also the CRC32C (which
        google-cloud-storage checks a download against)."""
        md5 = "md5=" + base64.b64encode(version.md5).decode()
        return "crc32c=%s,%s" % (version.crc32c(), md5) if self.json_api else md5

    def object_get(self, bucket, key, query, head=False):
        with self.server.store.lock:
            _, version = self.selected(bucket, key, query)
            self.check_generation_preconditions(version.generation)
        headers = self.object_headers(version)
        size = len(version.data)
        span = parse_range(self.headers.get("Range"), size)
        if span is None:
            self.reply(200, headers, version.data, head, size)
            return
        start, end = span
        headers.append(("Content-Range", "bytes %d-%d/%d" % (start, end - 1, size)))
        self.reply(206, headers, version.data[start:end], head, end - start)

    def object_head(self, bucket, key, query):
        self.object_get(bucket, key, query, head=True)

    def object_put(self, bucket, key, query):
        data = self.payload
        source = self.headers.get("x-goog-copy-source")
        store = self.server.store
        ignore = self.conditional_write()
        with store.lock:
            objects = self.objects(bucket)
            if source is not None:
                src_bucket, _, src_key = urllib.parse.unquote(source).lstrip("/").partition("/")
                _, copied = self.selected(src_bucket, src_key, {})
                data = copied.data
            entry = objects.setdefault(key, {"versions": {}, "live": None})
            if not ignore:
                self.check_generation_preconditions(entry["live"])
            version = Version(data, store.next_generation())
            entry["versions"][version.generation] = version
            entry["live"] = version.generation
        self.reply(200, self.object_headers(version))

    def conditional_write(self):
        """Counts a write carrying generation preconditions; True when they are to be ignored
        (`--ignore-preconditions`), after the write delay, spent outside the lock so that
        other clients read the value this write will overwrite."""
        store = self.server.store
        if all(value is None for value in self.generation_preconditions()):
            return False
        ignore = self.server.ignore_preconditions
        with store.lock:
            store.stats["conditional_writes"] += 1
            store.stats["preconditions_ignored"] += int(ignore)
        if ignore:
            time.sleep(self.server.write_delay)
        return ignore

    def object_delete(self, bucket, key, query):
        with self.server.store.lock:
            entry, version = self.selected(bucket, key, query)
            self.check_generation_preconditions(entry["live"])
            if "generation" in query:
                del entry["versions"][version.generation]
                if entry["live"] == version.generation:
                    entry["live"] = None
            else:
                entry["live"] = None
        self.reply(204)

    def object_post(self, bucket, key, query):
        raise Failure(501, "NotImplemented", "POST on objects is only for multipart uploads")

    # -- XML multipart uploads ------------------------------------------------------------

    MIN_PART = 5 << 20

    def multipart(self, method, bucket, key, query):
        if method == "POST" and "uploads" in query:
            self.multipart_initiate(bucket, key)
        elif method == "PUT" and "partNumber" in query:
            self.multipart_part(bucket, key, query)
        elif method == "POST":
            self.multipart_complete(bucket, key, query)
        elif method == "DELETE":
            with self.server.store.lock:
                self.upload(bucket, key, query)
                del self.server.store.uploads[query["uploadId"]]
            self.reply(204)
        else:
            raise Failure(400, "InvalidArgument", "%s with multipart parameters" % method)

    def upload(self, bucket, key, query):
        """The open upload `uploadId` names, which must be for this object (lock held)."""
        upload = self.server.store.uploads.get(query.get("uploadId"))
        if upload is None or (upload["bucket"], upload["key"]) != (bucket, key):
            raise Failure(404, "NoSuchUpload", "The requested upload was not found.")
        return upload

    def multipart_initiate(self, bucket, key):
        store = self.server.store
        upload_id = base64.urlsafe_b64encode(os.urandom(18)).decode()
        with store.lock:
            self.objects(bucket)
            store.uploads[upload_id] = {"bucket": bucket, "key": key, "parts": {}}
        body = (
            "<?xml version='1.0' encoding='UTF-8'?><InitiateMultipartUploadResult>"
            "<Bucket>%s</Bucket><Key>%s</Key><UploadId>%s</UploadId>"
            "</InitiateMultipartUploadResult>" % (escape(bucket), escape(key), upload_id)
        ).encode()
        self.reply(200, [("Content-Type", "application/xml")], body)

    def multipart_part(self, bucket, key, query):
        number = query["partNumber"]
        if not number.isdigit() or not 1 <= int(number) <= 10000:
            raise Failure(400, "InvalidArgument", "partNumber %r" % number)
        data = self.payload
        with self.server.store.lock:
            self.upload(bucket, key, query)["parts"][int(number)] = data
        self.reply(200, [("ETag", '"%s"' % hashlib.md5(data).hexdigest())])

    def multipart_complete(self, bucket, key, query):
        try:
            listed = [
                (int(part.findtext("PartNumber")), part.findtext("ETag").strip())
                for part in ElementTree.fromstring(self.payload).findall("Part")
            ]
        except (ElementTree.ParseError, TypeError, ValueError, AttributeError):
            raise Failure(400, "MalformedXML", "not a CompleteMultipartUpload document")
        store = self.server.store
        with store.lock:
            upload = self.upload(bucket, key, query)
            data = self.assemble(upload["parts"], listed)
            entry = self.objects(bucket).setdefault(key, {"versions": {}, "live": None})
            version = Version(data, store.next_generation())
            entry["versions"][version.generation] = version
            entry["live"] = version.generation
            del store.uploads[query["uploadId"]]
        body = (
            "<?xml version='1.0' encoding='UTF-8'?><CompleteMultipartUploadResult>"
            "<Location>http://%s/%s/%s</Location><Bucket>%s</Bucket><Key>%s</Key>"
            "<ETag>%s</ETag></CompleteMultipartUploadResult>"
            % (self.headers.get("Host", ""), escape(bucket), escape(key), escape(bucket), escape(key), escape(version.etag()))
        ).encode()
        headers = [("Content-Type", "application/xml"), ("x-goog-generation", str(version.generation))]
        self.reply(200, headers, body)

    def assemble(self, parts, listed):
        """The object the listed `(number, etag)` parts make, checked as GCS checks them."""
        if not listed:
            raise Failure(400, "InvalidArgument", "a multipart upload needs at least one part")
        numbers = [number for number, _ in listed]
        if numbers != sorted(set(numbers)):
            raise Failure(400, "InvalidPartOrder", "parts must be listed in ascending order")
        chunks = []
        for i, (number, etag) in enumerate(listed):
            data = parts.get(number)
            if data is None or etag.strip('"') != hashlib.md5(data).hexdigest():
                raise Failure(400, "InvalidPart", "part %d is missing or its ETag differs" % number)
            if i + 1 < len(listed) and len(data) < self.MIN_PART:
                raise Failure(400, "EntityTooSmall", "part %d is smaller than 5 MiB" % number)
            chunks.append(data)
        return b"".join(chunks)


class Account:
    """A generated service-account key; verifies the RS256 JWTs signed with it."""

    EMAIL = "sds-test@sds-test.iam.gserviceaccount.com"

    def __init__(self, path, port):
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa

        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.public_key = key.public_key()
        self.key_id = hashlib.sha256(os.urandom(16)).hexdigest()[:40]
        pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ).decode()
        document = {
            "type": "service_account",
            "project_id": "sds-test",
            "private_key_id": self.key_id,
            "private_key": pem,
            "client_email": self.EMAIL,
            "client_id": "1",
            "token_uri": "http://127.0.0.1:%d/token" % port,
        }
        with open(path + ".tmp", "w") as f:
            json.dump(document, f)
        os.replace(path + ".tmp", path)

    def verify(self, token):
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import padding

        def decode(part):
            return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))

        try:
            header_b64, payload_b64, signature_b64 = token.split(".")
            header = json.loads(decode(header_b64))
            payload = json.loads(decode(payload_b64))
            self.public_key.verify(
                decode(signature_b64),
                (header_b64 + "." + payload_b64).encode(),
                padding.PKCS1v15(),
                hashes.SHA256(),
            )
        except (ValueError, InvalidSignature) as e:
            raise Failure(401, "AuthenticationRequired", "invalid bearer token: %s" % (str(e) or "bad signature"))
        if header.get("alg") != "RS256" or header.get("kid") != self.key_id:
            raise Failure(401, "AuthenticationRequired", "token not signed by the test key")
        if payload.get("iss") != self.EMAIL or payload.get("exp", 0) < time.time():
            raise Failure(401, "AuthenticationRequired", "token for another account, or expired")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--bucket", action="append", default=[])
    parser.add_argument("--seed", action="append", default=[])
    parser.add_argument("--ignore-preconditions", action="store_true")
    parser.add_argument("--allow-anonymous", action="store_true")
    parser.add_argument("--write-delay-ms", type=int, default=50)
    parser.add_argument("--credentials-out")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()

    server = ThreadingHTTPServer((args.host, args.port), Handler)
    server.daemon_threads = True
    server.store = Store()
    server.verbose = args.verbose
    server.ignore_preconditions = args.ignore_preconditions
    server.allow_anonymous = args.allow_anonymous
    server.write_delay = args.write_delay_ms / 1000.0
    port = server.server_address[1]
    server.account = Account(args.credentials_out, port) if args.credentials_out else None
    for bucket in args.bucket:
        server.store.create_bucket(bucket)
    for seed in args.seed:
        try:
            server.store.seed(seed)
        except (OSError, ValueError) as e:
            sys.exit("gcs_server: seed: %s" % e)
    print("READY %d" % port, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
