"""Propagation latency of one 4 KiB change (written to a temporary name, renamed over the file)
from A to B: sinkid through a server on loopback, lsyncd (delay 0: a local rsync, no server) and
Syncthing (fsWatcherDelayS=1) in the same run. 50 changes each; p50 and p95. The receiving side is
watched with inotify, so measuring adds no polling delay."""
import argparse, os, shutil, statistics, sys, time
import harness as h
from inotify_wait import DirectoryWatch

SIZE = 4096


def change_and_wait(src_dir, dst_dir, name, timeout=30):
    data = os.urandom(SIZE)
    watch = DirectoryWatch(dst_dir)
    try:
        tmp = os.path.join(src_dir, f".{name}.tmp{os.getpid()}")
        t0 = time.monotonic()
        with open(tmp, "wb") as f:
            f.write(data)
        os.rename(tmp, os.path.join(src_dir, name))
        target = os.path.join(dst_dir, name)

        def arrived():
            try:
                with open(target, "rb") as f:
                    return f.read() == data
            except FileNotFoundError:
                return False
        t1 = watch.wait_until(arrived, timeout)
        return (t1 - t0) * 1000
    finally:
        watch.close()


def measure(src, dst, count, settle=1.05):
    samples = []
    for i in range(count):
        # Between changes, not measured: more than a second, because rsync (under lsyncd) skips a
        # same-size file whose mtime has not moved to another second.
        time.sleep(settle)
        samples.append(change_and_wait(src, dst, "doc.txt"))
    return samples


def run_sinkid(scratch, count):
    pair = h.SinkiPair(scratch, "Lat")
    try:
        with open(os.path.join(pair.roots["A"], "doc.txt"), "wb") as f:
            f.write(os.urandom(SIZE))
        h.wait_count(pair.roots["B"], 1)
        return measure(pair.roots["A"], pair.roots["B"], count)
    finally:
        pair.stop()


def run_lsyncd(scratch, count):
    a, b, proc = h.start_lsyncd(scratch)
    try:
        with open(os.path.join(a, "doc.txt"), "wb") as f:
            f.write(os.urandom(SIZE))
        h.wait_count(b, 1)
        return measure(a, b, count)
    finally:
        proc.stop()


def run_syncthing(scratch, count):
    import syncthing_pair
    pair = syncthing_pair.Pair(scratch, "lat")
    try:
        with open(os.path.join(pair.roots[0], "doc.txt"), "wb") as f:
            f.write(os.urandom(SIZE))
        h.wait_count(pair.roots[1], 1, timeout=60)
        return measure(pair.roots[0], pair.roots[1], count)
    finally:
        pair.stop()


def percentile(samples, p):
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--changes", type=int, default=50)
    parser.add_argument("--only", help="comma-separated: sinkid,lsyncd,syncthing")
    args = parser.parse_args()
    tools = [("sinkid", run_sinkid, None), ("lsyncd (delay 0)", run_lsyncd, "lsyncd"), ("syncthing (fsWatcherDelayS=1)", run_syncthing, "syncthing")]
    rows = []
    load = h.loadavg()
    for name, fn, binary in tools:
        if args.only and name.split()[0] not in args.only.split(","):
            continue
        if binary and not h.have(binary):
            print(f"  {name}: not installed", file=sys.stderr)
            continue
        scratch = h.Scratch("lat")
        try:
            samples = fn(scratch, args.changes)
            rows.append((name, percentile(samples, 50), percentile(samples, 95), len(samples)))
            print(f"  {name}: p50 {rows[-1][1]:.1f} ms, p95 {rows[-1][2]:.1f} ms", flush=True)
        except Exception as e:
            print(f"  {name}: failed: {e}", file=sys.stderr)
        finally:
            scratch.close()
    print(f"\nLatency of one 4 KiB change, A to B ({args.changes} changes; goal: sinkid p50 <= 15 ms, p95 <= 40 ms)")
    print(f"  {'tool':<32}{'p50':>10}{'p95':>10}   {'sinkid p50 is':>16}")
    ours = next((r for r in rows if r[0] == "sinkid"), None)
    for name, p50, p95, n in rows:
        ratio = ""
        if ours and name != "sinkid":
            ratio = f"{p50 / ours[1]:.1f}x faster" if p50 >= ours[1] else f"{ours[1] / p50:.1f}x slower"
        print(f"  {name:<32}{p50:>8.1f}ms{p95:>8.1f}ms   {ratio:>16}")
    h.save_results("latency", {"title": "latency of one 4 KiB change, A to B",
                               "goal": {"text": "sinkid p50 <= 15 ms, p95 <= 40 ms",
                                        "met": (ours[1] <= 15 and ours[2] <= 40) if ours else None},
                               "tools": [{"tool": name, "median": p50 / 1000, "p95": p95 / 1000, "runs": n, "unit": "s",
                                          "load": [load]} for name, p50, p95, n in rows]})


if __name__ == "__main__":
    main()
