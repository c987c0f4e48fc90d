"""A sinki server that lies: its change feed names paths that must never be written.

    hostile_server.py ROOT OTHER OUTSIDE [PATH...]

ROOT and OTHER are the agent's two root names (SaveGames, Other); OUTSIDE is a folder outside both
roots, the target of the symlinks the feed sends; each PATH is one more hostile path. The feed is three
pages, served in order to the first requests (then long-polls stay empty):

1. paths that climb out (`../x`, `/etc/x`, …); moves whose `movedFrom` is outside the root, in the other
   root, or below a symlink; a symlink to OUTSIDE with a file below it in the same page; a tombstone
   below a symlink of the root, and a symlink that the feed calls a directory; names that Unicode
   normalization would merge or turn into `..`; and one good file;
2. files below the symlinks of page 1, and the NFC spelling of a name;
3. the NFD spelling of the same name.

Look-ups (`GET /v1/records?path=…&data=1`) answer only with records the feed carried content for, so
content the feed leaves out (a move's) can come from nowhere but the agent's own disk. Accepts every
modify. Prints its port on stdout. Used by HostileServerTests.
"""
import base64, hashlib, json, os, signal, sys, time, zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

root, other, outside = sys.argv[1], sys.argv[2], sys.argv[3]
extra = sys.argv[4:]
tag = [0]


def record(path, data, kind="keep-both", moved_from=None, inline=True):
    """A record of `data` (bytes or text) at `path`; without `inline`, its content is left out."""
    if isinstance(data, str):
        data = data.encode()
    tag[0] += 1
    out = {"path": path, "type": kind, "deleted": 0, "changeTag": tag[0], "baseTag": 0, "size": len(data),
           "sha256": hashlib.sha256(data).hexdigest(), "mode": 0o644, "modifiedAt": 1700000000000000000,
           "device": "mallory"}
    if inline:
        out["data"] = base64.b64encode(zlib.compress(data)).decode()
    if moved_from is not None:
        out["movedFrom"] = moved_from
    return out


def tombstone(path):
    tag[0] += 1
    return {"path": path, "type": "keep-both", "deleted": 1, "changeTag": tag[0], "baseTag": 0, "size": 0,
            "sha256": "", "mode": 0, "modifiedAt": 1700000000000000000, "device": "mallory"}


def directory(path):
    tag[0] += 1
    return {"path": path, "type": "dir", "deleted": 0, "changeTag": tag[0], "baseTag": 0, "size": 0,
            "sha256": "", "mode": 0o755, "modifiedAt": 1700000000000000000, "device": "mallory"}


NFC_E = "\u00e9"       # é as one code point
NFD_E = "e\u0301"      # é as e + combining acute
climbing = ["../x", "/etc/x", f"{root}/a/../../x", f"{root}/../x", f"{root}/./x", "x", f"{root}\\..\\x"] + extra
page1 = [record(p, "pwned") for p in climbing]
page1 += [
    # Moves: a source outside the root, in the other root, below a symlink. Each record either applies
    # as its own content or is not applied; no file is ever moved or read from there.
    record(f"{root}/moved-1.txt", "own 1", moved_from="../x"),
    record(f"{root}/moved-2.txt", "own 2", moved_from="/etc/passwd"),
    record(f"{root}/moved-3.txt", "own 3", moved_from=f"{root}/../../x"),
    record(f"{root}/moved-4.txt", "own 4", moved_from=f"{other}/secret.txt"),
    record(f"{root}/stolen.txt", "the other root's secret", moved_from=f"{other}/secret.txt", inline=False),
    record(f"{root}/from-link.txt", "a file outside", moved_from=f"{root}/link/victim.txt", inline=False),
    # A symlink to OUTSIDE with a file below it in the same page; another whose child comes in page 2.
    record(f"{root}/d", outside, kind="symlink"),
    record(f"{root}/d/x", "d x"),
    record(f"{root}/d2", outside, kind="symlink"),
    # `link` and `link2` are symlinks to OUTSIDE in the root already: the feed deletes below the one,
    # and says the other is a directory with a file in it.
    tombstone(f"{root}/link/victim.txt"),
    directory(f"{root}/link2"),
    record(f"{root}/link2/w", "pwned"),
    # Names Unicode normalization would merge, or make `..` (NFKC: U+2024 is '.', U+2025 is '..').
    record(f"{root}/caf{NFC_E}.txt", "nfc"),
    record(f"{root}/caf{NFD_E}.txt", "nfd"),
    record(f"{root}/dir{NFC_E}/a.txt", "nfc folder"),
    record(f"{root}/dir{NFD_E}/b.txt", "nfd folder"),
    record(f"{root}/\u2024\u2024/x", "one dot leaders"),
    record(f"{root}/\u2025", "two dot leader"),
    record(f"{root}/a\uff0fb", "fullwidth solidus"),
    # A joiner, and a combining mark, right after a '/': one Character with it to Swift's String.
    record(f"{root}/\u200dx", "joiner"),
    record(f"{root}/link/\u0301x", "pwned"),
    record(f"{root}/good.txt", "fine"),
]
page2 = [
    record(f"{root}/d/x2", "d x2"),
    record(f"{root}/d2/y", "pwned"),
    record(f"{root}/link/z", "pwned"),
    record(f"{root}/a{chr(0xf1)}o.txt", "nfc page"),
]
page3 = [record(f"{root}/an\u0303o.txt", "nfd page")]
pages = [page1, page2, page3]
tokens = [f"hostile.{i + 1}" for i in range(len(pages))]
with_content = {r["path"]: r for page in pages for r in page if "data" in r}


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
        if self.path.startswith("/v1/changes"):
            since = query.get("since", [""])[0]
            index = 0 if not since else tokens.index(since) + 1 if since in tokens else len(pages)
            if index < len(pages):
                return self.reply({"records": pages[index], "token": tokens[index], "more": index + 1 < len(pages)})
            time.sleep(min(int(query.get("wait", ["0"])[0]), 5))
            return self.reply({"records": [], "token": since, "more": False})
        if self.path.startswith("/v1/records"):
            path = query.get("path", [""])[0]
            found = [with_content[path]] if path in with_content else []
            return self.reply({"records": found, "token": "", "more": False})
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
