"""A sinki server that lies: its change feed names paths that must never be written.

Serves one page of records (hostile ones and one good one) to the first feed request, then holds
long-polls empty; accepts every modify. Prints its port on stdout. Used by HostileServerTests.
"""
import base64, hashlib, json, os, signal, sys, threading, time, zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

root = sys.argv[1]          # the agent's root name, e.g. SaveGames
extra = sys.argv[2:]        # more hostile paths


def record(path, text, tag):
    data = text.encode()
    return {"path": path, "type": "keep-both", "data": base64.b64encode(zlib.compress(data)).decode(),
            "deleted": 0, "changeTag": tag, "baseTag": 0, "size": len(data),
            "sha256": hashlib.sha256(data).hexdigest(), "mode": 0o644, "modifiedAt": 1700000000000000000,
            "device": "mallory"}


hostile = ["../x", "/etc/x", f"{root}/a/../../x", f"{root}/../x", f"{root}/./x", "x", f"{root}\\..\\x"] + extra
records = [record(p, "pwned", i + 1) for i, p in enumerate(hostile)]
records.append(record(f"{root}/good.txt", "fine", len(records) + 1))
token = f"hostile.{len(records)}"
tag = [len(records)]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, body):
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        query = parse_qs(urlparse(self.path).query)
        since = query.get("since", [""])[0]
        if self.path.startswith("/v1/changes"):
            if not since:
                return self.reply({"records": records, "token": token, "more": False})
            time.sleep(min(int(query.get("wait", ["0"])[0]), 5))
            return self.reply({"records": [], "token": since, "more": False})
        self.reply({"records": [], "token": "", "more": False})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        results = []
        for r in body["records"]:
            tag[0] += 1
            saved = dict(r, changeTag=tag[0])
            saved.pop("data", None)
            results.append({"path": r["path"], "status": "saved", "record": saved})
        self.reply({"results": results})


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True
signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})
signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
print(server.server_address[1], flush=True)
server.serve_forever()
