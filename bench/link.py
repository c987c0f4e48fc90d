"""A simulated wide-area link on loopback: one-way delay and a rate per direction, shared by every
connection of one host (issue 22's link benchmark, `bench/run wan`).

    python3 link.py --delay-ms 20 --rate-mbit 100 LABEL=TARGET_PORT ...

Each LABEL is one host's link: a free 127.0.0.1 port forwarding each connection to
127.0.0.1:TARGET_PORT. All connections through one label share its two directions: a chunk read from
one side leaves when the direction is free (`free_at`), occupies it for size / rate, and reaches the
other side `delay` after it left, in order. So two transfers at once through one host's link each get
about half of it, as on a real access line, and a request and its answer cost a round trip. What one
connection direction holds inside the link is bounded (the bytes on the wire over the delay plus
128 KiB waiting to go): past that the proxy stops reading, and the sender's TCP window closes as
behind a real bottleneck. It prints one JSON line {LABEL: LISTEN_PORT, ...} and runs until its
standard input closes.

A process of its own, so that its CPU seconds are not the benchmark's; each connection direction is
a reader thread and a writer thread (at 100 Mbit/s and 64 KiB reads, some 200 chunks a second).
"""
import argparse, collections, json, socket, sys, threading, time

READ = 64 << 10


class Direction:
    """One direction of one host's link: when it is next free to send."""

    def __init__(self, rate_bytes, delay):
        self.rate = rate_bytes
        self.delay = delay
        self.free_at = 0.0
        self.lock = threading.Lock()

    def schedule(self, size):
        """When `size` bytes read now reach the other end."""
        now = time.monotonic()
        with self.lock:
            start = max(now, self.free_at)
            self.free_at = start + size / self.rate
            return self.free_at + self.delay


class Pipe:
    """One connection direction: bytes read from `src`, held until their time, written to `dst`."""

    def __init__(self, src, dst, direction, limit, done):
        self.src, self.dst, self.direction, self.limit, self.done = src, dst, direction, limit, done
        self.queue = collections.deque()
        self.held = 0
        self.ended = False
        self.cond = threading.Condition()
        threading.Thread(target=self.read, daemon=True).start()
        threading.Thread(target=self.write, daemon=True).start()

    def read(self):
        try:
            while True:
                with self.cond:
                    while self.held >= self.limit:
                        self.cond.wait()
                data = self.src.recv(READ)
                if not data:
                    break
                at = self.direction.schedule(len(data))
                with self.cond:
                    self.queue.append((at, data))
                    self.held += len(data)
                    self.cond.notify_all()
        except OSError:
            pass  # a reset ends the connection either way
        with self.cond:
            self.ended = True
            self.cond.notify_all()

    def write(self):
        try:
            while True:
                with self.cond:
                    while not self.queue and not self.ended:
                        self.cond.wait()
                    if not self.queue:
                        break
                    at, data = self.queue[0]
                wait = at - time.monotonic()
                if wait > 0:
                    time.sleep(wait)  # the link's delay: this is what is simulated
                self.dst.sendall(data)
                with self.cond:
                    self.queue.popleft()
                    self.held -= len(data)
                    self.cond.notify_all()
        except OSError:
            pass
        finally:
            try:
                self.dst.shutdown(socket.SHUT_WR)
            except OSError:
                pass
            self.done()


def serve(listener, target_port, up, down, limit):
    while True:
        client, _ = listener.accept()
        try:
            target = socket.create_connection(("127.0.0.1", target_port))
        except OSError:
            client.close()
            continue
        for s in (client, target):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        remaining = [2]
        lock = threading.Lock()

        def done(client=client, target=target, remaining=remaining, lock=lock):
            with lock:
                remaining[0] -= 1
                last = remaining[0] == 0
            if last:
                client.close()
                target.close()

        Pipe(client, target, up, limit, done)
        Pipe(target, client, down, limit, done)


def main():
    parser = argparse.ArgumentParser(description="a simulated wide-area link per label")
    parser.add_argument("--delay-ms", type=float, required=True, help="one-way delay")
    parser.add_argument("--rate-mbit", type=float, required=True, help="rate of each direction, Mbit/s")
    parser.add_argument("targets", nargs="+", help="LABEL=TARGET_PORT")
    args = parser.parse_args()
    rate = args.rate_mbit * 1e6 / 8
    delay = args.delay_ms / 1000
    limit = int(rate * delay) + (128 << 10)
    ports = {}
    for arg in args.targets:
        label, _, target = arg.partition("=")
        if not target.isdigit():
            sys.exit(f"link: expected LABEL=TARGET_PORT, got {arg!r}")
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        ports[label] = listener.getsockname()[1]
        up, down = Direction(rate, delay), Direction(rate, delay)
        threading.Thread(target=serve, args=(listener, int(target), up, down, limit), daemon=True).start()
    print(json.dumps(ports), flush=True)
    for _ in sys.stdin:
        pass


if __name__ == "__main__":
    main()
