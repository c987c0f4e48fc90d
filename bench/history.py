"""History: what keeping every version costs (issue 23).

1. Storage. One agent and a server keeping history (the default, 30 days). A 1 GiB file of random
   bytes is synced, then edited 100 times: each edit writes 1 MiB of new random bytes in place at a
   random offset, and the next waits until the server holds the edit's version. Then the server's
   data folder is measured (its database with every version's manifest, and the chunks every kept
   version names), with the user's usage as `sinkid serve user list` counts it (a chunk once, however
   many versions share it). Goal: <= 1.2 GiB in all. CPU seconds of the agent and the server over
   the 100 edits.
2. W1 (10,000 files of 4 KiB, A to B) and W5 (a 1 MiB overwrite in a 1 GiB file, A to B) with
   history on against off (`--history-days 0`), runs alternating on and off: sinkid's median time
   and CPU seconds (agents and server) each way. Goal: within 5 %.

Usage: bench/run history [--edits N] [--runs N] [--only storage|w1|w5]
"""
import argparse, json, os, random, shutil, statistics, subprocess, sys, time, urllib.request
import harness as h
import w1
import w5

GiB = 1 << 30
MiB = 1 << 20
SIZE = GiB
EDIT = MiB
GOAL_STORAGE = 1.2 * GiB
GOAL_RATIO = 0.05
NAME = "big.bin"


def record(port, token, path):
    """The server's current record at `path` (a dict), or None."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/records?limit=1&path={path}",
                                     headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        page = json.load(answer)
    for item in page["records"]:
        if item["path"] == path:
            return item
    return None


def wait_for_version(port, token, path, after_tag, size, timeout=600):
    """Waits until the server's record at `path` is a save after `after_tag` of `size` bytes: its tag."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = record(port, token, path)
        if found and not found["deleted"] and found["changeTag"] > after_tag and found["size"] == size:
            return found["changeTag"]
        time.sleep(0.05)
    raise TimeoutError(f"the server did not get a new version of {path}")


def folder_bytes(path):
    total = 0
    for folder, _, names in os.walk(path):
        for name in names:
            try:
                total += os.lstat(os.path.join(folder, name)).st_size
            except FileNotFoundError:
                pass
    return total


def storage(edits):
    scratch = h.Scratch("history")
    server, port, data = h.serve(scratch)
    token = h.make_token(data, "inspector")
    root = scratch("A", "History")
    os.makedirs(root)
    agent = h.Proc([h.sinkid(), "--root", root, "--server", f"http://127.0.0.1:{port}", "--state", scratch("A", "state"),
                    "--device", "A", "--log-level", "info", "--token-file", h.token_file(scratch, data, "A")], scratch("agent-A.log"))
    try:
        agent.wait_for(r"up to date with")
        staged = scratch("staged.bin")
        with open(staged, "wb") as f:
            for _ in range(SIZE // (1 << 24)):
                f.write(os.urandom(1 << 24))
        os.sync()
        path = "History/" + NAME
        t0 = time.monotonic()
        os.rename(staged, os.path.join(root, NAME))
        tag = wait_for_version(port, token, path, 0, SIZE)
        print(f"  the 1 GiB file is on the server ({time.monotonic() - t0:.1f} s)", flush=True)
        cpu = h.CPUWindow({"agent": agent, "server": server})
        rng = random.Random(23)
        t0 = time.monotonic()
        for index in range(edits):
            fd = os.open(os.path.join(root, NAME), os.O_WRONLY)
            try:
                os.pwrite(fd, os.urandom(EDIT), rng.randrange(0, SIZE - EDIT))
            finally:
                os.close(fd)
            tag = wait_for_version(port, token, path, tag, SIZE)
            if (index + 1) % 10 == 0:
                print(f"  {index + 1} edits saved ({time.monotonic() - t0:.0f} s)", flush=True)
        elapsed = time.monotonic() - t0
        used = cpu.read()
        history = subprocess.run([h.sinkid(), "history", path, "--json", "--state", scratch("A", "state")],
                                 check=True, capture_output=True, text=True)
        versions = len(json.loads(history.stdout)["versions"])
        listed = subprocess.run([h.sinkid(), "serve", "user", "list", "--data", data, "--json"], check=True, capture_output=True, text=True)
        usage = next(u for u in json.loads(listed.stdout)["users"] if u["name"] == "bench")
        chunks = folder_bytes(os.path.join(data, "chunks"))
        database = sum(os.path.getsize(os.path.join(data, n)) for n in os.listdir(data) if n.startswith("records.db"))
        uploads = folder_bytes(os.path.join(data, "uploads"))
        total = chunks + database + uploads
        print(f"\nStorage: a 1 GiB file and {edits} edits of 1 MiB each ({versions} versions kept), "
              f"{elapsed:.0f} s, {elapsed / edits:.2f} s an edit")
        print(f"  server data folder: {total / GiB:.3f} GiB (chunks {chunks / GiB:.3f} GiB, database {database / MiB:.1f} MiB, "
              f"uploads {uploads / MiB:.1f} MiB)")
        print(f"  usage (serve user list): live {usage['liveBytes'] / GiB:.3f} GiB, history {usage['historyBytes'] / MiB:.1f} MiB")
        print(f"  CPU seconds over the edits: agent {used['agent']:.1f}, server {used['server']:.1f}")
        met = total <= GOAL_STORAGE
        print(f"  goal: <= 1.2 GiB in all: {total / GiB:.3f} GiB {'met' if met else 'NOT met'}")
        h.save_results("history-storage", {"title": f"History: storage after {edits} edits of 1 MiB in a 1 GiB file",
                                           "goal": {"text": "<= 1.2 GiB", "bytes": GOAL_STORAGE, "met": met},
                                           "bytes": {"total": total, "chunks": chunks, "database": database, "uploads": uploads,
                                                     "live": usage["liveBytes"], "history": usage["historyBytes"]},
                                           "versions": versions, "seconds": elapsed, "cpu": used})
    finally:
        agent.stop()
        server.stop()
        shutil.rmtree(scratch.path, ignore_errors=True)


def with_history(on):
    """Every server a benchmark starts from now on keeps history (the default) or not."""
    base = os.environ.get("SINKI_BENCH_SERVER_ARGS_BASE", os.environ.get("SINKI_BENCH_SERVER_ARGS", ""))
    os.environ["SINKI_BENCH_SERVER_ARGS_BASE"] = base
    os.environ["SINKI_BENCH_SERVER_ARGS"] = base if on else (base + " --history-days 0").strip()


def compare(label, samples):
    """samples: {True: [(seconds, cpu)], False: [...]}; prints and returns the medians and the ratio."""
    out = {}
    for on in (True, False):
        times = [t for t, _ in samples[on]]
        cpus = [c for _, c in samples[on]]
        out[on] = (statistics.median(times), statistics.median(cpus))
    ratio = out[True][0] / out[False][0] - 1
    cpu_ratio = out[True][1] / out[False][1] - 1
    print(f"  {label}: history on {out[True][0]:.3f} s ({out[True][1]:.2f} CPU s), off {out[False][0]:.3f} s ({out[False][1]:.2f} CPU s): "
          f"time {ratio:+.1%}, CPU {cpu_ratio:+.1%}; goal within 5 %: {'met' if abs(ratio) <= GOAL_RATIO else 'NOT met'}")
    return {"on": {"median": out[True][0], "cpu": out[True][1]}, "off": {"median": out[False][0], "cpu": out[False][1]},
            "ratio": ratio, "cpuRatio": cpu_ratio, "met": abs(ratio) <= GOAL_RATIO,
            "runs": {"on": samples[True], "off": samples[False]}}


def workloads(runs, which):
    results = {}
    if "w1" in which:
        template_scratch = h.Scratch("history-w1-template")
        template = template_scratch("tree")
        h.make_tree(template, w1.DIRS, w1.FILES, w1.SIZE)
        samples = {True: [], False: []}
        try:
            for run in range(runs):
                for on in (True, False):
                    with_history(on)
                    scratch = h.Scratch("history-w1")
                    seconds, cpu = w1.run_sinkid(template, scratch)
                    samples[on].append((seconds, sum(cpu.values())))
                    print(f"  W1 run {run + 1}/{runs}, history {'on' if on else 'off'} (load {h.loadavg():.2f}): {seconds:.3f} s, "
                          f"{sum(cpu.values()):.2f} CPU s", flush=True)
                    scratch.close()
        finally:
            template_scratch.close()
        results["w1"] = compare(f"W1 ({w1.TOTAL} files of 4 KiB)", samples)
    if "w5" in which:
        template_scratch = h.Scratch("history-w5-template")
        templates = w5.Templates(template_scratch)
        samples = {True: [], False: []}
        try:
            for run in range(runs):
                for on in (True, False):
                    with_history(on)
                    figures = w5.measure("sinkid", w5.Sinkid, templates, "overwrite")
                    samples[on].append((figures["time"], sum(figures["cpu"].values())))
                    print(f"  W5 run {run + 1}/{runs}, history {'on' if on else 'off'} (load {h.loadavg():.2f}): {figures['time']:.3f} s, "
                          f"{sum(figures['cpu'].values()):.2f} CPU s, {figures['sent'] / MiB:.2f} MiB sent", flush=True)
        finally:
            for path in (templates.original, templates.inserted):
                os.unlink(path)
            template_scratch.close()
        results["w5"] = compare("W5 (1 MiB overwrite in a 1 GiB file)", samples)
    with_history(True)
    if results:
        h.save_results("history-overhead", {"title": "History on against off: W1 and W5", "goal": {"text": "within 5 %"}, **results})


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--edits", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3, help="runs of W1 and W5 each way")
    parser.add_argument("--only", default="storage,w1,w5", help="comma-separated: storage, w1, w5")
    args = parser.parse_args()
    which = set(args.only.split(","))
    print(f"History (load {h.loadavg():.2f})", flush=True)
    if "storage" in which:
        storage(args.edits)
    if which & {"w1", "w5"}:
        print("\nW1 and W5 with history on against off:", flush=True)
        workloads(args.runs, which)


if __name__ == "__main__":
    main()
