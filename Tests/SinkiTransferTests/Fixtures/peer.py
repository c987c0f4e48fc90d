#!/usr/bin/env python3
"""HTTP/1.1 keep-alive peer for SinkiTransferTests (stdlib only).

Listens on 127.0.0.1, port 0; prints the port on stdout, then serves:
  GET  /hello                       -> "hello"
  GET  /bytes?n=N[&chunked=1][&norange=1]
                                    -> N bytes, byte i = i % 251; honours "Range: bytes=A-" with 206
                                       unless norange=1; chunked=1 sends no Content-Length
  ANY  /echo                        -> reads the body, answers JSON: method, length, sha256, headers
  GET  /status?code=C               -> status C with a problem+json body
  GET  /hold?seconds=S              -> answers after S seconds (or as soon as the client goes away)
  GET  /stats                       -> JSON: connections accepted, requests held now
  /crc32c-tus/...                   -> a bare tus endpoint (creation, checksum) that offers crc32 but
                                       means CRC-32C by it: every crc32 chunk is refused with 460;
                                       GET /crc32c-tus/ID gives the bytes, /crc32c-tus/refused the count
"""
import base64
import hashlib
import json
import os
import select
import signal
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

PATTERN = bytes(i % 251 for i in range(251)) * 4096  # 1 MiB-ish, a multiple of 251
lock = threading.Lock()
stats = {"connections": 0, "holding": 0}
uploads = {}     # id -> {"length": int, "data": bytearray}
refused = [0]    # crc32 chunks answered 460


def pattern(start, end):
    """Bytes start..<end of the endless i % 251 sequence."""
    out = bytearray()
    position = start
    while position < end:
        offset = position % 251
        take = min(end - position, len(PATTERN) - offset)
        out += PATTERN[offset:offset + take]
        position += take
    return bytes(out)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def setup(self):
        super().setup()
        with lock:
            stats["connections"] += 1

    def log_message(self, format, *args):
        pass

    def reply(self, status, body, content_type="application/octet-stream", extra=()):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in extra:
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def reply_json(self, status, value, content_type="application/json"):
        self.reply(status, json.dumps(value).encode(), content_type)

    def route(self):
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        if url.path == "/hello":
            return self.reply(200, b"hello", "text/plain")
        if url.path == "/echo":
            return self.echo()
        if url.path == "/bytes":
            return self.send_bytes(int(query["n"]), query.get("chunked") == "1", query.get("norange") == "1")
        if url.path == "/status":
            code = int(query["code"])
            return self.reply_json(code, {"type": "https://sinki.dev/problems/test", "title": "test",
                                          "status": code, "detail": "asked for", "code": "test",
                                          "requestId": "r1"}, "application/problem+json")
        if url.path == "/hold":
            return self.hold(float(query["seconds"]))
        if url.path.startswith("/crc32c-tus/"):
            return self.tus(url.path[len("/crc32c-tus/"):])
        if url.path == "/stats":
            with lock:
                return self.reply_json(200, dict(stats))
        self.reply(404, b"no such route", "text/plain")

    def tus(self, name):
        tus = [("Tus-Resumable", "1.0.0")]
        if self.command == "OPTIONS":
            return self.reply(204, b"", extra=tus + [("Tus-Version", "1.0.0"), ("Tus-Extension", "creation,checksum"),
                                                     ("Tus-Checksum-Algorithm", "crc32,sha256")])
        if name == "refused":
            with lock:
                return self.reply_json(200, {"refused": refused[0]})
        if self.command == "POST":
            with lock:
                upload = str(len(uploads) + 1)
                uploads[upload] = {"length": int(self.headers["Upload-Length"]), "data": bytearray()}
            return self.reply(201, b"", extra=tus + [("Location", "/crc32c-tus/" + upload)])
        upload = uploads.get(name)
        if upload is None:
            return self.reply(404, b"", extra=tus)
        if self.command == "GET":
            return self.reply(200, bytes(upload["data"]))
        if self.command == "HEAD":
            return self.reply(200, b"", extra=tus + [("Upload-Offset", str(len(upload["data"]))),
                                                     ("Upload-Length", str(upload["length"]))])
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        algorithm, _, digest = self.headers.get("Upload-Checksum", "").partition(" ")
        if algorithm == "crc32":
            with lock:
                refused[0] += 1
            return self.reply(460, b"", extra=tus)
        if algorithm != "sha256" or base64.b64decode(digest) != hashlib.sha256(body).digest():
            return self.reply(400, b"", extra=tus)
        if int(self.headers["Upload-Offset"]) != len(upload["data"]):
            return self.reply(409, b"", extra=tus)
        upload["data"] += body
        return self.reply(204, b"", extra=tus + [("Upload-Offset", str(len(upload["data"])))])

    def echo(self):
        remaining = int(self.headers.get("Content-Length", "0"))
        digest = hashlib.sha256()
        length = 0
        while remaining > 0:
            chunk = self.rfile.read(min(remaining, 1 << 20))
            if not chunk:
                break
            digest.update(chunk)
            length += len(chunk)
            remaining -= len(chunk)
        self.reply_json(200, {"method": self.command, "length": length, "sha256": digest.hexdigest(),
                              "headers": [[k, v] for k, v in self.headers.items()]})

    def send_bytes(self, n, chunked, norange):
        start = 0
        ranged = self.headers.get("Range")
        if ranged and not norange and ranged.startswith("bytes=") and ranged.endswith("-"):
            start = int(ranged[len("bytes="):-1])
        self.send_response(206 if start else 200)
        self.send_header("Content-Type", "application/octet-stream")
        if start:
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, n - 1, n))
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Content-Length", str(n - start))
        self.end_headers()
        position = start
        while position < n:
            piece = pattern(position, min(n, position + (1 << 20)))
            if chunked:
                self.wfile.write(b"%x\r\n" % len(piece) + piece + b"\r\n")
            else:
                self.wfile.write(piece)
            position += len(piece)
        if chunked:
            self.wfile.write(b"0\r\n\r\n")

    def hold(self, seconds):
        with lock:
            stats["holding"] += 1
        try:
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                readable, _, _ = select.select([self.connection], [], [], 0.05)
                if readable and not self.connection.recv(1, socket.MSG_PEEK):  # EOF: the client left
                    self.close_connection = True
                    return
            self.reply(200, b"held", "text/plain")
        finally:
            with lock:
                stats["holding"] -= 1

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = route


def watch_parent(parent):
    """Exits when the test process is gone (crashed or killed), so no peer outlives it."""
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(0)


def main():
    # A child started from a Dispatch worker thread inherits that thread's blocked signals: without
    # this, SIGTERM would stay pending forever.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    threading.Thread(target=watch_parent, args=(os.getppid(),), daemon=True).start()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
