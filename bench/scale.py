"""Scale (issue 15): agent A with a root of many small files, agent B with an empty one, one server.

For each size (default 100,000 files in 100 folders and 1,000,000 in 1,000 folders, 64 B each; --sizes
picks): the initial sync until B holds every file, the push rate for each tenth of the work (files/s,
from the moments each tenth of the files has arrived at B, after A's scan), peak and idle RSS of A, B
and the server, CPU seconds of each over 60 s once idle, and a restart of A with nothing changed
against `find ROOT -printf '%s %T@\\n'` over the same tree. Syncthing scans the 100,000-file tree in the
same run (its scan time and RSS) as the peer.

Goals (this machine): the last tenth's rate no lower than the first's by more than 20 %; A's peak RSS
<= 300 MiB and idle <= 200 MiB at 1,000,000 files, idle <= 64 MiB at 100,000; 0 CPU seconds idle;
restart <= 2 x find; 1,000,000 files A to B <= 150 s; one check of an agent's copy of the server's records
against the server (`GET /v1/digests` of the root) <= 2 ms of server CPU at 1,000,000 files.

Usage: bench/run scale [--sizes 100000,1000000] [--idle 60] [--no-syncthing] [--json FILE]
"""
import argparse, json, os, re, subprocess, sys, threading, time
import harness as h
import idle as idle_bench


def make_files(root, count, per_folder=1000, size=64):
    """`count` files of `size` bytes in folders of `per_folder`, written by this process."""
    payload = b"x" * (size - 8)
    for index in range(count):
        folder = os.path.join(root, f"d{index // per_folder:04}")
        if index % per_folder == 0:
            os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, f"f{index % per_folder:04}"), "wb") as f:
            f.write(payload + b"%08d" % index)


def status(state):
    return idle_bench.status(state)


def memory_mib(pid, field):
    return idle_bench.memory_kib(pid, field) / 1024


def digest_cost(url, server_pid, token_path, requests=200):
    """What one check of an agent against the server costs it (issue 21): `GET /v1/digests` of the
    root, `requests` times over one connection, with the server's CPU seconds over them (the server
    does nothing else then: both agents are idle)."""
    import http.client
    from urllib.parse import urlparse
    token = open(token_path).read().strip()
    target = urlparse(url)
    connection = http.client.HTTPConnection(target.hostname, target.port, timeout=30)
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
    c0, t0 = h.cpu_seconds(server_pid), time.monotonic()
    for _ in range(requests):
        connection.request("GET", "/v1/digests?path=SaveGames", headers=headers)
        answer = connection.getresponse()
        answer.read()
        if answer.status != 200:
            raise RuntimeError(f"GET /v1/digests answered {answer.status}")
        time.sleep(0.01)  # paced below the server's rate limit (200 requests/s a token)
    wall, cpu = time.monotonic() - t0 - 0.01 * requests, h.cpu_seconds(server_pid) - c0
    connection.close()
    return {"digest check: server CPU ms": round(cpu * 1000 / requests, 3),
            "digest check: wall ms": round(wall * 1000 / requests, 3)}


def run_size(count, scratch, idle_seconds):
    root_a, root_b = scratch(f"A{count}", "SaveGames"), scratch(f"B{count}", "SaveGames")
    os.makedirs(root_a)
    os.makedirs(root_b)
    t0 = time.monotonic()
    make_files(root_a, count)
    made = time.monotonic() - t0
    server, port, data = h.serve(scratch, f"server{count}")
    url = f"http://127.0.0.1:{port}"
    tokens = {name: ["--token-file", h.token_file(scratch, data, f"{name}{count}")] for name in ("A", "B")}
    out = {"files": count, "tree written s": round(made, 1)}
    agents = {}
    try:
        state_a, state_b = scratch(f"A{count}", "state"), scratch(f"B{count}", "state")
        counter = h.file_counter(root_b)
        t0 = time.monotonic()
        agents["B"] = h.Proc([h.sinkid(), "--root", root_b, "--server", url, "--state", state_b, "--device", "B",
                              "--log-level", "warning", *tokens["B"]], scratch(f"agent-B{count}.log"))
        agents["A"] = h.Proc([h.sinkid(), "--root", root_a, "--server", url, "--state", state_a, "--device", "A",
                              "--log-level", "info", *tokens["A"]], scratch(f"agent-A{count}.log"))
        # The push's progress as B sees it: the moment each tenth of the files has arrived there
        # (inotify, no polling). A's status is looked at only every 5 s, on a thread of its own: each
        # look counts the outbox, which at a million entries costs the agent a tenth of a second,
        # and looking every half second slowed the push it measured.
        samples = []
        stop_looking = threading.Event()

        def look():
            while not stop_looking.wait(5):
                s = status(state_a)
                if s:
                    samples.append((time.monotonic() - t0, s.get("pending", {}).get("count", 0), s.get("agent", {}).get("state")))

        looker = threading.Thread(target=look, daemon=True)
        looker.start()
        marks = [0.0]
        try:
            for k in range(1, 11):
                marks.append(counter.wait_for(count * k // 10, 3600) - t0)
        finally:
            stop_looking.set()
            looker.join()
            counter.close()
        out["initial sync s"] = round(marks[-1], 1)
        scanned = re.search(r"scanned 1 root\(s\) in ([0-9.]+) s", agents["A"].text())
        out["scan s"] = float(scanned.group(1)) if scanned else None
        # The first tenth counts from the end of the scan (when sending can begin).
        marks[0] = out["scan s"] or 0.0
        rates = [round((count / 10) / max(1e-3, b - a)) for a, b in zip(marks, marks[1:])]
        out["push rate per tenth (files/s)"] = rates
        out["last / first tenth"] = round(rates[-1] / max(1, rates[0]), 2)
        # "up to date" while changes were still queued: the status must never say so.
        out["said up-to-date while queued"] = sum(1 for _, p, st in samples if p > 0 and st == "up-to-date")
        idle_bench.wait_idle(state_a)
        time.sleep(2)
        out.update(digest_cost(url, server.p.pid, h.token_file(scratch, data, f"inspector{count}")))
        pids = {"A": agents["A"].p.pid, "B": agents["B"].p.pid, "server": server.p.pid}
        c0 = {name: h.cpu_seconds(pid) for name, pid in pids.items()}
        time.sleep(idle_seconds)
        for name, pid in pids.items():
            out[f"{name} idle CPU s"] = round(h.cpu_seconds(pid) - c0[name], 2)
            out[f"{name} peak RSS MiB"] = round(memory_mib(pid, "VmHWM"), 1)
            out[f"{name} idle RSS MiB"] = round(memory_mib(pid, "VmRSS"), 1)
        agents["A"].stop()
        finds, restarts = [], []
        for run in range(3):
            t1 = time.monotonic()
            subprocess.run(["find", root_a, "-printf", "%s %T@\n"], stdout=subprocess.DEVNULL, check=True)
            finds.append(time.monotonic() - t1)
            t1 = time.monotonic()
            again = h.Proc([h.sinkid(), "--root", root_a, "--server", url, "--state", state_a, "--device", "A", "--log-level", "info",
                            *tokens["A"]],
                           scratch(f"agent-A{count}-restart{run}.log"))
            again.wait_for(r"up to date with", timeout=600)
            restarts.append(time.monotonic() - t1)
            again.stop()
        out["find s"] = round(sorted(finds)[1], 2)
        out["restart s"] = round(sorted(restarts)[1], 2)
        return out
    finally:
        for agent in agents.values():
            agent.stop()
        server.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="100000,1000000", help="file counts, comma-separated")
    parser.add_argument("--idle", type=float, default=60, help="seconds of idle measured (default 60)")
    parser.add_argument("--no-syncthing", action="store_true", help="leave out the Syncthing scan")
    parser.add_argument("--json", help="write results here")
    args = parser.parse_args()
    scratch = h.Scratch("scale")
    results = []
    try:
        for count in [int(x) for x in args.sizes.split(",")]:
            result = run_size(count, scratch, args.idle)
            results.append(result)
            print_result(result)
        if not args.no_syncthing and h.have("syncthing"):
            tree = scratch("st-tree")
            os.makedirs(tree)
            make_files(tree, 100_000)
            st = idle_bench.run_syncthing(tree, scratch, args.idle)
            print("\nSyncthing, 100,000 files (scan of the tree, one instance):")
            for key, value in st.items():
                print(f"  {key:<28}{value}")
            results.append({"syncthing": st})
    finally:
        scratch.close()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


def print_result(r):
    n = r["files"]
    million = n >= 1_000_000
    goals = {
        "last / first tenth": ">= 0.80",
        "A peak RSS MiB": "<= 300" if million else "",
        "A idle RSS MiB": "<= 200" if million else "<= 64",
        "A idle CPU s": "0",
        "initial sync s": "<= 150" if million else "",
        "said up-to-date while queued": "0",
        "digest check: server CPU ms": "<= 2" if million else "",
    }
    print(f"\nScale: {n:,} files of 64 B in {n // 1000:,} folders, agent A to agent B through one server")
    for key, value in r.items():
        if key == "files":
            continue
        goal = goals.get(key, "")
        shown = ", ".join(f"{x:,}" for x in value) if isinstance(value, list) else value
        print(f"  {key:<32}{str(shown):>40}   {('goal ' + goal) if goal else ''}")
    print(f"  {'restart / find':<32}{round(r['restart s'] / max(1e-3, r['find s']), 2):>40}   goal <= 2")


if __name__ == "__main__":
    main()
