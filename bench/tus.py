"""tus upload: a 1 GiB file from `sinkid upload` to `sinkid serve` on loopback, against `curl -T` of the
same file to the same server (one plain PATCH to an upload created just before) in the same run.

Goals: throughput >= 0.9x curl's (issue 22; 0.8x before it), and the uploading client's peak RSS <= 64 MiB. sinkid upload runs as
the agent would use the client (defaults: 16 MiB chunks, each with an Upload-Checksum (crc32), one upload),
then --no-checksum (the same bytes on the wire as curl's PATCH, in 16 MiB requests), and with four
parallel partial uploads joined by concatenation (--parallel 4). Every upload is
deleted after its run. Median and minimum of --runs runs.

Then the agent: `sinkid --root` uploads the same 1 GiB file (16 MiB chunks), is killed with SIGKILL
half-way, and is started again; it goes on from the server's offset. Printed: the bytes it sent again
(goal: at most one chunk), and its peak RSS over both runs (goal: at most 64 MiB).
"""
import argparse, os, re, resource, signal, subprocess, time, urllib.parse, urllib.request
import harness as h

SIZE = 1 << 30
# sinkid upload's throughput against curl -T's (issue 22).
GOAL = 0.9


# The server's device token (servers refuse requests without one): set by main.
TOKEN = {"secret": "", "file": ""}


def auth():
    return {"Authorization": "Bearer " + TOKEN["secret"]}


def create_upload(base, length):
    req = urllib.request.Request(base + "/v1/uploads/", method="POST",
                                 headers={"Tus-Resumable": "1.0.0", "Upload-Length": str(length), **auth()})
    with urllib.request.urlopen(req) as response:
        # Absolute (the server's public origin) or relative to the endpoint.
        return urllib.parse.urljoin(base + "/v1/uploads/", response.headers["Location"])


def delete(url):
    req = urllib.request.Request(url, method="DELETE", headers={"Tus-Resumable": "1.0.0", **auth()})
    try:
        urllib.request.urlopen(req).close()
    except Exception:
        pass


def peak_rss(pid):
    """VmHWM of a running process in MiB (its own peak: unlike ru_maxrss, not the forking parent's)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def children_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(argv):
    """Runs argv; returns (seconds, peak RSS in MiB, stdout, CPU seconds). The peak is read every 5 ms
    while it runs."""
    cpu0 = children_cpu()
    t0 = time.monotonic()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    peak = 0.0
    while p.poll() is None:
        peak = max(peak, peak_rss(p.pid))
        time.sleep(0.005)
    elapsed = time.monotonic() - t0
    cpu = children_cpu() - cpu0
    out, err = p.stdout.read().decode(), p.stderr.read().decode()
    if p.returncode != 0:
        raise RuntimeError(f"{argv[0]} {argv[1]} exited {p.returncode}:\n{err[-2000:]}")
    return elapsed, peak, out, cpu


def run_curl(base, path):
    url = create_upload(base, SIZE)
    seconds, rss, _, cpu = timed(["curl", "-sS", "-f", "-T", path, "-X", "PATCH", "-H", "Tus-Resumable: 1.0.0",
                             "-H", "Content-Type: application/offset+octet-stream", "-H", "Upload-Offset: 0", "-H", "Expect:",
                             "-H", "Authorization: Bearer " + TOKEN["secret"],
                             "-o", "/dev/null", url])
    delete(url)
    return seconds, rss, cpu


def run_sinkid(base, path, scratch, extra):
    state = scratch("state-%d" % time.monotonic_ns())
    seconds, rss, out, cpu = timed([h.sinkid(), "upload", path, "--to", base + "/v1/uploads/", "--state", state,
                               "--token-file", TOKEN["file"], "--log-level", "warning", *extra])
    delete(out.strip())
    return seconds, rss, cpu


def upload_sizes(server_data):
    folder = os.path.join(server_data, "uploads")
    try:
        return [os.path.getsize(os.path.join(folder, n)) for n in os.listdir(folder) if n.endswith(".bin")]
    except FileNotFoundError:
        return []


def bytes_on_server(server_data):
    """What the server holds of uploads: tus uploads under way or finished (`uploads/*.bin`) and
    the chunks stored from finished chunk uploads, in packs (`chunks/USER/packs/ID`, and files of
    the layout before packs, `chunks/USER/XX/HASH`; docs/server.md "Chunks")."""
    total = sum(upload_sizes(server_data))
    for top, dirs, files in os.walk(os.path.join(server_data, "chunks")):
        for name in files:
            packed = os.path.basename(top) == "packs"
            if len(name) == 64 or packed:
                try:
                    total += os.path.getsize(os.path.join(top, name))
                except FileNotFoundError:
                    pass
    return total


def agent_kill_resume(base, path, scratch, chunk=16 << 20):
    """The agent uploads `path`, is killed half-way, and started again: (bytes sent again, peak RSS MiB)."""
    root = scratch("agent-root", "KillResume")
    os.makedirs(root)
    state = scratch("agent-state")
    argv = [h.sinkid(), "--root", root, "--server", base, "--state", state, "--device", "killed", "--log-level", "info",
            "--token-file", TOKEN["file"]]
    agent = h.Proc(argv, scratch("agent-1.log"))
    peak = 0.0
    try:
        agent.wait_for(r"up to date with")
        server_data = scratch("server")
        before = bytes_on_server(server_data)  # the uploads of the runs above are deleted
        os.link(path, os.path.join(root, "big.bin"))
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            peak = max(peak, peak_rss(agent.p.pid))
            if bytes_on_server(server_data) - before >= SIZE // 2:
                break
            time.sleep(0.01)
        agent.stop(signal.SIGKILL)
        on_server = bytes_on_server(server_data) - before
        again = h.Proc(argv, scratch("agent-2.log"))
        try:
            while True:
                peak = max(peak, peak_rss(again.p.pid))
                # "N bytes, M sent now" (one tus upload) or "N bytes in K chunk(s), M sent now" (chunks)
                m = re.search(r'uploaded "KillResume/big.bin": \d+ bytes(?: in \d+ chunk\(s\))?, (\d+) sent now', again.text())
                if m:
                    break
                if again.p.poll() is not None or time.monotonic() > deadline + 120:
                    raise RuntimeError("the agent did not finish the upload:\n" + again.text()[-2000:])
                time.sleep(0.005)
        finally:
            again.stop()
        sent_now = int(m.group(1))
        return sent_now - (SIZE - on_server), on_server, peak
    finally:
        agent.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    scratch = h.Scratch("tus")
    # The client's throughput is measured, not the server's limit per token (200 MiB a second: each
    # MiB counts as a request), which 21 GiB from one token in a minute would meet.
    server, port, data = h.serve(scratch, extra=("--rate-limit", "0"))
    TOKEN["file"] = h.token_file(scratch, data, "tus")
    with open(TOKEN["file"]) as f:
        TOKEN["secret"] = f.read().strip()
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                urllib.request.urlopen(urllib.request.Request(base + "/v1/uploads/", method="OPTIONS", headers=auth())).close()
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        path = scratch("1GiB.bin")
        with open(path, "wb") as f:
            for _ in range(SIZE >> 24):
                f.write(os.urandom(1 << 24))
        variants = [
            ("curl -T (one PATCH)", lambda: run_curl(base, path)),
            ("sinkid upload", lambda: run_sinkid(base, path, scratch, [])),
            ("sinkid --no-checksum", lambda: run_sinkid(base, path, scratch, ["--no-checksum"])),
            ("sinkid --parallel 4", lambda: run_sinkid(base, path, scratch, ["--parallel", "4"])),
        ]
        times = {name: [] for name, _ in variants}
        loads = {name: [] for name, _ in variants}
        peaks = {name: [] for name, _ in variants}
        client_cpu = {name: [] for name, _ in variants}
        server_cpu = {name: [] for name, _ in variants}
        run_curl(base, path)  # warm the page cache for everyone
        for run in range(args.runs):
            for name, fn in variants:
                loads[name].append(h.loadavg())
                before = h.cpu_seconds(server.p.pid)
                seconds, rss, cpu = fn()
                server_cpu[name].append(h.cpu_seconds(server.p.pid) - before)
                client_cpu[name].append(cpu)
                times[name].append(seconds)
                peaks[name].append(rss)
            print(f"run {run + 1}/{args.runs}: " + ", ".join(f"{n} {times[n][-1]:.2f}s" for n, _ in variants), flush=True)
        curl = h.summarize("curl", times["curl -T (one PATCH)"])
        print(f"\ntus upload of 1 GiB to sinkid serve on loopback ({args.runs} runs)")
        print(f"  {'client':<24}{'median':>9}{'min':>9}{'MiB/s':>9}{'vs curl':>9}{'peak RSS':>11}{'CPU s client':>14}{'server':>8}")
        tools = []
        for name, _ in variants:
            s = h.summarize(name, times[name])
            ratio = curl["median"] / s["median"]
            c, v = sorted(client_cpu[name])[len(client_cpu[name]) // 2], sorted(server_cpu[name])[len(server_cpu[name]) // 2]
            print(f"  {name:<24}{s['median']:>8.2f}s{s['min']:>8.2f}s{1024 / s['median']:>9.0f}{ratio:>8.2f}x{max(peaks[name]):>8.1f} MiB"
                  f"{c:>13.2f}{v:>8.2f}")
            tools.append({"tool": name, "median": s["median"], "min": s["min"], "runs": s["runs"], "unit": "s",
                          "cpu": {"client": c, "server": v}, "load": loads[name],
                          "figures": {"MiB/s": 1024 / s["median"], "vs curl": ratio, "peak RSS MiB": max(peaks[name])}})
        print(f"  (CPU s: medians; client and server share {os.cpu_count()} cores; load at each run: "
              + ", ".join("/".join(f"{x:.1f}" for x in loads[n]) for n, _ in variants[:1]) + ")")
        ours = h.summarize("sinkid upload", times["sinkid upload"])
        ratio = curl["median"] / ours["median"]
        rss = max(peaks["sinkid upload"])
        print(f"\n  goal: sinkid upload >= {GOAL}x curl: {ratio:.2f}x {'met' if ratio >= GOAL else 'NOT met'}; "
              f"peak RSS <= 64 MiB: {rss:.1f} MiB {'met' if rss <= 64 else 'NOT met'}")
        again, on_server, agent_peak = agent_kill_resume(base, path, scratch)
        chunk = 16 << 20
        print(f"\nagent killed (SIGKILL) with {on_server / (1 << 20):.0f} MiB of 1 GiB on the server, then started again:")
        print(f"  bytes sent again: {again} ({again / (1 << 20):.2f} MiB; goal <= one 16 MiB chunk: {'met' if again <= chunk else 'NOT met'})")
        print(f"  agent peak RSS over both runs: {agent_peak:.1f} MiB (goal <= 64 MiB: {'met' if agent_peak <= 64 else 'NOT met'})")
        h.save_results("tus", {"title": "tus upload of 1 GiB to sinkid serve, against curl -T in the same run",
                               "goal": {"text": f"sinkid upload >= {GOAL} x curl -T, checksums on; peak RSS <= 64 MiB",
                                        "met": ratio >= GOAL and rss <= 64, "ratio": ratio, "least": GOAL},
                               "tools": tools,
                               "agent killed half-way": {"bytes sent again": again, "on server MiB": on_server / (1 << 20),
                                                         "peak RSS MiB": agent_peak}})
    finally:
        server.stop()
        scratch.close()


if __name__ == "__main__":
    main()
