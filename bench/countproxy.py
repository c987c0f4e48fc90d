"""A TCP proxy on loopback that counts the bytes it carries each way: how the benchmarks measure
bytes on the wire the same way for every tool (a tool's own counters, where it has any, count
different things: payload or frames, with or without headers and TLS).

    python3 countproxy.py LABEL=TARGET_PORT ...

listens on a free 127.0.0.1 port per LABEL and forwards each connection to 127.0.0.1:TARGET_PORT.
It prints one JSON line {LABEL: LISTEN_PORT, ...}; then each line "counts" on its stdin is answered
with one JSON line {LABEL: {"up": bytes client to target, "down": bytes target to client,
"connections": accepted so far}, ...}. It exits when its stdin closes.

It runs as a process of its own, so that its CPU seconds are not the benchmark's and the tools it
carries are not slowed by the benchmark's Python. Bytes move with splice(2) through a pipe (no copy
into Python), each direction of a connection on its own thread; TCP_NODELAY on both sides, so the
proxy adds no Nagle delay of its own. Counted: TCP payload, i.e. everything the tools write to their
sockets (HTTP headers, TLS records, protocol framing), not IP or TCP headers.
"""
import json, os, socket, sys, threading

CHUNK = 1 << 20


class Counter:
    def __init__(self):
        self.lock = threading.Lock()
        self.up = self.down = self.connections = 0

    def add(self, direction, n):
        with self.lock:
            setattr(self, direction, getattr(self, direction) + n)

    def snapshot(self):
        with self.lock:
            return {"up": self.up, "down": self.down, "connections": self.connections}


def pump(src, dst, counter, direction, done):
    """Copies src to dst until src's end, counting; then passes the end on (half-close)."""
    try:
        try:
            r, w = os.pipe()
            try:
                while True:
                    n = os.splice(src.fileno(), w, CHUNK)
                    if n == 0:
                        break
                    left = n
                    while left:
                        left -= os.splice(r, dst.fileno(), left)
                    counter.add(direction, n)
            finally:
                os.close(r)
                os.close(w)
        except (AttributeError, OSError) as e:  # no splice here: copy through a buffer
            if not isinstance(e, AttributeError) and e.errno not in (22, 38):  # EINVAL, ENOSYS
                raise
            buf = bytearray(CHUNK)
            view = memoryview(buf)
            while True:
                n = src.recv_into(buf)
                if n == 0:
                    break
                dst.sendall(view[:n])
                counter.add(direction, n)
    except OSError:
        pass  # a reset: the connection is over either way
    finally:
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        done()


def serve(listener, target_port, counter):
    while True:
        client, _ = listener.accept()
        try:
            target = socket.create_connection(("127.0.0.1", target_port))
        except OSError:
            client.close()
            continue
        for s in (client, target):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        counter.add("connections", 1)
        remaining = [2]
        lock = threading.Lock()

        def done(client=client, target=target, remaining=remaining, lock=lock):
            with lock:
                remaining[0] -= 1
                last = remaining[0] == 0
            if last:
                client.close()
                target.close()

        threading.Thread(target=pump, args=(client, target, counter, "up", done), daemon=True).start()
        threading.Thread(target=pump, args=(target, client, counter, "down", done), daemon=True).start()


def main():
    counters, ports = {}, {}
    for arg in sys.argv[1:]:
        label, _, target = arg.partition("=")
        if not target.isdigit():
            sys.exit(f"countproxy: expected LABEL=TARGET_PORT, got {arg!r}")
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        counters[label] = Counter()
        ports[label] = listener.getsockname()[1]
        threading.Thread(target=serve, args=(listener, int(target), counters[label]), daemon=True).start()
    print(json.dumps(ports), flush=True)
    for line in sys.stdin:
        if line.strip() == "counts":
            print(json.dumps({label: c.snapshot() for label, c in counters.items()}), flush=True)


if __name__ == "__main__":
    main()
