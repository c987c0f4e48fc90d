"""W1: 10,000 files of 4 KiB in 100 folders, from A to B, until B is identical.

sinkid: a server and agents A and B on loopback, both idle; the tree is renamed into A's root
(instant) and the clock stops when B holds every file (then B is compared byte for byte).
Peers, in the same sequence, each run: rsync -a, Unison, rclone bisync (one-shot copies of a
ready tree), lsyncd (delay 0) and Syncthing (two instances on loopback, tree renamed in as for
sinkid). Median and minimum of --runs runs. Every tool starts with nothing dirty in the page cache (the
staging copy is flushed before the clock starts): an agent that makes its writes durable (sinkid's
one syncfs per batch) would otherwise pay for flushing the benchmark's own setup.
"""
import argparse, json, os, shutil, subprocess, sys, time
import harness as h

DIRS, FILES, SIZE = 100, 100, 4096
TOTAL = DIRS * FILES
GOAL = 1.0  # seconds


def run_sinkid(template, scratch):
    pair = h.SinkiPair(scratch, "W1")
    try:
        staged = scratch("staged")
        shutil.copytree(template, staged)
        os.sync()  # the copy is setup: its dirty pages are not the workload's to flush
        counter = h.file_counter(pair.roots["B"])
        cpu = h.CPUWindow({"agent A": pair.agents["A"], "server": pair.server, "agent B": pair.agents["B"]})
        t0 = time.monotonic()
        os.rename(staged, os.path.join(pair.roots["A"], "tree"))
        t1 = h.wait_count(counter, TOTAL)
        used = cpu.read()
        ok, diff = h.trees_equal(os.path.join(pair.roots["A"], "tree"), os.path.join(pair.roots["B"], "tree"))
        if not ok:
            raise RuntimeError(f"sinkid: B differs from A: {diff}")
        return t1 - t0, used
    finally:
        pair.stop()


def run_rsync(template, scratch):
    os.sync()
    seconds, cpu = h.run_timed(["rsync", "-a", template + "/", scratch("dst") + "/"])
    return seconds, {"rsync": cpu}


def run_unison(template, scratch):
    a, b = scratch("a"), scratch("b")
    shutil.copytree(template, a)
    os.sync()  # the copy is setup: its dirty pages are not the workload's to flush
    os.makedirs(b)
    env = dict(os.environ, UNISON=scratch("unison-home"))
    seconds, cpu = h.run_timed(["unison", a, b, "-batch", "-auto", "-silent", "-ui", "text", "-times"], env=env)
    return seconds, {"unison": cpu}


def run_rclone(template, scratch):
    a, b = scratch("a"), scratch("b")
    shutil.copytree(template, a)
    os.sync()  # the copy is setup: its dirty pages are not the workload's to flush
    os.makedirs(b)
    env = dict(os.environ, RCLONE_CONFIG=scratch("rclone.conf"), XDG_CACHE_HOME=scratch("cache"))
    seconds, cpu = h.run_timed(["rclone", "bisync", a, b, "--resync", "-q"], env=env)
    return seconds, {"rclone": cpu}


def run_lsyncd(template, scratch):
    a, b, proc = h.start_lsyncd(scratch)
    try:
        staged = scratch("staged")
        shutil.copytree(template, staged)
        os.sync()  # the copy is setup: its dirty pages are not the workload's to flush
        counter = h.file_counter(b)
        cpu = h.CPUWindow({"lsyncd + rsync": proc})
        t0 = time.monotonic()
        os.rename(staged, os.path.join(a, "tree"))
        t1 = h.wait_count(counter, TOTAL)
        return t1 - t0, cpu.read()
    finally:
        proc.stop()


def run_syncthing(template, scratch):
    import syncthing_pair
    pair = syncthing_pair.Pair(scratch, "w1")
    try:
        staged = scratch("staged")
        shutil.copytree(template, staged)
        os.sync()  # the copy is setup: its dirty pages are not the workload's to flush
        counter = h.file_counter(pair.roots[1])
        cpu = h.CPUWindow({"syncthing A": pair.procs[0], "syncthing B": pair.procs[1]})
        t0 = time.monotonic()
        os.rename(staged, os.path.join(pair.roots[0], "tree"))
        t1 = h.wait_count(counter, TOTAL, timeout=300)
        return t1 - t0, cpu.read()
    finally:
        pair.stop()


PEERS = [("sinkid", run_sinkid, None), ("rsync -a", run_rsync, "rsync"), ("unison", run_unison, "unison"),
         ("lsyncd (delay 0)", run_lsyncd, "lsyncd"), ("rclone bisync", run_rclone, "rclone"),
         ("syncthing", run_syncthing, "syncthing")]


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--only", help="comma-separated tools to run")
    parser.add_argument("--json", help="write results here")
    args = parser.parse_args()
    template_scratch = h.Scratch("w1-template")
    template = template_scratch("tree")
    h.make_tree(template, DIRS, FILES, SIZE)
    chosen = h.chosen_peers(PEERS, args.only)
    extras = {}
    try:
        samples = h.run_rounds(chosen, args.runs, "w1", template, extras)
    finally:
        template_scratch.close()
    rows = [h.summarize(name, samples[name], extras[name]) for name, _, _ in chosen]
    h.print_table(f"W1: {TOTAL} files of {SIZE} B in {DIRS} folders, A to B (goal: sinkid <= {GOAL} s)", rows)
    ours = rows[0] if rows and rows[0] and rows[0]["name"] == "sinkid" else None
    if ours:
        print(f"\n  goal: sinkid <= {GOAL} s: median {ours['median']:.2f} s {'met' if ours['median'] <= GOAL else 'NOT met'}")
    h.save_results("W1", {"title": f"W1: {TOTAL:,} files of 4 KiB, A to B",
                          "goal": {"text": f"sinkid <= {GOAL} s", "seconds": GOAL, "met": ours["median"] <= GOAL if ours else None},
                          "tools": h.tool_rows(rows)})
    if args.json:
        with open(args.json, "w") as f:
            json.dump([r for r in rows if r], f, indent=2)


if __name__ == "__main__":
    main()
