"""An agent watching 100,000 files of 1 KiB in 1,000 folders: the initial sync, then 60 s with
nothing changing (CPU seconds from /proc, RSS), then a restart with nothing changed (time until the
agent reports itself up to date in its log, confirmed by `sinkid status`, against `find ROOT -printf '%s %T@\\n'` in the same run). Syncthing
scans the same tree in the same run (one instance, no peer): scan time, RSS, idle CPU.
Goals: 0 CPU seconds idle, <= 64 MiB RSS; restart <= 2x find."""
import argparse, datetime, json, os, re, shutil, subprocess, sys, time
import harness as h

def memory_kib(pid, field):
    """`field` of the process, or of the largest process below it: `syncthing serve` is a monitor
    that runs the real syncthing as its child."""
    best = 0
    for p in [pid] + h.descendants(pid):
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith(field + ":"):
                        best = max(best, int(line.split()[1]))
        except FileNotFoundError:
            pass
    return best


def stamp(text):
    """Seconds since the epoch of a log line's time (`2026-11-29T18:40:07.180Z`)."""
    return datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.timezone.utc).timestamp()


def status(state):
    r = subprocess.run([h.sinkid(), "status", "--json", "--state", state], capture_output=True, text=True)
    try:
        return json.loads(r.stdout)
    except ValueError:
        return None


def wait_idle(state, timeout=600):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        s = status(state)
        if s and s.get("agent", {}).get("state") == "up-to-date" and s.get("pending", {}).get("count") == 0:
            return time.monotonic()
        time.sleep(0.1)
    raise TimeoutError(f"agent not idle: {status(state)}")


def run_sinkid(tree, scratch, idle_seconds):
    server, port, data = h.serve(scratch)
    args = [h.sinkid(), "--root", tree, "--server", f"http://127.0.0.1:{port}", "--state", scratch("state"), "--device", "idle",
            "--token-file", h.token_file(scratch, data, "idle"), "--log-level", "warning"]
    try:
        time.sleep(0.3)
        t0 = time.monotonic()
        agent = h.Proc(args, scratch("agent.log"))
        t1 = wait_idle(scratch("state"))
        out = {"initial sync s": t1 - t0}
        pid = agent.p.pid
        time.sleep(2)  # let the last acknowledgements settle before the quiet minute starts
        c0 = h.cpu_seconds(pid)
        time.sleep(idle_seconds)
        out["idle CPU s"] = h.cpu_seconds(pid) - c0
        out["idle RSS MiB"] = memory_kib(pid, "VmRSS") / 1024
        out["peak RSS MiB"] = memory_kib(pid, "VmHWM") / 1024
        agent.stop()
        # Restart with nothing changed, against find over the same tree (warm cache for both); the
        # median of three.
        finds, restarts, polled = [], [], []
        for run in range(3):
            t0 = time.monotonic()
            subprocess.run(["find", tree, "-printf", "%s %T@\n"], stdout=subprocess.DEVNULL, check=True)
            finds.append(time.monotonic() - t0)
            restart_args = args[:-1] + ["info"]  # its "scanned" and "up to date" lines carry their times
            wall0 = time.time()
            t0 = time.monotonic()
            agent = h.Proc(restart_args, scratch(f"agent-restart-{run}.log"))
            t1 = wait_idle(scratch("state"))
            # Polling status every 100 ms (each poll a process) adds up to a poll's worth of delay;
            # the agent's own log says when it was up to date, to the millisecond.
            log = agent.text()
            scanned = re.search(r"^(\S+) INFO sinkid: scanned .*; 0 local change", log, re.M)
            caught_up = re.search(r"^(\S+) INFO sinkid: up to date with", log, re.M)
            if scanned and caught_up:
                restarts.append(max(stamp(scanned.group(1)), stamp(caught_up.group(1))) - wall0)
            polled.append(t1 - t0)
            agent.stop()
        out["find s"] = sorted(finds)[1]
        if len(restarts) == 3:
            out["restart s"] = sorted(restarts)[1]
        out["restart s (status poll)"] = sorted(polled)[1]
        return out
    finally:
        server.stop()


def run_syncthing(tree, scratch, idle_seconds):
    import syncthing_pair
    import xml.etree.ElementTree as ET
    home = scratch("st-home")
    subprocess.run(["syncthing", "generate", f"--home={home}", "--no-default-folder", "--skip-port-probing"], check=True, capture_output=True)
    own = subprocess.run(["syncthing", "serve", f"--home={home}", "--device-id"], check=True, capture_output=True, text=True).stdout.strip()
    os.makedirs(os.path.join(tree, ".stfolder"), exist_ok=True)
    gui = h.free_port()
    path = os.path.join(home, "config.xml")
    cfg = ET.parse(path)
    root = cfg.getroot()
    folder = ET.SubElement(root, "folder", id="idle", label="idle", path=tree, type="sendreceive", rescanIntervalS="3600",
                           fsWatcherEnabled="true", fsWatcherDelayS="10")
    ET.SubElement(folder, "device", id=own, introducedBy="")
    root.find("gui").find("address").text = f"127.0.0.1:{gui}"
    key = root.find("gui").find("apikey").text
    options = root.find("options")
    for name, value in {"listenAddress": f"tcp://127.0.0.1:{h.free_port()}", "globalAnnounceEnabled": "false",
                        "localAnnounceEnabled": "false", "relaysEnabled": "false", "natEnabled": "false", "urAccepted": "-1",
                        "autoUpgradeIntervalH": "0", "startBrowser": "false", "crashReportingEnabled": "false"}.items():
        for old in options.findall(name):
            options.remove(old)
        ET.SubElement(options, name).text = value
    cfg.write(path)
    import urllib.request

    def state():
        req = urllib.request.Request(f"http://127.0.0.1:{gui}/rest/db/status?folder=idle", headers={"X-API-Key": key})
        with urllib.request.urlopen(req, timeout=5) as r:
            return json.loads(r.read())

    t0 = time.monotonic()
    proc = h.Proc(["syncthing", "serve", f"--home={home}", "--no-browser", "--no-restart"], scratch("st.log"),
                  env={"STNOUPGRADE": "1", "STNORESTART": "1"})
    try:
        deadline = time.monotonic() + 900
        while time.monotonic() < deadline:
            try:
                s = state()
                if s["state"] == "idle" and s["localFiles"] >= 100_000:
                    break
            except Exception:
                pass
            time.sleep(0.2)
        out = {"initial sync s": time.monotonic() - t0}
        pid = proc.p.pid
        out["RSS after scan MiB"] = memory_kib(pid, "VmRSS") / 1024
        time.sleep(2)
        c0 = h.cpu_seconds(pid)
        time.sleep(idle_seconds)
        out["idle CPU s"] = h.cpu_seconds(pid) - c0
        out["idle RSS MiB"] = memory_kib(pid, "VmRSS") / 1024
        out["peak RSS MiB"] = memory_kib(pid, "VmHWM") / 1024
        return out
    finally:
        proc.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--idle", type=int, default=60, help="seconds of quiet to measure")
    parser.add_argument("--only", help="sinkid,syncthing")
    args = parser.parse_args()
    template = h.Scratch("idle-tree")
    tree = template("Idle")
    h.make_tree(tree, 1000, 100, 1024)
    results = {}
    load = h.loadavg()
    for name, fn, binary in [("sinkid", run_sinkid, None), ("syncthing", run_syncthing, "syncthing")]:
        if args.only and name not in args.only.split(","):
            continue
        if binary and not h.have(binary):
            continue
        scratch = h.Scratch(f"idle-{name}")
        copy = scratch("Idle")
        shutil.copytree(tree, copy)
        try:
            results[name] = fn(copy, scratch, args.idle)
            print(f"  {name}: " + ", ".join(f"{k} {v:.2f}" for k, v in results[name].items()), flush=True)
        except Exception as e:
            print(f"  {name}: failed: {e}", file=sys.stderr)
        scratch.close()
    template.close()
    print(f"\nIdle: 100,000 files of 1 KiB in 1,000 folders, {args.idle} s with nothing changing")
    print("  goals: sinkid 0 CPU s idle, <= 64 MiB RSS; restart until up to date <= 2x find")
    for name, r in results.items():
        print(f"  {name:<10} " + "  ".join(f"{k}: {v:.2f}" for k, v in r.items()))
    s = results.get("sinkid")
    if s and "find s" in s and "restart s" in s:
        print(f"  restart / find = {s['restart s'] / s['find s']:.2f}x (from the agent's log; "
              f"{s['restart s (status poll)'] / s['find s']:.2f}x as seen by polling sinkid status every 100 ms)")
    if s and "syncthing" in results:
        t = results["syncthing"]
        print(f"  idle RSS: sinkid {s['idle RSS MiB']:.0f} MiB vs syncthing {t['idle RSS MiB']:.0f} MiB "
              f"(sinkid uses {s['idle RSS MiB'] / max(t['idle RSS MiB'], 0.1):.2f}x syncthing's)")
    h.save_results("idle", {"title": f"idle: 100,000 files of 1 KiB watched, {args.idle} s with nothing changing; restart",
                            "goal": {"text": "sinkid 0 CPU s idle, <= 64 MiB RSS; restart <= 2x find"},
                            "tools": [{"tool": name, "figures": r, "load": [load]} for name, r in results.items()]})


if __name__ == "__main__":
    main()
