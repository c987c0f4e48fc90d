"""Bodies: the server's peak memory under many large JSON bodies at once (issue 24, item 4).

Starts `sinkid serve` (SQLite), then sends --count (12) modify requests of --mib (250) MB each at the
same time from one write token, each on its own connection: a batch of records whose inline `data`
(base64 of random bytes, refused by the server only after parsing: its declared size is small) makes
up the body. Prints what each request was answered and the server's peak RSS (VmHWM from /proc) over
its RSS before the bodies, and per body in flight.

    python3 bench/bodies.py [--count 12] [--mib 250] [--records 4]
"""
import argparse, base64, json, os, re, socket, sys, threading, time
import harness as h


def vm(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} for {pid}")


def body(mib, records):
    """A modify batch of `records` records whose base64 data makes about `mib` MiB in all."""
    raw_each = (mib << 20) * 3 // 4 // records
    blob = base64.b64encode(os.urandom(raw_each)).decode()
    items = [{"path": f"Bench/big{i}", "type": "binary", "data": blob, "size": 10, "sha256": "0" * 64,
              "mode": 420, "modifiedAt": 0, "device": "bench", "baseTag": 0} for i in range(records)]
    return json.dumps({"records": items}).encode()


def send(port, token, payload, answers, index):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=600) as s:
            head = (f"POST /v1/records/modify HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {token}\r\n"
                    f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\nConnection: close\r\n\r\n")
            try:
                s.sendall(head.encode())
                s.sendall(payload)
            except OSError:
                pass  # answered (503) and closed before the body was all sent: the answer is still there
            got = b""
            while b"\r\n" not in got:
                try:
                    more = s.recv(65536)
                except ConnectionResetError:
                    break
                if not more:
                    break
                got += more
            answers[index] = got.split(b"\r\n", 1)[0].decode(errors="replace") or "closed without an answer"
    except OSError as error:
        answers[index] = f"error: {error}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=12)
    parser.add_argument("--mib", type=int, default=250)
    parser.add_argument("--records", type=int, default=4)
    args = parser.parse_args()
    scratch = h.Scratch("bodies")
    server, port, data = h.serve(scratch)
    try:
        token = h.make_token(data, "bench")
        payload = body(args.mib, args.records)
        before = vm(server.p.pid, "VmRSS")
        answers = [None] * args.count
        threads = [threading.Thread(target=send, args=(port, token, payload, answers, i)) for i in range(args.count)]
        started = time.monotonic()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        seconds = time.monotonic() - started
        peak = vm(server.p.pid, "VmHWM")
        statuses = {}
        for answer in answers:
            key = re.sub(r"^HTTP/1\.1 ", "", answer or "none")
            statuses[key] = statuses.get(key, 0) + 1
        print(f"{args.count} bodies of {len(payload) / 1e6:.0f} MB at once ({args.records} records each), {seconds:.1f} s")
        for key, count in sorted(statuses.items()):
            print(f"  {count:3d} × {key}")
        print(f"server RSS before {before / 1e6:.0f} MB, peak {peak / 1e6:.0f} MB, "
              f"peak over before {(peak - before) / 1e6:.0f} MB = {(peak - before) / len(payload):.2f} × one body")
    finally:
        server.stop()
        scratch.close()


if __name__ == "__main__":
    main()
