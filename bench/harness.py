"""Shared pieces of the sinki benchmarks: processes, temporary trees, timing, peers.

Every benchmark runs sinkid and the peers in the same sequence, several times, and prints median and
minimum with the ratio against each peer measured in the same run.
"""
import atexit, json, os, re, shutil, signal, socket, statistics, subprocess, sys, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


def sinkid():
    path = os.environ.get("SINKID") or os.path.join(REPO, ".build", "release", "sinkid")
    if not os.access(path, os.X_OK):
        sys.exit(f"bench: {path} not found; run bench/run (it builds with -c release)")
    return path


def have(tool):
    return shutil.which(tool) is not None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Proc:
    """A process started by a benchmark, output to a log file, stopped by pid."""

    def __init__(self, argv, log, env=None, cwd=None):
        self.log_path = log
        self.log = open(log, "wb")
        full_env = dict(os.environ)
        full_env.update(env or {})
        self.p = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT, env=full_env, cwd=cwd,
                                  start_new_session=True)

    def text(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def wait_for(self, pattern, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = re.search(pattern, self.text())
            if m:
                return m
            if self.p.poll() is not None:
                raise RuntimeError(f"{self.p.args[0]} exited early:\n{self.text()[-3000:]}")
            time.sleep(0.01)
        raise TimeoutError(f"waiting for {pattern!r} in {self.log_path}:\n{self.text()[-3000:]}")

    def stop(self, sig=signal.SIGTERM, timeout=10):
        if self.p.poll() is None:
            try:
                os.killpg(self.p.pid, sig)
            except ProcessLookupError:
                pass
            try:
                self.p.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.p.pid, signal.SIGKILL)
                self.p.wait()
        self.log.close()


def make_tree(root, dirs, files_per_dir, size, seed=1):
    """dirs × files_per_dir files of `size` random bytes."""
    os.makedirs(root, exist_ok=True)
    for d in range(dirs):
        dp = os.path.join(root, f"d{d:03}")
        os.makedirs(dp, exist_ok=True)
        for f in range(files_per_dir):
            with open(os.path.join(dp, f"f{f:04}.bin"), "wb") as out:
                out.write(os.urandom(size))


def count_files(root):
    """Regular files below root (sinkid's and syncthing's temporary names excluded), cheaply."""
    total = 0
    try:
        stack = [root]
        while stack:
            path = stack.pop()
            with os.scandir(path) as it:
                for e in it:
                    if e.name.startswith(".sinki-tmp-") or e.name.startswith(".syncthing.") or e.name.startswith("~syncthing~"):
                        continue
                    if e.is_dir(follow_symlinks=False):
                        stack.append(e.path)
                    elif e.is_file(follow_symlinks=False):
                        total += 1
    except FileNotFoundError:
        pass
    return total


def trees_equal(a, b):
    r = subprocess.run(["diff", "-rq", "--no-dereference", a, b], capture_output=True, text=True)
    extra = [l for l in r.stdout.splitlines() if ".sinki-tmp-" not in l and ".stfolder" not in l and ".stversions" not in l]
    return not extra, extra[:5]


def file_counter(root):
    """Start counting before the clock starts; then `wait_count(counter, expected)`."""
    from inotify_wait import TreeCounter
    return TreeCounter(root)


def wait_count(root_or_counter, expected, timeout=120):
    """The monotonic time when `expected` files are below root: woken by inotify, never polling."""
    counter = file_counter(root_or_counter) if isinstance(root_or_counter, str) else root_or_counter
    try:
        return counter.wait_for(expected, timeout)
    finally:
        counter.close()


def drop_caches_hint():
    # Not dropping caches: every contender gets the same warm page cache for its source.
    pass


def start_lsyncd(scratch):
    """lsyncd (delay 0: a local rsync at once) from scratch("a") to scratch("b"), started and past
    its first sync; returns (a, b, process)."""
    a, b = scratch("a"), scratch("b")
    os.makedirs(a)
    os.makedirs(b)
    conf = scratch("lsyncd.conf")
    with open(conf, "w") as f:
        f.write('settings { nodaemon = true, statusInterval = 3600 }\n'
                f'sync {{ default.rsync, source = "{a}", target = "{b}", delay = 0 }}\n')
    proc = Proc(["lsyncd", conf], scratch("lsyncd.log"))
    try:
        proc.wait_for(r"Startup of .* finished|Normal: Startup", timeout=30)
    except BaseException:
        proc.stop()
        raise
    return a, b, proc


def chosen_peers(peers, only):
    """The (name, run, tool) peers whose tool is installed (None: always), narrowed to `only` (a
    comma-separated list of first words of names) when given."""
    return [p for p in peers if (p[2] is None or have(p[2])) and (not only or p[0].split()[0] in only.split(","))]


def run_rounds(chosen, runs, label, template, extras=None):
    """Each of `chosen` (name, fn, binary) once per round, in the same order, each in a fresh
    scratch folder `label`; a tool that fails is reported, not fatal. Returns the samples by name.
    A fn may return seconds, or (seconds, {process: CPU seconds}); with `extras` (a dict), the CPU
    figures and the load average at the start of each run go to extras[name]["cpu"] and ["load"]."""
    samples = {name: [] for name, _, _ in chosen}
    if extras is not None:
        extras.update({name: {"cpu": [], "load": []} for name, _, _ in chosen})
    for run in range(runs):
        for name, fn, _ in chosen:
            scratch = Scratch(label)
            try:
                load = loadavg()
                result = fn(template, scratch)
                seconds, cpu = result if isinstance(result, tuple) else (result, None)
                samples[name].append(seconds)
                if extras is not None:
                    extras[name]["load"].append(load)
                    if cpu is not None:
                        extras[name]["cpu"].append(cpu)
            except Exception as e:
                print(f"  {name}: run {run + 1} failed: {e}", file=sys.stderr)
            finally:
                scratch.close()
        print(f"  run {run + 1}/{runs} (load {loadavg():.2f}): " + ", ".join(f"{n} {samples[n][-1]:.3f}s" for n, _, _ in chosen if samples[n]), flush=True)
    return samples


def summarize(name, samples, extra=None):
    """Median and minimum of `samples`, with the medians of the CPU figures and the loads from
    `extra` (one of run_rounds' extras) when given."""
    if not samples:
        return None
    row = {"name": name, "median": statistics.median(samples), "min": min(samples), "runs": len(samples)}
    if extra:
        row["cpu"] = median_of(extra["cpu"]) if extra["cpu"] else {}
        row["load"] = extra["load"]
    return row


def print_table(title, rows, unit="s", ours="sinkid"):
    print(f"\n{title}")
    base = next((r for r in rows if r and r["name"] == ours), None)
    with_cpu = any(r and "cpu" in r for r in rows)
    print(f"  {'tool':<22}{'median':>10}{'min':>10}{'runs':>6}   {'sinkid is':>12}" + ("   load at each run   CPU s per process (medians)" if with_cpu else ""))
    for r in rows:
        if not r:
            continue
        ratio = ""
        if base and r is not base and base["median"] > 0:
            ratio = f"{r['median'] / base['median']:.2f}x faster" if r["median"] >= base["median"] else f"{base['median'] / r['median']:.2f}x slower"
        line = f"  {r['name']:<22}{r['median']:>9.3f}{unit}{r['min']:>9.3f}{unit}{r['runs']:>6}   {ratio:>12}"
        if with_cpu:
            loads = "/".join(f"{x:.1f}" for x in r.get("load", []))
            line += f"   {loads:<18} " + ", ".join(f"{p} {v:.2f}" for p, v in r.get("cpu", {}).items())
        print(line)


def tool_rows(rows, unit="s"):
    """print_table's rows in the results file's form."""
    return [{"tool": r["name"], "median": r["median"], "min": r["min"], "runs": r["runs"], "unit": unit,
             "cpu": r.get("cpu", {}), "load": r.get("load", [])} for r in rows if r]


def run_timed(argv, env=None, cwd=None):
    """Runs argv to its end (output discarded, failure raised): (wall seconds, CPU seconds of it and
    of the children it waited for)."""
    t0 = time.monotonic()
    p = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = p.stderr.read()
    _, status, usage = os.wait4(p.pid, 0)
    seconds = time.monotonic() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise RuntimeError(f"{argv[0]} exited {p.returncode}: {err.decode(errors='replace')[-1000:]}")
    return seconds, usage.ru_utime + usage.ru_stime


class CPUWindow:
    """CPU seconds of named long-running processes (Proc), from now until `read()`."""

    def __init__(self, procs):
        self.procs = procs
        self.start = {name: cpu_with_reaped(p.p.pid) for name, p in procs.items()}

    def read(self):
        return {name: cpu_with_reaped(p.p.pid) - self.start[name] for name, p in self.procs.items()}


_leftovers = []


def _remove_leftovers():
    # SINKI_BENCH_KEEP=1 keeps the scratch folders (the agents' logs, for a timeline) and says where.
    if os.environ.get("SINKI_BENCH_KEEP"):
        for path in _leftovers:
            print(f"kept {path}", file=sys.stderr)
        return
    for path in _leftovers:
        shutil.rmtree(path, ignore_errors=True)


atexit.register(_remove_leftovers)
# A benchmark stopped with SIGTERM (`timeout`, a closed terminal) unwinds like one stopped by an
# error, so that every `finally` stops the servers and agents it started (they run in sessions of
# their own and would otherwise outlive it).
signal.signal(signal.SIGTERM, lambda number, frame: sys.exit(128 + number))


class Scratch:
    """A temporary folder on the same file system as the benchmark's trees.

    Folders are removed only when the benchmark exits: on ext4 without a journal (as here), inodes
    deleted in the last minutes make every new inode allocation scan past them
    (`recently_deleted` in the kernel's ialloc.c), which slows file creation several-fold for a
    while. Deleting 10,000 files between runs would make each run pay for the previous one.
    """

    def __init__(self, label):
        base = os.environ.get("SINKI_BENCH_DIR") or tempfile.gettempdir()
        self.path = tempfile.mkdtemp(prefix=f"sinki-bench-{label}-", dir=base)

    def __call__(self, *parts):
        return os.path.join(self.path, *parts)

    def close(self):
        _leftovers.append(self.path)


def make_token(data, device, user="bench", database=None):
    """A device token of `user` made with `sinkid serve token add` on the server's data folder (or
    database): servers refuse every request without one, as deployed."""
    argv = [sinkid(), "serve", "token", "add", user, "--device", device, "--data", data]
    if database:
        argv += ["--database", database]
    out = subprocess.run(argv, check=True, capture_output=True, text=True).stdout
    return out.strip().splitlines()[-1].strip()


def token_file(scratch, data, device, user="bench"):
    """`make_token` written to a file in the scratch folder, for `--token-file`."""
    path = scratch(f"token-{device}")
    with open(path, "w") as f:
        f.write(make_token(data, device, user) + "\n")
    os.chmod(path, 0o600)
    return path


def server_args():
    """Options for every `sinkid serve` a benchmark starts, from $SINKI_BENCH_SERVER_ARGS (e.g.
    `--rate-limit 0`): to see what a server setting costs. Recorded with the results."""
    import shlex
    return shlex.split(os.environ.get("SINKI_BENCH_SERVER_ARGS", ""))


def serve(scratch, name="server", log_level="warning", extra=()):
    """`sinkid serve` on a free loopback port with its data in scratch(name): (process, port, data)."""
    port = free_port()
    data = scratch(name)
    os.makedirs(data, exist_ok=True)
    proc = Proc([sinkid(), "serve", "--listen", f"127.0.0.1:{port}", "--data", data, "--log-level", log_level, *extra, *server_args()],
                scratch(f"{name}.log"))
    deadline = time.monotonic() + 15
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
        except OSError:
            if proc.p.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"sinkid serve did not listen:\n{proc.text()[-2000:]}")
            time.sleep(0.01)
    return proc, port, data


class SinkiPair:
    """A sinki server and two agents (A and B) on roots named `root_name`, idle and caught up."""

    def __init__(self, scratch, root_name, extra_agent_args=(), count_bytes=False):
        """count_bytes: each agent reaches the server through its own port of a `CountingProxy`
        (`self.proxy`, labels "A" and "B")."""
        self.s = scratch
        self.server, self.port, data = serve(scratch)
        self.proxy = CountingProxy({"A": self.port, "B": self.port}) if count_bytes else None
        self.roots = {}
        self.agents = {}
        try:
            for name in ("B", "A"):
                root = scratch(name, root_name)
                os.makedirs(root, exist_ok=True)
                self.roots[name] = root
                port = self.proxy.ports[name] if self.proxy else self.port
                self.agents[name] = Proc([sinkid(), "--root", root, "--server", f"http://127.0.0.1:{port}",
                                          "--state", scratch(name, "state"), "--device", name, "--log-level", os.environ.get("SINKI_BENCH_AGENT_LOG", "info"),
                                          "--token-file", token_file(scratch, data, name), *extra_agent_args], scratch(f"agent-{name}.log"))
            for agent in self.agents.values():
                agent.wait_for(r"up to date with")
        except BaseException:
            self.stop()  # nothing started here outlives a failed start
            raise

    def wait_listen(self, timeout=15):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.01)
        raise TimeoutError("sinkid serve did not listen:\n" + self.server.text())

    def stop(self):
        for agent in self.agents.values():
            agent.stop()
        self.server.stop()
        if self.proxy:
            self.proxy.stop()


TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    """CPU seconds of the process and every process below it."""
    total = 0
    for p in [pid] + descendants(pid):
        try:
            with open(f"/proc/{p}/stat") as f:
                parts = f.read().rsplit(")", 1)[1].split()
            total += (int(parts[11]) + int(parts[12])) / TICK  # utime, stime
        except FileNotFoundError:
            pass
    return total


def descendants(pid):
    out = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                for child in f.read().split():
                    out += [int(child)] + descendants(int(child))
    except FileNotFoundError:
        pass
    return out


class CountingProxy:
    """bench/countproxy.py in a process of its own: one loopback port per label, forwarding to the
    given target port and counting the bytes each way. `ports[label]` is where tools connect;
    `counts()` is {label: {"up", "down", "connections"}} ("up": from the connecting side)."""

    def __init__(self, targets):
        self.p = subprocess.Popen([sys.executable, os.path.join(HERE, "countproxy.py"),
                                   *[f"{label}={port}" for label, port in targets.items()]],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, start_new_session=True)
        self.ports = json.loads(self.p.stdout.readline())

    def counts(self):
        self.p.stdin.write("counts\n")
        self.p.stdin.flush()
        return json.loads(self.p.stdout.readline())

    def quiet_counts(self, quiet=1.0, timeout=15):
        """The counts once nothing has moved for `quiet` seconds (the tail of an exchange, such as an
        acknowledgement after the file is in place, belongs to it)."""
        last, since = self.counts(), time.monotonic()
        deadline = since + timeout
        while time.monotonic() < deadline:
            time.sleep(0.1)
            now = self.counts()
            if now != last:
                last, since = now, time.monotonic()
            elif time.monotonic() - since >= quiet:
                break
        return last

    def stop(self):
        if self.p.poll() is None:
            self.p.stdin.close()
            try:
                self.p.wait(5)
            except subprocess.TimeoutExpired:
                os.killpg(self.p.pid, signal.SIGKILL)
                self.p.wait()


def cpu_with_reaped(pid):
    """CPU seconds of the process, of its children it has waited for (cutime, cstime: rsync's
    per-file children under lsyncd and per-connection children under its daemon) and of every
    process below it still running."""
    total = 0
    for p in [pid] + descendants(pid):
        try:
            with open(f"/proc/{p}/stat") as f:
                parts = f.read().rsplit(")", 1)[1].split()
            total += sum(int(x) for x in parts[11:15]) / TICK  # utime, stime, cutime, cstime
        except FileNotFoundError:
            pass
    return total


def loadavg():
    """The 1-minute load average: how busy the shared machine was around a figure."""
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def results_file():
    """Where the figures go as data: $SINKI_BENCH_RESULTS (bench/run sets bench/results/latest.json),
    or nowhere."""
    return os.environ.get("SINKI_BENCH_RESULTS") or None


def save_results(workload, entry):
    """Merges one workload's figures into the results file (a JSON object keyed by workload), with the
    date, the command that gave them and the machine's cores. `entry`: "title", "goal" ({"text",
    "met"} and what it is checked on), "tools": [{"tool", "median", "min", "runs", "unit", "cpu":
    {process: seconds}, "load": [1-minute load average at each run], and "bytes", "figures" where
    measured}]. The chart (bench/chart.py) and docs/benchmarks.md are drawn from it."""
    path = results_file()
    if not path:
        return
    import datetime
    try:
        with open(path) as f:
            data = json.load(f)
    except (FileNotFoundError, ValueError):
        data = {}
    entry = dict(entry)
    entry["date"] = datetime.date.today().isoformat()
    entry["command"] = " ".join(["python3", "bench/" + os.path.basename(sys.argv[0]), *sys.argv[1:]])
    entry["cores"] = os.cpu_count()
    if server_args():
        entry["server args"] = " ".join(server_args())
    data[workload] = entry
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path + ".tmp", "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(path + ".tmp", path)


def median_of(samples):
    """The median of each key of a list of {key: number} dicts (CPU seconds per process)."""
    keys = []
    for s in samples:
        keys += [k for k in s if k not in keys]
    return {k: statistics.median(s[k] for s in samples if k in s) for k in keys}
