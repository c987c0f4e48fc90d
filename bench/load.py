"""Load: many simulated agents on one server (issue 13, item 5).

--users × --devices simulated devices (default 10 × 10 = 100), all in this one process (asyncio, raw
HTTP/1.1 over keep-alive connections, Python's standard library only). Each device has its own device
token and two connections: one follows its user's change feed with long-polls
(`GET /v1/changes?since=…&wait=30&omitDataFrom=DEVICE`), the other saves small inline records
(`POST /v1/records/modify`, one record a request, a few hundred bytes zlib-compressed) one after the
other for --seconds, each a new version of one of --files paths of its own (so `baseTag` is the tag
of its previous save, as an agent editing files sends).

Measured over the run: saves a second (all devices), save latency (request written to response
read), wake-up latency (from the moment the save request was written to the moment another device
of the same user has the record from its long-poll: the send time travels in the record's
`modifiedAt`), the server's CPU seconds (/proc utime + stime) and peak RSS (VmHWM), and this
process's own CPU seconds (it is one Python thread: near 1.00 cores it is the bottleneck).

By default it starts `sinkid serve` (SQLite) from a copy of the built binary in a scratch folder, with
one token per device made by `sinkid serve token add` and the server's default rate limit
(200 requests a second per token; each device sends far less); `--rate-limit N` is passed through.
`--url URL --tokens FILE` runs against a server started elsewhere (FILE: "TOKEN USER DEVICE" lines, as
`sinkid serve --tokens` takes them; `--server-pid` to measure its CPU and memory). `--database URL` is
passed to `sinkid serve --database` (and to `serve token add`); `--database auto` starts a private
PostgreSQL cluster for the run (bench/pg.py: default durability, fsync and synchronous commits on) and
adds its CPU seconds to the table. `--servers N` starts N servers on one data folder and database and
spreads each user's devices over them, so that most wake-ups cross from one server to another. `--rate N` paces the saves (N a
second in all) instead of saving back to back. `--nice N` raises this process's and the server's share
of a machine shared with other work (their autogroups' nice value); the table says how many cores the
other processes took meanwhile.
"""
import argparse, asyncio, base64, hashlib, json, os, random, re, resource, shutil, socket, subprocess, sys, time
import zlib
from urllib.parse import quote, urlsplit
import harness as h

# The goals: saves/s on SQLite, and across two servers on PostgreSQL (none is set for one server
# on PostgreSQL); the p99 wake-up on SQLite.
GOAL_SAVES_SQLITE, GOAL_SAVES_POSTGRES_SERVERS, GOAL_WAKE_P99_MS = 2000, 1500, 100
WAIT = 30  # seconds a long-poll waits

RECORD_RE = re.compile(rb'"modifiedAt":(-?\d+),"device":"([^"\\]*)"')
TAG_RE = re.compile(rb'"changeTag":(\d+)')
TOKEN_RE = re.compile(rb'"token":"([^"\\]*)","more":(true|false)')
LENGTH_RE = re.compile(rb"\r\ncontent-length:[ \t]*(\d+)", re.I)
CLOSE_RE = re.compile(rb"\r\nconnection:[ \t]*close", re.I)
RETRY_RE = re.compile(rb"\r\nretry-after:[ \t]*(\d+)", re.I)


class HTTPError(Exception):
    pass


class Connection(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection, one request at a time; answers must carry Content-Length."""

    def __init__(self):
        self.transport = None
        self.buf = bytearray()
        self.waiter = None
        self.closed = None

    def connection_made(self, transport):
        self.transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data):
        self.buf += data
        if self.waiter is None:
            return
        end = self.buf.find(b"\r\n\r\n")
        if end < 0:
            return
        head = bytes(self.buf[:end + 2])
        m = LENGTH_RE.search(head)
        if m is None:
            self._fail(HTTPError("answer without Content-Length: " + head[:200].decode("latin-1")))
            return
        total = end + 4 + int(m.group(1))
        if len(self.buf) < total:
            return
        body = bytes(self.buf[end + 4:total])
        del self.buf[:total]
        waiter, self.waiter = self.waiter, None
        if not waiter.done():
            waiter.set_result((int(head[9:12]), head, body))

    def _fail(self, error):
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(error)

    def connection_lost(self, exc):
        self.closed = exc or HTTPError("connection closed by the server")
        self._fail(self.closed)

    def request(self, data):
        """Writes the request; returns the future of (status, head, body)."""
        if self.closed is not None:
            raise self.closed
        self.waiter = asyncio.get_running_loop().create_future()
        self.transport.write(data)
        return self.waiter


async def connect(host, port):
    _, conn = await asyncio.get_running_loop().create_connection(Connection, host, port)
    return conn


def percentile(sorted_values, q):
    if not sorted_values:
        return float("nan")
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


class Stats:
    def __init__(self):
        self.save_ns = []        # save latencies, in the window
        self.wake_ns = []        # wake-up latencies of saves sent in the window
        self.saves = 0           # saved answers to requests sent in the window
        self.saves_total = 0
        self.polls = 0           # feed answers in the window
        self.poll_records = 0    # records of other devices received in the window
        self.rate_limited = 0
        self.conflicts = 0
        self.other = 0           # answers that are neither saved nor 429
        self.reconnects = 0      # connections the server closed
        self.errors = []
        self.window = (0, 0)     # wall-clock ns; what is sent inside it is counted


async def exchange(conn, request, host, port, stats):
    """One request on `conn`: (connection to go on with, (status, head, body) or None, time the answer
    was read in ns). A connection that fails is counted and replaced (the answer is then None); one
    the server says it closes is replaced after its answer."""
    try:
        answer = await conn.request(request)
    except (HTTPError, OSError):
        stats.reconnects += 1
        return await connect(host, port), None, time.time_ns()
    at = time.time_ns()
    if CLOSE_RE.search(answer[1]):
        conn.transport.close()
        conn = await connect(host, port)
    return conn, answer, at


class Device:
    def __init__(self, user, name, token, contents, port):
        self.user, self.name, self.token = user, name, token
        self.contents = contents
        self.port = port  # of the server this device talks to

    async def feed(self, host, port, headers, stats, stop, ready):
        conn = await connect(host, port)
        auth = f"Authorization: Bearer {self.token}\r\n{headers}".encode()
        since = ""
        name = self.name.encode()
        first = True
        while True:
            wait = 0 if first else WAIT
            target = f"/v1/changes?since={quote(since, safe='')}&wait={wait}&limit=1000&omitDataFrom={quote(self.name, safe='')}"
            conn, answer, now = await exchange(conn, f"GET {target} HTTP/1.1\r\n".encode() + auth + b"\r\n", host, port, stats)
            if answer is None:
                continue
            status, head, body = answer
            if status == 429:
                stats.rate_limited += 1
                m = RETRY_RE.search(head)
                await asyncio.sleep(int(m.group(1)) if m else 1)
                continue
            if status != 200:
                raise HTTPError(f"feed of {self.name}: HTTP {status}: {body[:300]!r}")
            m = TOKEN_RE.search(body, max(0, len(body) - 200))
            if m is None:
                raise HTTPError(f"feed of {self.name}: no token in {body[-300:]!r}")
            since = m.group(1).decode()
            more = m.group(2) == b"true"
            if first:
                if not more:
                    first = False
                    ready.set_result(None)
                continue
            records = RECORD_RE.findall(body)
            if len(records) != body.count(b'"recordName":'):
                page = json.loads(body)
                records = [(str(r["modifiedAt"]).encode(), r["device"].encode()) for r in page["records"]]
            start, end = stats.window
            in_window = start <= now <= end + 2_000_000_000
            if in_window:
                stats.polls += 1
            for sent, device in records:
                if device == name:
                    continue
                sent = int(sent)
                if start <= sent < end:
                    stats.wake_ns.append(now - sent)
                    stats.poll_records += 1

    async def save(self, host, port, headers, files, stats, stop, interval):
        conn = await connect(host, port)
        loop = asyncio.get_running_loop()
        due = loop.time() + random.random() * interval
        prefix = (f"POST /v1/records/modify HTTP/1.1\r\nAuthorization: Bearer {self.token}\r\n{headers}"
                  "Content-Type: application/json\r\nContent-Length: ").encode()
        base = [0] * files
        contents = self.contents
        seq = random.randrange(len(contents))
        while not stop.is_set():
            if interval:
                # Paced: one save every `interval` s; a device that falls behind sends at once (the
                # latency is then counted from the actual send, so a server that cannot keep up shows
                # as fewer saves a second, not as longer latencies).
                delay = due - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
                due = max(due + interval, loop.time() - interval)
            index = seq % files
            data, size, digest = contents[seq % len(contents)]
            seq += 1
            sent = time.time_ns()
            body = (f'{{"records":[{{"path":"load/{self.name}/f{index:03}","type":"keep-both","data":"{data}",'
                    f'"deleted":0,"changeTag":0,"baseTag":{base[index]},"size":{size},"sha256":"{digest}",'
                    f'"mode":420,"modifiedAt":{sent},"device":"{self.name}"}}]}}').encode()
            # The server closes a connection whose request it refused before the body (a 429).
            conn, reply, done = await exchange(conn, prefix + str(len(body)).encode() + b"\r\n\r\n" + body, host, port, stats)
            if reply is None:
                continue
            status, head, answer = reply
            counted = stats.window[0] <= sent < stats.window[1]
            if status == 200 and b'"status":"saved"' in answer:
                base[index] = int(TAG_RE.search(answer).group(1))
                stats.saves_total += 1
                if counted:
                    stats.saves += 1
                    stats.save_ns.append(done - sent)
            elif status == 200 and b'"status":"conflict"' in answer:
                stats.conflicts += 1
                base[index] = int(TAG_RE.search(answer).group(1))
            elif status == 429:
                stats.rate_limited += 1
                m = RETRY_RE.search(head)
                await asyncio.sleep(int(m.group(1)) if m else 1)
            else:
                stats.other += 1
                if len(stats.errors) < 5:
                    stats.errors.append(f"save of {self.name}: HTTP {status}: {answer[:300]!r}")
        conn.transport.close()


def make_contents(count, size, seed=13):
    """Inline contents as an agent sends them: (base64 of zlib(content), size, sha256 hex)."""
    rnd = random.Random(seed)
    out = []
    for i in range(count):
        text = (f"save {i:05}\n" + "".join(rnd.choice("0123456789abcdef") for _ in range(size))).encode()[:size]
        out.append((base64.b64encode(zlib.compress(text)).decode(), len(text), hashlib.sha256(text).hexdigest()))
    return out


async def loop_lag(stop, samples):
    """How late this process's event loop wakes a 10 ms sleep: what the bench adds to every latency."""
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        t = loop.time()
        await asyncio.sleep(0.01)
        samples.append(loop.time() - t - 0.01)


async def drive(devices, host, seconds, files, probe, rate=None):
    stats = Stats()
    stop = asyncio.Event()
    readies = [asyncio.get_running_loop().create_future() for _ in devices]
    stats.window = (1 << 62, 1 << 62)
    feeds = [asyncio.create_task(d.feed(host, d.port, f"Host: {host}:{d.port}\r\n", stats, stop, r)) for d, r in zip(devices, readies)]
    await asyncio.wait_for(asyncio.gather(*readies), 30)
    await asyncio.sleep(0.2)  # every device's first long-poll is parked
    lag = []
    lag_task = asyncio.create_task(loop_lag(stop, lag))
    interval = len(devices) / rate if rate else 0
    saves = [asyncio.create_task(d.save(host, d.port, f"Host: {host}:{d.port}\r\n", files, stats, stop, interval)) for d in devices]
    await asyncio.sleep(1.0)  # connections made, the store warm: not counted
    start = time.time_ns()
    stats.window = (start, start + int(seconds * 1e9))
    t0, cpu0, probe0 = time.monotonic(), resource.getrusage(resource.RUSAGE_SELF), probe()
    await asyncio.sleep(seconds)
    wall = time.monotonic() - t0
    cpu1, probe1 = resource.getrusage(resource.RUSAGE_SELF), probe()
    stop.set()
    await asyncio.gather(*saves, return_exceptions=False)
    # Wake-ups of the last saves still on their way: a second for them, then the feeds stop.
    await asyncio.sleep(1.0)
    for task in feeds:
        task.cancel()
    for outcome in await asyncio.gather(*feeds, return_exceptions=True):
        if isinstance(outcome, Exception):
            raise outcome
    await lag_task
    stats.wall = wall
    stats.bench_cpu = (cpu1.ru_utime + cpu1.ru_stime) - (cpu0.ru_utime + cpu0.ru_stime)
    stats.lag = sorted(lag)
    stats.probes = (probe0, probe1)
    return stats


class Measured:
    """What the run measures of the server processes (and of PostgreSQL's, when it runs one) around the window."""

    def __init__(self, pids, postgres=None):
        self.pids = [p for p in pids if p]
        self.postgres = postgres

    def cpu(self):
        return sum(h.cpu_seconds(p) for p in self.pids) if self.pids else None

    def postgres_cpu(self):
        return h.cpu_seconds(self.postgres) if self.postgres else None

    def hwm_mib(self):
        """The largest peak RSS of the servers."""
        peaks = []
        for pid in self.pids:
            with open(f"/proc/{pid}/status") as f:
                peaks += [int(line.split()[1]) / 1024 for line in f if line.startswith("VmHWM:")]
        return max(peaks) if peaks else None


def set_autogroup_nice(pid, nice):
    """The nice value of the process's autogroup (its session's share of the CPU against other sessions)."""
    try:
        with open(f"/proc/{pid}/autogroup", "w") as f:
            f.write(str(nice))
        os.setpriority(os.PRIO_PROCESS, pid, nice)
    except OSError as e:
        sys.exit(f"bench/load.py: --nice {nice}: {e}")


def machine_busy():
    """CPU seconds all cores have spent busy (user, nice, system, irq, softirq, steal), from /proc/stat."""
    with open("/proc/stat") as f:
        fields = f.readline().split()[1:]
    user, nice, system, idle, iowait, irq, softirq, steal = (int(x) for x in fields[:8])
    return (user + nice + system + irq + softirq + steal) / h.TICK


def start_servers(args, scratch, names, database):
    """`--servers` `sinkid serve` from a copy of the binary (a rebuild meanwhile does not change it) on one
    data folder (and one database), one token per device; returns ([process], [port], {device: token})."""
    binary = scratch("sinkid")
    shutil.copy2(h.sinkid(), binary)
    if database:
        usage = subprocess.run([binary, "serve", "--help"], capture_output=True, text=True).stdout
        if "--database" not in usage:
            sys.exit("bench/load.py: this sinkid has no `serve --database`; PostgreSQL runs need a server that has it")
    data = scratch("server")
    os.makedirs(data)
    store = ["--database", database] if database else []
    tokens = {}
    for user, device in names:
        out = subprocess.run([binary, "serve", "token", "add", user, "--device", device, "--data", data] + store,
                             check=True, capture_output=True, text=True).stdout
        tokens[device] = out.strip().splitlines()[-1].strip()
    procs, ports = [], []
    for index in range(args.servers):
        argv = [binary, "serve", "--listen", "127.0.0.1:0", "--data", data, "--log-level", "info"] + store
        if args.rate_limit is not None:
            argv += ["--rate-limit", str(args.rate_limit)]
        proc = h.Proc(argv, scratch(f"server-{index + 1}.log"))
        procs.append(proc)
        ports.append(int(proc.wait_for(r"\(port (\d+)\)").group(1)))
    return procs, ports, tokens


def read_tokens(path):
    """FILE of "TOKEN USER DEVICE" lines: [(user, device, token)]."""
    out = []
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 3 and not line.lstrip().startswith("#"):
                out.append((parts[1], parts[2], parts[0]))
    return out


def ms(ns):
    return ns / 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60, help="how long the devices save (default 60)")
    parser.add_argument("--users", type=int, default=10)
    parser.add_argument("--devices", type=int, default=10, help="devices per user")
    parser.add_argument("--rate", type=float, help="saves a second in all, paced evenly over the devices "
                        "(default: none, each device saves again as soon as its last save is answered)")
    parser.add_argument("--files", type=int, default=20, help="paths each device keeps saving (default 20)")
    parser.add_argument("--size", type=int, default=400, help="bytes of each record's content (default 400)")
    parser.add_argument("--rate-limit", type=float, help="passed to sinkid serve (default: the server's, 200/s a token)")
    parser.add_argument("--database", help="passed to sinkid serve --database (PostgreSQL); SQLite without it; "
                        "'auto': a private PostgreSQL cluster the bench starts and stops (default durability)")
    parser.add_argument("--servers", type=int, default=1, help="sinkid serve processes on one data folder and database "
                        "(more than 1 needs --database); each user's devices are spread over them, so wake-ups cross servers")
    parser.add_argument("--url", help="a running server instead of starting one, e.g. http://127.0.0.1:7071")
    parser.add_argument("--tokens", help="with --url: a file of \"TOKEN USER DEVICE\" lines, one per device")
    parser.add_argument("--server-pid", type=int, help="with --url: the server's pid, to measure its CPU and RSS")
    parser.add_argument("--nice", type=int, help="scheduling priority of this process and the server it starts, "
                        "for a machine shared with other work: the nice value of their autogroups (sessions; "
                        "plain nice does not reach across them), e.g. -10 (root)")
    parser.add_argument("--json", help="write results here")
    args = parser.parse_args()
    if args.nice is not None:
        set_autogroup_nice(os.getpid(), args.nice)

    if args.servers > 1 and not args.database:
        sys.exit("bench/load.py: --servers above 1 needs --database (servers share records through PostgreSQL)")
    scratch = h.Scratch("load")
    procs = []
    cluster = None
    try:
        if args.url:
            if not args.tokens:
                sys.exit("bench/load.py: --url needs --tokens FILE (\"TOKEN USER DEVICE\" lines)")
            u = urlsplit(args.url)
            if u.scheme != "http":
                sys.exit("bench/load.py: --url must be http:// (the bench speaks plain HTTP/1.1)")
            host, port = u.hostname, u.port or 80
            entries = [(user, device, token, port) for user, device, token in read_tokens(args.tokens)]
            pids = [args.server_pid]
            store = "given server" + (f" ({args.database})" if args.database else "")
        else:
            names = [(f"u{u:02}", f"u{u:02}-d{d:02}") for u in range(args.users) for d in range(args.devices)]
            database = args.database
            if database == "auto":
                import pg
                cluster = pg.Cluster(scratch)
                database = cluster.create("sinki")
            procs, ports, tokens = start_servers(args, scratch, names, database)
            host = "127.0.0.1"
            # Device d of each user talks to server d mod N: every user has devices on every server.
            entries = [(user, device, tokens[device], ports[int(device.rsplit("d", 1)[1]) % len(ports)]) for user, device in names]
            pids = [proc.p.pid for proc in procs]
            if args.nice is not None:
                for pid in pids:
                    set_autogroup_nice(pid, args.nice)
            store = ("PostgreSQL" if database else "SQLite") + (f", {len(procs)} servers" if len(procs) > 1 else "")
        users = sorted({e[0] for e in entries})
        contents = make_contents(512, args.size)
        devices = [Device(user, device, token, contents, port) for user, device, token, port in entries]
        server = Measured(pids, postgres=cluster.pid if cluster else None)
        stats = asyncio.run(drive(devices, host, args.seconds, args.files,
                                  lambda: (server.cpu(), machine_busy(), server.postgres_cpu()), args.rate))
        (cpu0, busy0, pg0), (cpu1, busy1, pg1) = stats.probes
        hwm = server.hwm_mib()
    finally:
        for proc in procs:
            proc.stop()
        if cluster:
            cluster.stop()
        scratch.close()

    save = sorted(stats.save_ns)
    wake = sorted(stats.wake_ns)
    per_user = {u: sum(1 for d in devices if d.user == u) for u in users}
    receivers = sum(per_user[d.user] - 1 for d in devices) / len(devices)
    rate = stats.saves / stats.wall
    server_cpu = (cpu1 - cpu0) if cpu0 is not None else None
    # Everything else the machine ran meanwhile (builds, tests): the cores it took were not ours.
    postgres_cpu = (pg1 - pg0) if pg0 is not None else None
    others = (busy1 - busy0) - (server_cpu or 0) - (postgres_cpu or 0) - stats.bench_cpu
    result = {
        "store": store, "rate": args.rate, "nice": args.nice, "devices": len(devices), "users": len(users), "seconds": round(stats.wall, 2),
        "saves": stats.saves, "saves_per_second": round(rate, 1),
        "save_p50_ms": round(ms(percentile(save, 0.50)), 2), "save_p99_ms": round(ms(percentile(save, 0.99)), 2),
        "wake_p50_ms": round(ms(percentile(wake, 0.50)), 2), "wake_p99_ms": round(ms(percentile(wake, 0.99)), 2),
        "wake_max_ms": round(ms(wake[-1]), 2) if wake else None,
        "versions_delivered": stats.poll_records, "versions_expected": round(stats.saves * receivers),
        "feed_answers_per_second": round(stats.polls / stats.wall, 1),
        "server_cpu_s": round(server_cpu, 2) if server_cpu is not None else None,
        "postgres_cpu_s": round(postgres_cpu, 2) if postgres_cpu is not None else None,
        "server_peak_rss_mib": round(hwm, 1) if hwm is not None else None,
        "bench_cpu_s": round(stats.bench_cpu, 2),
        "bench_loop_lag_p99_ms": round(1000 * percentile(stats.lag, 0.99), 2),
        "other_processes_cpu_s": round(others, 1),
        "reconnects": stats.reconnects, "rate_limited": stats.rate_limited, "conflicts": stats.conflicts, "other_answers": stats.other,
    }
    w = stats.wall
    postgres = "PostgreSQL" in store
    goal_saves = None if (postgres and len(pids) < 2) else GOAL_SAVES_POSTGRES_SERVERS if postgres else GOAL_SAVES_SQLITE
    goal_wake = None if postgres else GOAL_WAKE_P99_MS
    pacing = f"paced at {args.rate:,.0f} saves/s" if args.rate else "each device saving back to back"
    if args.nice is not None:
        pacing += f", nice {args.nice}"
    print(f"\nLoad: {len(devices)} devices ({len(users)} users × {len(devices) // max(1, len(users))}), "
          f"{w:.0f} s, {pacing}, {store} (goals: {', '.join(g for g in [f'>= {goal_saves:,} saves/s' if goal_saves else '', f'p99 wake-up <= {goal_wake} ms' if goal_wake else ''] if g) or 'none set'})")
    rows = [
        ("saves/s (all devices)", f"{rate:,.0f}",
         "no goal" if goal_saves is None else f"paced (capacity: run without --rate)" if args.rate else "met" if rate >= goal_saves else "NOT met"),
        ("save latency p50 / p99", f"{result['save_p50_ms']:.1f} / {result['save_p99_ms']:.1f} ms", ""),
        ("wake-up p50 / p99", f"{result['wake_p50_ms']:.1f} / {result['wake_p99_ms']:.1f} ms",
         "no goal" if goal_wake is None else "met" if result["wake_p99_ms"] <= goal_wake else "NOT met"),
        ("wake-up max", f"{result['wake_max_ms']} ms", ""),
        ("versions delivered", f"{stats.poll_records:,} of {result['versions_expected']:,}",
         f"{100 * stats.poll_records / max(1, result['versions_expected']):.1f} % (the rest superseded before fetched)"),
        ("feed answers/s", f"{stats.polls / w:,.0f}", ""),
        ("server CPU", f"{server_cpu:.1f} s = {server_cpu / w:.2f} cores" if server_cpu is not None else "not measured",
         f"{1e3 * server_cpu / max(1, stats.saves):.3f} ms a save" if server_cpu is not None else ""),
        ("PostgreSQL CPU", f"{postgres_cpu:.1f} s = {postgres_cpu / w:.2f} cores" if postgres_cpu is not None else "not measured",
         f"{1e3 * postgres_cpu / max(1, stats.saves):.3f} ms a save" if postgres_cpu is not None else "its own cluster only (--database auto)"),
        ("server peak RSS", f"{hwm:.1f} MiB" if hwm is not None else "not measured", ""),
        ("bench CPU (one thread)", f"{stats.bench_cpu:.1f} s = {stats.bench_cpu / w:.2f} cores",
         f"event-loop lag p99 {result['bench_loop_lag_p99_ms']:.1f} ms"),
        ("other processes' CPU", f"{others:.1f} s = {others / w:.2f} cores", "builds, tests: figures are this machine's only near 0"),
        ("429 / conflicts / other", f"{stats.rate_limited} / {stats.conflicts} / {stats.other}",
         f"{stats.reconnects} connections closed by the server"),
    ]
    for name, value, note in rows:
        print(f"  {name:<26}{value:>24}   {note}")
    for e in stats.errors:
        print("  " + e, file=sys.stderr)
    if stats.rate_limited:
        print("  some requests were rate-limited: run again with --rate-limit 0", file=sys.stderr)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    h.save_results("load" + ("" if not args.database else f", {args.servers} server(s), PostgreSQL"),
                   {"title": f"load: {len(devices)} simulated devices saving", "goal": {"saves/s": goal_saves, "wake-up p99 ms": goal_wake},
                    # The store's description is left out: with --url or --database it may name a machine.
                    "tools": [{"tool": "sinkid serve", "figures": {k: v for k, v in result.items() if k != "store"}}]})


if __name__ == "__main__":
    main()
