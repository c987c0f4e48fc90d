"""Draws the benchmarks' figures as a chart with gnuplot (Debian's gnuplot-nox): one panel per
workload, sinkid beside each peer measured in the same run, the median as a bar with the minimum
marked, and the goal as a dashed line where it is a time.

    python3 bench/chart.py [RESULTS.json] [OUT.png]

RESULTS defaults to bench/results/latest.json (written by `bench/run`), OUT to docs/benchmarks.png.
"""
import json, os, re, subprocess, sys, tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
MiB = 1 << 20

# (workload key, panel title, what is drawn)
PANELS = [
    ("W1", "W1: 10,000 files of 4 KiB, A to B (s)", "time"),
    ("W3", "W3: one new 1 GiB file, A to B (s)", "time"),
    ("W5 overwrite", "W5: 1 MiB overwritten in a 1 GiB file (s)", "time"),
    ("W5 insert", "W5: 1 MiB inserted in a 1 GiB file (s)", "time"),
    ("W5", "W5: bytes A sent for the edit (MiB)", "bytes"),
    ("tus", "tus upload of 1 GiB (s)", "time"),
] + [
    # Over a simulated link (bench/wan.py): sinkid crosses two links, its peers one.
    (f"WAN {link} {kind}", f"WAN {label}, {what} (s)", "time")
    for link, label in (("20ms/100Mbit", "20 ms / 100 Mbit/s"), ("50ms/20Mbit", "50 ms / 20 Mbit/s"))
    for kind, what in (("new", "a new 256 MiB file"), ("edit", "a 1 MiB edit of it"), ("small", "5,000 files of 4 KiB"),
                       ("one", "one small change"))
]
ROWS = (len(PANELS) + 1) // 2


def quoted(text):
    return '"' + text.replace('"', "'") + '"'


def panel_data(results, key, kind, folder):
    """Writes the panel's data file; returns (path, goal seconds or None, subtitle) or None."""
    rows = []
    if kind == "bytes":
        over, ins = results.get("W5 overwrite"), results.get("W5 insert")
        if not over and not ins:
            return None
        names = []
        for entry in (over, ins):
            for t in (entry or {}).get("tools", []):
                if t["tool"] not in names:
                    names.append(t["tool"])
        for name in names:
            values = []
            for entry in (over, ins):
                t = next((t for t in (entry or {}).get("tools", []) if t["tool"] == name), None)
                sent = (t or {}).get("bytes", {}).get("A sent")
                values.append("NaN" if sent is None else f"{sent / MiB:.3f}")
            if all(v == "NaN" for v in values):
                continue
            rows.append(f"{quoted(name)} {values[0]} {values[1]}")
        entry = over or ins
        goal = None
    else:
        entry = results.get(key)
        if not entry:
            return None
        for t in entry.get("tools", []):
            if t.get("median") is None:
                continue
            ours = 1 if t["tool"].startswith("sinkid") else 0
            rows.append(f"{quoted(t['tool'])} {t['median']:.4f} {t.get('min', t['median']):.4f} {ours}")
        goal = entry.get("goal", {}).get("seconds")
        least = entry.get("goal", {}).get("least", 0.8)  # tus: a share of curl's throughput (0.8 before issue 22)
        if key == "tus":  # the goal is that share of curl's throughput: curl's time / the share
            curl = next((t for t in entry.get("tools", []) if t["tool"].startswith("curl")), None)
            goal = curl["median"] / least if curl else None
        if key.startswith("W5"):  # the goal is lsyncd's time (to an rsync daemon) in the same run
            lsyncd = next((t for t in entry.get("tools", []) if t["tool"] == "lsyncd (rsync daemon)"), None)
            goal = lsyncd["median"] if lsyncd else None
        if key.startswith("WAN"):  # a ratio to rsync's one hop in the same run, or a time
            text = entry.get("goal", {}).get("text", "")
            ratio, seconds = re.search(r"<= ([0-9.]+) x rsync", text), re.search(r"= ([0-9.]+) s$", text)
            rsync = next((t for t in entry.get("tools", []) if t["tool"].startswith("rsync")), None)
            goal = float(ratio.group(1)) * rsync["median"] if ratio and rsync else float(seconds.group(1)) if seconds else None
    if not rows:
        return None
    loads = [x for t in entry.get("tools", []) for x in t.get("load", [])]
    load = f", load {min(loads):.1f}-{max(loads):.1f}" if loads else ""
    path = os.path.join(folder, key.replace(" ", "_").replace("/", "_") + ".dat")
    with open(path, "w") as f:
        f.write("\n".join(rows) + "\n")
    return path, goal, f"{entry.get('date', '')}{load}"


def script(results, folder, out):
    lines = [
        f'set terminal pngcairo size 1400,{500 * ROWS} font "sans,10" noenhanced',
        f"set output {quoted(out)}",
        f"set multiplot layout {ROWS},2 title \"sinki benchmarks: sinkid beside the peers of the same run (bars: median; dots: minimum)\" font \",13\"",
        "set style fill solid 0.85 border -1",
        "set boxwidth 0.6",
        "set grid ytics lc rgb '#dddddd'",
        "set xtics rotate by -25 nomirror",
        "set ytics nomirror",
        "set border 3",
        "set yrange [0:*]",
        "set key off",
        "set bmargin 6",
    ]
    drawn = 0
    for key, title, kind in PANELS:
        data = panel_data(results, key, kind, folder)
        if not data:
            continue
        path, goal, sub = data
        drawn += 1
        if goal:
            sub += f"; goal (dashed): <= {goal:.2f} s" + (f" = {results[key].get('goal', {}).get('least', 0.8)} x curl" if key == "tus" else " = lsyncd" if key.startswith("W5") else "")
            if key.startswith("WAN") and "x rsync" in results[key].get("goal", {}).get("text", ""):
                sub += " = " + results[key]["goal"]["text"].split("<= ")[1]
        lines.append(f"set title {quoted(title + chr(92) + 'n' + sub)}")
        if kind == "bytes":
            goals = results.get("W5 overwrite", {}).get("goal", {}).get("bytes"), results.get("W5 insert", {}).get("goal", {}).get("bytes")
            lines += ["set key top left", "set style data histograms", "set style histogram clustered gap 1",
                      f"plot {quoted(path)} using 2:xtic(1) title 'overwrite' lc rgb '#1f77b4', "
                      f"'' using 3 title 'insert' lc rgb '#ff7f0e'"
                      + "".join(f", {g / MiB:.0f} with lines dt 2 lc rgb '{c}' title 'goal {n}: {g / MiB:.0f} MiB'"
                                for g, c, n in zip(goals, ("#1f77b4", "#ff7f0e"), ("overwrite", "insert")) if g),
                      "set key off", "unset style data"]
            continue
        plot = (f"plot {quoted(path)} using 0:2:($4 > 0 ? 0x1f77b4 : 0x999999):xtic(1) with boxes lc rgb variable, "
                f"'' using 0:3 with points pt 7 ps 0.8 lc rgb 'black', "
                f"'' using 0:2:(sprintf('%.2f', $2)) with labels offset 0,0.8")
        if goal:
            plot += f", {goal:.4f} with lines dt 2 lw 1.5 lc rgb '#d62728'"
        lines.append(plot)
    lines.append("unset multiplot")
    return "\n".join(lines) + "\n", drawn


def main():
    source = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "results", "latest.json")
    out = sys.argv[2] if len(sys.argv) > 2 else os.path.join(REPO, "docs", "benchmarks.png")
    with open(source) as f:
        results = json.load(f)
    with tempfile.TemporaryDirectory(prefix="sinki-chart-") as folder:
        text, drawn = script(results, folder, out)
        if not drawn:
            sys.exit(f"chart: nothing to draw in {source}")
        with open(os.path.join(folder, "chart.gp"), "w") as f:
            f.write(text)
        subprocess.run(["gnuplot", os.path.join(folder, "chart.gp")], check=True)
    print(f"chart: {drawn} panels from {source} in {out}")


if __name__ == "__main__":
    main()
