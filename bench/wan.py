"""WAN: sinki over simulated wide-area links, against rsync and Syncthing through one link (issue 22).

Each host reaches the others through a link of its own (bench/link.py: a one-way delay and a rate
per direction shared by all of the host's connections). sinkid: the server on loopback, agent A
behind link A and agent B behind link B, so every byte crosses two links, A's then B's. rsync: a
client sending to an rsync daemon through one link (one hop). Syncthing: two instances whose
connection goes through one link (one hop). The floor is the line rate over one link: the bytes that
must move, over the rate, plus one delay.

Workloads: a new file (256 MiB by default), a 1 MiB edit in the middle of that file (B already holds
it), 5,000 files of 4 KiB in 50 folders, and one small change (a 100-byte file rewritten; B holds the
old one). Links: 20 ms / 100 Mbit/s and 50 ms / 20 Mbit/s (one way). The clock starts with the change
in A's folder (a rename into it, or the edit's close) and stops when B holds it (checked byte for
byte after each run); rsync is timed from its start to its exit. Median and minimum of --runs runs,
CPU seconds of each process, and sinkid's ratio against rsync's one hop.

Goals (issue 22): a new large file <= 1.15 x rsync; 5,000 small files <= 1.2 x; a 1 MiB edit <= 1.2 x;
one small change <= 2 round trips + 20 ms.

Usage: bench/run wan [--links 20:100,50:20] [--file-mib 256] [--small 5000] [--runs 1]
                     [--workloads new,edit,small,one] [--only sinkid,rsync,syncthing] [--json FILE]
"""
import argparse, hashlib, json, os, shutil, subprocess, sys, time
import harness as h
from w3 import same, wait_file

EDIT = 1 << 20
SMALL_SIZE = 4096
ONE_NAME = "note.txt"


class Link:
    """bench/link.py in a process of its own: `ports[label]` is where a host behind that label's link
    connects to reach `targets[label]`."""

    def __init__(self, targets, delay_ms, rate_mbit):
        self.p = subprocess.Popen([sys.executable, os.path.join(h.HERE, "link.py"), "--delay-ms", str(delay_ms), "--rate-mbit", str(rate_mbit),
                                   *[f"{label}={port}" for label, port in targets.items()]],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, start_new_session=True)
        self.ports = json.loads(self.p.stdout.readline())
        self.cpu_start = h.cpu_seconds(self.p.pid)

    def cpu(self):
        return h.cpu_seconds(self.p.pid) - self.cpu_start

    def stop(self):
        if self.p.poll() is None:
            self.p.stdin.close()
            try:
                self.p.wait(5)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()


def sha(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            block = f.read(1 << 20)
            if not block:
                return digest.hexdigest()
            digest.update(block)


def wait_content(path, expected_sha, timeout, interval=0.002):
    """The moment `path` holds the bytes whose SHA-256 is `expected_sha` (looked at when its stat moves)."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            st = os.stat(path)
            key = (st.st_ino, st.st_size, st.st_mtime_ns)
            if key != last:
                last = key
                if sha(path) == expected_sha:
                    return time.monotonic()
        except FileNotFoundError:
            pass
        time.sleep(interval)
    raise TimeoutError(f"{path} did not get the expected content")


def edit_middle(path):
    """Overwrites 1 MiB in the middle of `path` in place; returns the new SHA-256."""
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.seek(max(0, size // 2 - EDIT // 2))
        f.write(os.urandom(EDIT))
    return sha(path)


class Templates:
    """The workloads' inputs, made once per benchmark run."""

    def __init__(self, scratch, file_mib, small):
        self.big = scratch("big.bin")
        with open(self.big, "wb") as f:
            for _ in range(file_mib):
                f.write(os.urandom(1 << 20))
        self.big_sha = sha(self.big)
        self.small_count = small
        self.tree = scratch("tree")
        h.make_tree(self.tree, 50, max(1, small // 50), SMALL_SIZE)
        self.small_count = 50 * max(1, small // 50)


def stage_copy(source, scratch, name):
    """A copy beside the roots (same file system), flushed: setup, not the workload's."""
    target = scratch(name)
    if os.path.isdir(source):
        shutil.copytree(source, target)
    else:
        shutil.copyfile(source, target)
    os.sync()
    return target


# --- sinkid: server on loopback, each agent behind its own link ---------------------------------

class SinkiWan:
    def __init__(self, scratch, delay_ms, rate_mbit):
        self.server, port, data = h.serve(scratch)
        self.link = Link({"A": port, "B": port}, delay_ms, rate_mbit)
        self.roots, self.agents = {}, {}
        try:
            for name in ("B", "A"):
                root = scratch(name, "Wan")
                os.makedirs(root, exist_ok=True)
                self.roots[name] = root
                self.agents[name] = h.Proc([h.sinkid(), "--root", root, "--server", f"http://127.0.0.1:{self.link.ports[name]}",
                                            "--state", scratch(name, "state"), "--device", name, "--log-level", os.environ.get("SINKI_BENCH_LOG", "info"),
                                            "--token-file", h.token_file(scratch, data, name)], scratch(f"agent-{name}.log"))
            for agent in self.agents.values():
                agent.wait_for(r"up to date with", timeout=120)
        except BaseException:
            self.stop()
            raise

    def cpu_window(self):
        return h.CPUWindow({"agent A": self.agents["A"], "server": self.server, "agent B": self.agents["B"]})

    def stop(self):
        for agent in self.agents.values():
            agent.stop()
        self.server.stop()
        self.link.stop()


def sinkid_workload(kind, t, scratch, delay_ms, rate_mbit, timeout):
    pair = SinkiWan(scratch, delay_ms, rate_mbit)
    try:
        return timed_agent_workload(kind, t, scratch, pair.roots["A"], pair.roots["B"], pair.cpu_window, pair.link, timeout)
    finally:
        pair.stop()


def timed_agent_workload(kind, t, scratch, root_a, root_b, cpu_window, link, timeout):
    """The workload between two folders kept in sync by agents: (seconds, CPU seconds per process)."""
    if kind == "new":
        staged = stage_copy(t.big, scratch, "staged.bin")
        cpu, link_cpu = cpu_window(), link.cpu()
        t0 = time.monotonic()
        os.rename(staged, os.path.join(root_a, "big.bin"))
        t1 = wait_file(os.path.join(root_b, "big.bin"), os.path.getsize(t.big), timeout=timeout)
        check(same(t.big, os.path.join(root_b, "big.bin")), "B's big.bin differs")
    elif kind == "edit":
        shutil.copyfile(t.big, os.path.join(root_a, "big.bin"))
        wait_content(os.path.join(root_b, "big.bin"), t.big_sha, timeout)
        os.sync()
        cpu, link_cpu = cpu_window(), link.cpu()
        t0 = time.monotonic()
        wanted = edit_middle(os.path.join(root_a, "big.bin"))
        t1 = wait_content(os.path.join(root_b, "big.bin"), wanted, timeout)
    elif kind == "small":
        staged = stage_copy(t.tree, scratch, "staged-tree")
        counter = h.file_counter(root_b)
        cpu, link_cpu = cpu_window(), link.cpu()
        t0 = time.monotonic()
        os.rename(staged, os.path.join(root_a, "tree"))
        t1 = h.wait_count(counter, t.small_count, timeout=timeout)
        ok, diff = h.trees_equal(os.path.join(root_a, "tree"), os.path.join(root_b, "tree"))
        check(ok, f"B's tree differs: {diff}")
    else:
        with open(os.path.join(root_a, ONE_NAME), "wb") as f:
            f.write(b"o" * 100)
        wait_content(os.path.join(root_b, ONE_NAME), hashlib.sha256(b"o" * 100).hexdigest(), timeout)
        time.sleep(1)  # both settled (a figure, not a test: nothing to wait for but quiet)
        cpu, link_cpu = cpu_window(), link.cpu()
        new = os.urandom(60).hex().encode()  # another size: rsync's quick check sees it within the same second
        t0 = time.monotonic()
        with open(os.path.join(root_a, ONE_NAME), "wb") as f:
            f.write(new)
        t1 = wait_content(os.path.join(root_b, ONE_NAME), hashlib.sha256(new).hexdigest(), timeout, interval=0.001)
    used = cpu.read()
    used["link"] = link.cpu() - link_cpu
    return t1 - t0, used


def check(ok, what):
    if not ok:
        raise RuntimeError(what)


# --- rsync: a client to a daemon through one link ------------------------------------------------

def rsync_workload(kind, t, scratch, delay_ms, rate_mbit, timeout):
    destination = scratch("rsync-dst")
    os.makedirs(destination)
    port = h.free_port()
    conf = scratch("rsyncd.conf")
    with open(conf, "w") as f:
        f.write(f"use chroot = no\nport = {port}\naddress = 127.0.0.1\npid file = {scratch('rsyncd.pid')}\n"
                f"[wan]\n  path = {destination}\n  read only = no\n  uid = {os.getuid()}\n  gid = {os.getgid()}\n")
    daemon = h.Proc(["rsync", "--daemon", "--no-detach", f"--config={conf}"], scratch("rsyncd.log"))
    link = None
    try:
        wait_port(port)
        link = Link({"R": port}, delay_ms, rate_mbit)
        url = f"rsync://127.0.0.1:{link.ports['R']}/wan/"
        source = scratch("rsync-src")
        os.makedirs(source)
        if kind == "new":
            staged = stage_copy(t.big, scratch, "staged.bin")
            os.rename(staged, os.path.join(source, "big.bin"))
        elif kind == "edit":
            shutil.copyfile(t.big, os.path.join(source, "big.bin"))
            h.run_timed(["rsync", "-a", source + "/", url])
            edit_middle(os.path.join(source, "big.bin"))
            os.sync()
        elif kind == "small":
            os.rename(stage_copy(t.tree, scratch, "staged-tree"), os.path.join(source, "tree"))
        else:
            with open(os.path.join(source, ONE_NAME), "wb") as f:
                f.write(b"o" * 100)
            h.run_timed(["rsync", "-a", source + "/", url])
            with open(os.path.join(source, ONE_NAME), "wb") as f:
                f.write(os.urandom(60).hex().encode())
        link_cpu, daemon_cpu = link.cpu(), h.cpu_with_reaped(daemon.p.pid)
        seconds, cpu = h.run_timed(["rsync", "-a", source + "/", url])
        ok, diff = h.trees_equal(source, destination)
        check(ok, f"rsync's destination differs: {diff}")
        return seconds, {"rsync": cpu, "rsync daemon": h.cpu_with_reaped(daemon.p.pid) - daemon_cpu, "link": link.cpu() - link_cpu}
    finally:
        if link:
            link.stop()
        daemon.stop()


def wait_port(port, timeout=15):
    import socket
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.02)
    raise TimeoutError(f"nothing listens on {port}")


# --- Syncthing: two instances whose connection crosses one link ----------------------------------

def syncthing_workload(kind, t, scratch, delay_ms, rate_mbit, timeout):
    import syncthing_pair
    links = []

    def dial(ports):
        link = Link({"S0": ports[0], "S1": ports[1]}, delay_ms, rate_mbit)
        links.append(link)
        return [link.ports["S0"], link.ports["S1"]]

    pair = syncthing_pair.Pair(scratch, "wan", dial=dial)
    try:
        window = lambda: h.CPUWindow({"syncthing A": pair.procs[0], "syncthing B": pair.procs[1]})
        return timed_agent_workload(kind, t, scratch, pair.roots[0], pair.roots[1], window, links[0], timeout)
    finally:
        pair.stop()
        for link in links:
            link.stop()


TOOLS = [("sinkid", sinkid_workload, None), ("rsync (one hop)", rsync_workload, "rsync"), ("syncthing (one hop)", syncthing_workload, "syncthing")]
TITLES = {"new": "a new {mib} MiB file", "edit": "a 1 MiB edit of a {mib} MiB file", "small": "{small:,} files of 4 KiB", "one": "one small change"}
GOALS = {"new": 1.15, "edit": 1.2, "small": 1.2}


def floor_seconds(kind, t, file_mib, delay_ms, rate_mbit):
    """The line rate over one link: what must cross, over the rate, plus one delay."""
    rate = rate_mbit * 1e6 / 8
    moved = {"new": file_mib << 20, "edit": EDIT, "small": t.small_count * SMALL_SIZE, "one": 100}[kind]
    return moved / rate + delay_ms / 1000


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--links", default="20:100,50:20", help="one-way delay ms : rate Mbit/s, comma-separated")
    parser.add_argument("--file-mib", type=int, default=256)
    parser.add_argument("--small", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--workloads", default="new,edit,small,one")
    parser.add_argument("--only", help="comma-separated tools (sinkid, rsync, syncthing)")
    parser.add_argument("--json", help="write results here")
    args = parser.parse_args()
    links = []
    for part in args.links.split(","):
        delay, _, rate = part.partition(":")
        try:
            links.append((float(delay), float(rate)))
        except ValueError:
            sys.exit(f"bench/run wan: --links {part!r}: expected DELAY_MS:RATE_MBIT such as 20:100")
    kinds = [k for k in args.workloads.split(",") if k]
    for kind in kinds:
        if kind not in TITLES:
            sys.exit(f"bench/run wan: --workloads {kind!r}: expected new, edit, small or one")
    tools = h.chosen_peers(TOOLS, args.only)
    template_scratch = h.Scratch("wan-template")
    all_rows = []
    try:
        t = Templates(template_scratch, args.file_mib, args.small)
        for delay_ms, rate_mbit in links:
            for kind in kinds:
                title = TITLES[kind].format(mib=args.file_mib, small=t.small_count)
                # Time enough for the slowest tool at a tenth of the line rate; an edit's setup sends
                # the whole file first (at 50 ms / 20 Mbit/s that alone outlasted the edit's own bound).
                timeout = 60 + 10 * floor_seconds(kind, t, args.file_mib, delay_ms, rate_mbit)
                if kind == "edit":
                    timeout += 10 * floor_seconds("new", t, args.file_mib, delay_ms, rate_mbit)
                samples = {name: [] for name, _, _ in tools}
                extras = {name: {"cpu": [], "load": []} for name, _, _ in tools}
                for run in range(args.runs):
                    for name, fn, _ in tools:
                        scratch = h.Scratch("wan")
                        try:
                            load = h.loadavg()
                            seconds, cpu = fn(kind, t, scratch, delay_ms, rate_mbit, timeout)
                            samples[name].append(seconds)
                            extras[name]["cpu"].append(cpu)
                            extras[name]["load"].append(load)
                        except Exception as e:
                            print(f"  {name}: {title}, run {run + 1} failed: {e}", file=sys.stderr)
                        finally:
                            scratch.close()
                rows = [h.summarize(name, samples[name], extras[name]) for name, _, _ in tools]
                floor = floor_seconds(kind, t, args.file_mib, delay_ms, rate_mbit)
                label = f"{delay_ms:g} ms / {rate_mbit:g} Mbit/s, {title}"
                h.print_table(f"WAN {label} (line rate over one link: {floor:.2f} s)", rows)
                ours = next((r for r in rows if r and r["name"] == "sinkid"), None)
                peer = next((r for r in rows if r and r["name"].startswith("rsync")), None)
                ratio = ours["median"] / peer["median"] if ours and peer and peer["median"] > 0 else None
                goal = GOALS.get(kind)
                if kind == "one":
                    rtt_goal = 2 * 2 * delay_ms / 1000 + 0.020
                    met = ours["median"] <= rtt_goal if ours else None
                    goal_text = f"sinkid <= 2 round trips + 20 ms = {rtt_goal:.3f} s"
                else:
                    met = ratio <= goal if ratio is not None else None
                    goal_text = f"sinkid <= {goal} x rsync's one hop"
                if ratio is not None:
                    print(f"  sinkid / rsync (one hop): {ratio:.2f} x; goal: {goal_text}: {'met' if met else 'NOT met'}")
                all_rows.append({"link": f"{delay_ms:g}ms/{rate_mbit:g}Mbit", "workload": kind, "floor s": floor,
                                 "sinkid / rsync": ratio, "rows": [r for r in rows if r]})
                h.save_results(f"WAN {delay_ms:g}ms/{rate_mbit:g}Mbit {kind}",
                               {"title": f"WAN {label}", "goal": {"text": goal_text, "met": met},
                                "floor seconds": floor, "tools": h.tool_rows(rows)})
    finally:
        template_scratch.close()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(all_rows, f, indent=2)


if __name__ == "__main__":
    main()
