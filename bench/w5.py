"""W5: one edit of a large file. A 1 GiB file is already on A and B; 1 MiB of it is overwritten in
place in its middle on A (or, the second edit, 1 MiB is inserted there: the new version is renamed
over A's file, as editors and applications save). Measured per tool: the time from the edit until
B's file is the new version (B's SHA-256 equals A's), the bytes on the wire each way for that edit
only, and the CPU seconds of every process involved.

The edit starts at the middle plus 12,345 bytes, so that it is aligned to no block size of any tool.
Every tool runs on loopback, in the same sequence, with its network traffic through one counting TCP
proxy (bench/countproxy.py), so that the bytes are counted the same way for all:

- sinkid: a server and agents A and B with device tokens, each agent through its own proxy port;
  A sends the chunks the server lacks, B fetches the chunks it lacks and builds the rest from its old
  version.
- lsyncd (rsync daemon): lsyncd (delay 0) on A runs rsync to an rsync daemon serving B's folder,
  through the proxy: rsync's delta algorithm, as lsyncd to another machine.
- lsyncd (local): lsyncd (delay 0) with a local target, as in W1 and W3: rsync copies whole files
  between two local processes (no wire, no delta), shown for its time.
- Unison: `unison -socket` serving B's folder, the client on A run once after the edit (Unison has no
  watcher here) through the proxy; its rsync-like transfer of changed files.
- Syncthing: two instances (fsWatcherDelayS=1, as in the other benchmarks), each dialled through the
  proxy.

Before each measurement both sides hold the original version, the tool is idle and in sync, and
nothing is dirty in the page cache. The clock stops at the first moment B's file is seen changed
(inotify on its folder) with the new content; the SHA-256 check of that content is not timed. Bytes
are read from the proxy once nothing has moved for a second after that (acknowledgements belong to
the edit). CPU seconds are each process's utime + stime over the same window, with the children it
reaped (rsync's per-file processes). Median and minimum of --runs runs, each printed with the load
average of the machine when it started.
"""
import argparse, hashlib, os, select, shutil, signal, socket, statistics, subprocess, sys, time
import harness as h
from inotify_wait import DirectoryWatch

SIZE = 1 << 30
EDIT = 1 << 20
OFFSET = SIZE // 2 + 12345
NAME = "big.bin"
EDITS = ("overwrite", "insert")
GOAL_BYTES = {"overwrite": 3 << 20, "insert": 4 << 20}
MiB = 1 << 20


class Templates:
    """The original version, the 1 MiB edit, the inserted version (a file, renamed over A's by a hard
    link), and the SHA-256 of each version."""

    def __init__(self, scratch):
        self.original = scratch("original.bin")
        self.inserted = scratch("inserted.bin")
        self.edit = os.urandom(EDIT)
        whole, over, ins = hashlib.sha256(), hashlib.sha256(), hashlib.sha256()
        with open(self.original, "wb") as o, open(self.inserted, "wb") as i:
            written = 0
            while written < SIZE:
                block = os.urandom(1 << 24)
                whole.update(block)
                o.write(block)
                # Overwrite: the edit replaces bytes OFFSET..OFFSET+EDIT; insert: it goes in before OFFSET.
                start, end = written, written + len(block)
                if start <= OFFSET < end:
                    cut = OFFSET - start
                    i.write(block[:cut])
                    i.write(self.edit)
                    i.write(block[cut:])
                    ins.update(block[:cut] + self.edit + block[cut:])
                else:
                    i.write(block)
                    ins.update(block)
                written = end
        with open(self.original, "rb") as f:
            pos = 0
            while pos < SIZE:
                block = f.read(1 << 24)
                b = bytearray(block)
                lo, hi = max(OFFSET, pos), min(OFFSET + EDIT, pos + len(block))
                if lo < hi:
                    b[lo - pos:hi - pos] = self.edit[lo - OFFSET:hi - OFFSET]
                over.update(b)
                pos += len(block)
        self.sha = {"original": whole.hexdigest(), "overwrite": over.hexdigest(), "insert": ins.hexdigest()}
        os.sync()

    def check(self):
        """The templates were hard-linked into the tools' folders: none of them may have written into them."""
        return sha256_file(self.original) == self.sha["original"]


def sha256_file(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            block = f.read(1 << 22)
            if not block:
                return digest.hexdigest()
            digest.update(block)


def private_copy(templates, path):
    """A's copy when the edit writes into it in place: its own inode, with the original's mtime (so
    that rsync's quick check, Unison and Syncthing see both sides alike before the edit). Every other
    copy is a hard link of the original: every tool replaces B's file by a rename, and the insert
    replaces A's."""
    staged = path + ".staging"
    shutil.copyfile(templates.original, staged)
    st = os.stat(templates.original)
    os.utime(staged, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.rename(staged, path)


def a_copy(templates, path, edit):
    if edit == "overwrite":
        private_copy(templates, path)
    else:
        os.link(templates.original, path)


def apply_edit(templates, scratch, a_file, edit):
    """The edit itself, on A: 1 MiB written in place, or the inserted version renamed over the file."""
    if edit == "overwrite":
        fd = os.open(a_file, os.O_WRONLY)
        try:
            os.pwrite(fd, templates.edit, OFFSET)
        finally:
            os.close(fd)
    else:
        os.rename(scratch("inserted-" + NAME), a_file)


def stage_edit(templates, scratch, edit):
    if edit == "insert":
        os.link(templates.inserted, scratch("inserted-" + NAME))


def identity(path):
    try:
        st = os.stat(path)
        return (st.st_ino, st.st_size, st.st_mtime_ns)
    except FileNotFoundError:
        return None


def wait_verified(path, before, sha, timeout=300):
    """The monotonic time at which `path` was first seen changed from `before` with content `sha`,
    woken by inotify on its folder (and every 50 ms). The hash is taken after the time is noted."""
    watch = DirectoryWatch(os.path.dirname(path))
    deadline = time.monotonic() + timeout
    try:
        while True:
            now = identity(path)
            if now is not None and now != before:
                seen = time.monotonic()
                if sha256_file(path) == sha:
                    return seen
                before = now
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"{path} did not become the new version")
            ready, _, _ = select.select([watch.fd], [], [], min(left, 0.05))
            if ready:
                try:
                    os.read(watch.fd, 65536)
                except BlockingIOError:
                    pass
    finally:
        watch.close()


def wait_port(port, proc=None, timeout=15):
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            if time.monotonic() > deadline or (proc and proc.p.poll() is not None):
                raise RuntimeError(f"nothing listens on {port}" + (":\n" + proc.text()[-2000:] if proc else ""))
            time.sleep(0.02)


class Setup:
    """One tool, started by `start` and then idle and in sync on the original version: where its
    files are, how its wire bytes are read (`counter`), which processes' CPU counts, and what runs
    after the edit. `stop` stops whatever `start` got to start, even if it failed half-way."""
    method = ""

    def __init__(self):
        self.a_file = self.b_file = None
        self.proxy = self.counter = None
        self.procs = {}  # name: Proc whose CPU counts (with the children it reaped)

    def after_edit(self, cpu):
        """For tools that sync when run: run them (their CPU goes into `cpu`)."""

    def wire(self, counts):
        """(A sent, B received, all bytes both ways) from the proxy's counts."""
        total = sum(c["up"] + c["down"] for c in counts.values())
        return counts["wire"]["up"], counts["wire"]["up"], total

    def stop(self):
        for proc in self.procs.values():
            proc.stop()
        if self.proxy:
            self.proxy.stop()

    def files(self):
        return [p for p in (self.a_file, self.b_file) if p]


class Sinkid(Setup):
    method = "proxy in front of the server, one port per agent: A sent = A to server, B received = server to B"

    pair = None

    def start(self, templates, scratch, edit):
        self.pair = h.SinkiPair(scratch, "W5", count_bytes=True)
        self.counter = self.pair.proxy  # stopped with the pair
        self.procs = {"agent A": self.pair.agents["A"], "server": self.pair.server, "agent B": self.pair.agents["B"]}
        self.a_file = os.path.join(self.pair.roots["A"], NAME)
        self.b_file = os.path.join(self.pair.roots["B"], NAME)
        staged = scratch("staged-" + NAME)
        a_copy(templates, staged, edit)
        os.rename(staged, self.a_file)
        wait_verified(self.b_file, None, templates.sha["original"], timeout=300)

    def wire(self, counts):
        total = sum(c["up"] + c["down"] for c in counts.values())
        return counts["A"]["up"], counts["B"]["down"], total

    def stop(self):
        if self.pair:
            self.pair.stop()


class LsyncdDaemon(Setup):
    method = "proxy in front of the rsync daemon: A sent = lsyncd's rsync to the daemon"

    def start(self, templates, scratch, edit):
        a, b = scratch("a"), scratch("b")
        os.makedirs(a)
        os.makedirs(b)
        self.a_file, self.b_file = os.path.join(a, NAME), os.path.join(b, NAME)
        a_copy(templates, self.a_file, edit)
        os.link(templates.original, self.b_file)
        port = h.free_port()
        conf = scratch("rsyncd.conf")
        with open(conf, "w") as f:
            f.write(f"use chroot = no\nuid = {os.getuid()}\ngid = {os.getgid()}\n"
                    f"[b]\n    path = {b}\n    read only = no\n")
        self.procs["rsync daemon"] = h.Proc(["rsync", "--daemon", "--no-detach", "--address=127.0.0.1", f"--port={port}",
                                             f"--config={conf}", f"--log-file={scratch('rsyncd.log')}"], scratch("rsyncd.out"))
        wait_port(port, self.procs["rsync daemon"])
        self.proxy = h.CountingProxy({"wire": port})
        self.counter = self.proxy
        lconf = scratch("lsyncd.conf")
        with open(lconf, "w") as f:
            f.write('settings { nodaemon = true, statusInterval = 3600 }\n'
                    f'sync {{ default.rsync, source = "{a}", target = "rsync://127.0.0.1:{self.proxy.ports["wire"]}/b/", delay = 0 }}\n')
        self.procs["lsyncd + rsync"] = h.Proc(["lsyncd", lconf], scratch("lsyncd.log"))
        self.procs["lsyncd + rsync"].wait_for(r"Startup of .* finished|Normal: Startup", timeout=120)


class LsyncdLocal(Setup):
    method = "none: a local rsync pipe, whole file (rsync's default between local paths)"

    def start(self, templates, scratch, edit):
        a, b = scratch("a"), scratch("b")
        os.makedirs(a)
        os.makedirs(b)
        self.a_file, self.b_file = os.path.join(a, NAME), os.path.join(b, NAME)
        a_copy(templates, self.a_file, edit)
        os.link(templates.original, self.b_file)
        conf = scratch("lsyncd.conf")
        with open(conf, "w") as f:
            f.write('settings { nodaemon = true, statusInterval = 3600 }\n'
                    f'sync {{ default.rsync, source = "{a}", target = "{b}", delay = 0 }}\n')
        self.procs["lsyncd + rsync"] = h.Proc(["lsyncd", conf], scratch("lsyncd.log"))
        self.procs["lsyncd + rsync"].wait_for(r"Startup of .* finished|Normal: Startup", timeout=120)

    def wire(self, counts):
        return None, None, None


class Unison(Setup):
    method = "proxy in front of `unison -socket`: A sent = client (on A) to server (B)"

    def start(self, templates, scratch, edit):
        self.s = scratch
        a, b = scratch("a"), scratch("b")
        os.makedirs(a)
        os.makedirs(b)
        self.a, self.b = a, b
        self.a_file, self.b_file = os.path.join(a, NAME), os.path.join(b, NAME)
        a_copy(templates, self.a_file, edit)
        os.link(templates.original, self.b_file)
        port = h.free_port()
        self.procs["unison server"] = h.Proc(["unison", "-socket", str(port), "-listen", "127.0.0.1"], scratch("unison-server.log"),
                                              env={"UNISON": scratch("unison-home-b")}, cwd=scratch())
        wait_port(port, self.procs["unison server"])
        self.proxy = h.CountingProxy({"wire": port})
        self.counter = self.proxy
        self.run_client({})  # the first sync: both replicas hashed, found equal, nothing sent

    def run_client(self, cpu):
        argv = ["unison", self.a, f"socket://127.0.0.1:{self.proxy.ports['wire']}/{self.b}", "-batch", "-auto", "-silent",
                "-ui", "text", "-times"]
        p = subprocess.Popen(argv, env=dict(os.environ, UNISON=self.s("unison-home-a")), stdout=subprocess.DEVNULL,
                             stderr=open(self.s("unison-client.log"), "ab"))
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        if p.returncode != 0:
            raise RuntimeError(f"unison exited {p.returncode}: see {self.s('unison-client.log')}")
        cpu["unison client"] = usage.ru_utime + usage.ru_stime

    def after_edit(self, cpu):
        self.run_client(cpu)


class Syncthing(Setup):
    method = "proxy in front of each instance (each dials the other through it): A sent = A to B on both"

    pair = None

    def start(self, templates, scratch, edit):
        import syncthing_pair
        roots = [scratch("st-a", "w5"), scratch("st-b", "w5")]
        for root in roots:
            os.makedirs(root)
        self.a_file, self.b_file = os.path.join(roots[0], NAME), os.path.join(roots[1], NAME)
        a_copy(templates, self.a_file, edit)
        os.link(templates.original, self.b_file)

        def dial(ports):
            self.proxy = h.CountingProxy({"st0": ports[0], "st1": ports[1]})
            return [self.proxy.ports["st0"], self.proxy.ports["st1"]]
        self.pair = syncthing_pair.Pair(scratch, "w5", dial=dial)
        self.counter = self.proxy
        self.procs["syncthing A"], self.procs["syncthing B"] = self.pair.procs
        self.pair.wait_in_sync("w5", files=1, timeout=300)

    def stop(self):
        if self.pair:
            self.pair.stop()
        super().stop()

    def wire(self, counts):
        # A dialled B: st1 "up" is A to B; B dialled A: st0 "down" is A to B.
        total = sum(c["up"] + c["down"] for c in counts.values())
        a_to_b = counts["st1"]["up"] + counts["st0"]["down"]
        return a_to_b, a_to_b, total


TOOLS = [("sinkid", Sinkid, None), ("lsyncd (rsync daemon)", LsyncdDaemon, "lsyncd"), ("lsyncd (local)", LsyncdLocal, "lsyncd"),
         ("unison (socket)", Unison, "unison"), ("syncthing", Syncthing, "syncthing")]


KEEP = []  # --keep: each run's folder (logs, state) is kept and named here, its big files removed
PERF = []  # --perf: each process is sampled by `perf record` over the measured window (implies --keep)


def perf_start(scratch, procs):
    """`perf record -g` of each process, into its run's folder: where the measured time went."""
    recorders = {}
    for name, proc in procs.items():
        out = scratch("perf-" + name.replace(" ", "-").replace("+", "") + ".data")
        recorders[name] = (subprocess.Popen(["perf", "record", "-F", "499", "-g", "-p", str(proc.p.pid), "-o", out],
                                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL), out)
    time.sleep(0.3)  # perf attaches
    return recorders


def perf_stop(recorders):
    for name, (p, out) in recorders.items():
        p.send_signal(signal.SIGINT)
        p.wait(30)
        report = subprocess.run(["perf", "report", "-i", out, "--stdio", "--no-children", "--sort", "dso,sym",
                                 "--percent-limit", "3", "-g", "none"], capture_output=True, text=True).stdout
        lines = [l for l in report.splitlines() if l.strip() and not l.startswith("#")][:8]
        print(f"    perf {name}:\n" + "\n".join("      " + l.strip() for l in lines), file=sys.stderr)


def measure(name, setup_class, templates, edit):
    """One run of one tool on one edit: a dict of the figures."""
    scratch = h.Scratch("w5")
    setup = setup_class()
    try:
        setup.start(templates, scratch, edit)
        stage_edit(templates, scratch, edit)
        os.sync()
        counter = setup.counter
        if counter:
            counter.quiet_counts(quiet=1.0, timeout=30)
        before = identity(setup.b_file)
        counts0 = counter.counts() if counter else None
        cpu0 = {n: h.cpu_with_reaped(p.p.pid) for n, p in setup.procs.items()}
        recorders = perf_start(scratch, setup.procs) if PERF else None
        load = h.loadavg()
        t0 = time.monotonic()
        apply_edit(templates, scratch, setup.a_file, edit)
        cpu = {}
        setup.after_edit(cpu)
        t1 = wait_verified(setup.b_file, before, templates.sha[edit])
        counts1 = counter.quiet_counts(quiet=1.0) if counter else None
        for n, p in setup.procs.items():
            cpu[n] = h.cpu_with_reaped(p.p.pid) - cpu0[n]
        if recorders:
            perf_stop(recorders)
        if counter:
            delta = {label: {k: counts1[label][k] - counts0[label][k] for k in ("up", "down")} for label in counts1}
            sent, received, total = setup.wire(delta)
        else:
            sent = received = total = None
        return {"time": t1 - t0, "sent": sent, "received": received, "total": total, "cpu": cpu, "load": load}
    finally:
        setup.stop()
        if KEEP:
            for path in setup.files():
                if os.path.exists(path):
                    os.unlink(path)
            print(f"  {name} {edit}: kept {scratch.path}", file=sys.stderr)
        else:
            # Each run's folders go at once: 2 to 3 GiB each, a few thousand inodes at most (sinkid's chunks).
            shutil.rmtree(scratch.path, ignore_errors=True)


def mib(n):
    return "-" if n is None else f"{n / MiB:.2f}"


def report(results, chosen):
    base_name = "lsyncd (rsync daemon)"
    for edit in results:
        rows = []
        for name, _, _ in chosen:
            samples = results[edit][name]
            if not samples:
                continue
            times = [s["time"] for s in samples]
            med = lambda key: statistics.median(s[key] for s in samples) if samples[0][key] is not None else None
            cpu = h.median_of([s["cpu"] for s in samples])
            rows.append({"name": name, "median": statistics.median(times), "min": min(times), "runs": len(samples),
                         "sent": med("sent"), "received": med("received"), "total": med("total"), "cpu": cpu,
                         "load": [s["load"] for s in samples]})
        results[edit]["rows"] = rows
        base = next((r for r in rows if r["name"] == base_name), None)
        title = "1 MiB overwritten in place in the middle" if edit == "overwrite" else "1 MiB inserted in the middle (renamed over)"
        print(f"\nW5 {edit}: {title} of a 1 GiB file on A, until B has it verified in place")
        print(f"  {'tool':<22}{'median':>9}{'min':>9}{'runs':>5}{'vs lsyncd':>11}{'A sent':>10}{'B recv':>10}{'all':>9}"
              f"  (MiB, medians)  load   CPU s (medians)")
        for r in rows:
            ratio = f"{r['median'] / base['median']:.2f}x" if base else "-"
            loads = "/".join(f"{x:.1f}" for x in r["load"])
            cpu = ", ".join(f"{p} {v:.2f}" for p, v in r["cpu"].items())
            print(f"  {r['name']:<22}{r['median']:>8.3f}s{r['min']:>8.3f}s{r['runs']:>5}{ratio:>11}{mib(r['sent']):>10}"
                  f"{mib(r['received']):>10}{mib(r['total']):>9}  {'':>15}  {loads}  {cpu}")
        ours = next((r for r in rows if r["name"] == "sinkid"), None)
        goal_text = f"bytes sent <= {GOAL_BYTES[edit] // MiB} MiB, time <= lsyncd (rsync daemon)"
        met = None
        if ours:
            goal = GOAL_BYTES[edit]
            ok_bytes = ours["sent"] is not None and ours["sent"] <= goal
            ok_time = base is not None and ours["median"] <= base["median"]
            met = ok_bytes and ok_time
            print(f"  goal: bytes sent <= {goal // MiB} MiB: A sent {mib(ours['sent'])} MiB, B received {mib(ours['received'])} MiB: "
                  f"{'met' if ok_bytes else 'NOT met'}; time <= lsyncd (rsync daemon): "
                  + (f"{ours['median']:.3f} s vs {base['median']:.3f} s: {'met' if ok_time else 'NOT met'}" if base else "no lsyncd figure"))
        methods = {name: cls.method for name, cls, _ in chosen}
        h.save_results(f"W5 {edit}", {
            "title": f"W5: {title} of a 1 GiB file, A to B, verified in place",
            "goal": {"text": goal_text, "met": met, "bytes": GOAL_BYTES[edit], "checked on": "sinkid's A sent; time against lsyncd (rsync daemon)"},
            "tools": [{"tool": r["name"], "median": r["median"], "min": r["min"], "runs": r["runs"], "unit": "s", "cpu": r["cpu"],
                       "load": r["load"], "bytes": {"A sent": r["sent"], "B received": r["received"], "all": r["total"],
                                                    "method": methods[r["name"]]}} for r in rows]})
    print("\n  bytes counted (TCP payload through bench/countproxy.py; the edit only, read once quiet for 1 s):")
    for name, cls, _ in chosen:
        print(f"    {name}: {cls.method}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", help="comma-separated tools to run (first words: sinkid, lsyncd, unison, syncthing)")
    parser.add_argument("--edits", default=",".join(EDITS), help="overwrite, insert or both (default)")
    parser.add_argument("--keep", action="store_true", help="keep each run's folder (logs, state), not its big files")
    parser.add_argument("--perf", action="store_true", help="sample each process with perf over the measured window; "
                        "print its top symbols (the figures then include perf's cost)")
    args = parser.parse_args()
    if args.keep or args.perf:
        KEEP.append(True)
    if args.perf:
        PERF.append(True)
    edits = [e for e in args.edits.split(",") if e]
    chosen = h.chosen_peers(TOOLS, args.only)
    template_scratch = h.Scratch("w5-template")
    templates = Templates(template_scratch)
    results = {edit: {name: [] for name, _, _ in chosen} for edit in EDITS}
    try:
        for run in range(args.runs):
            for edit in edits:
                for name, cls, _ in chosen:
                    try:
                        results[edit][name].append(measure(name, cls, templates, edit))
                    except Exception as e:
                        print(f"  {name} {edit}: run {run + 1} failed: {e}", file=sys.stderr, flush=True)
                print(f"  run {run + 1}/{args.runs} {edit} (load {h.loadavg():.2f}): "
                      + ", ".join(f"{n} {results[edit][n][-1]['time']:.3f}s {mib(results[edit][n][-1]['sent'])} MiB"
                                  for n, _, _ in chosen if results[edit][n]), flush=True)
        if not templates.check():
            print("  warning: a tool wrote into the hard-linked original: figures after that are suspect", file=sys.stderr)
    finally:
        for path in (templates.original, templates.inserted):
            os.unlink(path)
        template_scratch.close()
    report({e: results[e] for e in edits}, chosen)


if __name__ == "__main__":
    main()
