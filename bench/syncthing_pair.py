"""Two Syncthing instances on loopback sharing one folder: the peer the issues measure against.

Settings: fsWatcherDelayS=1 (as in the issues' figures), no discovery, relays, NAT or usage
reporting; everything on 127.0.0.1.
"""
import json, os, subprocess, time, urllib.request
import xml.etree.ElementTree as ET
import harness as h


class Pair:
    def __init__(self, scratch, folder_id, watcher_delay=1, dial=None):
        """`dial(ports)`, given the ports the instances listen on, returns the ports at which each is
        reached by the other (a counting proxy in front of it); by default the same ports."""
        self.s = scratch
        self.homes = [scratch("st-home-a"), scratch("st-home-b")]
        self.roots = [scratch("st-a", folder_id), scratch("st-b", folder_id)]
        self.ids, self.ports, self.gui, self.keys, self.procs = [], [], [], [], []
        for home, root in zip(self.homes, self.roots):
            os.makedirs(os.path.join(root, ".stfolder"), exist_ok=True)
            subprocess.run(["syncthing", "generate", f"--home={home}", "--no-default-folder", "--skip-port-probing"],
                           check=True, capture_output=True)
            out = subprocess.run(["syncthing", "serve", f"--home={home}", "--device-id"], check=True,
                                 capture_output=True, text=True).stdout.strip()
            self.ids.append(out)
            self.ports.append(h.free_port())
            self.gui.append(h.free_port())
        self.dial_ports = list(dial(list(self.ports))) if dial else list(self.ports)
        for i, home in enumerate(self.homes):
            self.keys.append(self._configure(i, folder_id, watcher_delay))
        for i, home in enumerate(self.homes):
            env = {"STNOUPGRADE": "1", "STNORESTART": "1"}
            self.procs.append(h.Proc(["syncthing", "serve", f"--home={home}", "--no-browser", "--no-restart"],
                                     scratch(f"st-{i}.log"), env=env))
        self._wait_connected(folder_id)

    def _configure(self, i, folder_id, watcher_delay):
        path = os.path.join(self.homes[i], "config.xml")
        tree = ET.parse(path)
        root = tree.getroot()
        for d in root.findall("device"):
            root.remove(d)
        for f in root.findall("folder"):
            root.remove(f)
        folder = ET.SubElement(root, "folder", id=folder_id, label=folder_id, path=self.roots[i], type="sendreceive",
                               rescanIntervalS="3600", fsWatcherEnabled="true", fsWatcherDelayS=str(watcher_delay),
                               ignorePerms="false", autoNormalize="true")
        for j, device_id in enumerate(self.ids):
            ET.SubElement(folder, "device", id=device_id, introducedBy="")
            dev = ET.SubElement(root, "device", id=device_id, name=f"dev{j}", compression="metadata",
                                introducer="false", skipIntroductionRemovals="false", introducedBy="")
            ET.SubElement(dev, "address").text = f"tcp://127.0.0.1:{self.dial_ports[j]}"
            ET.SubElement(dev, "paused").text = "false"
            ET.SubElement(dev, "autoAcceptFolders").text = "false"
        # Device elements must come before folders? Syncthing accepts any order; keep options valid.
        gui = root.find("gui")
        gui.find("address").text = f"127.0.0.1:{self.gui[i]}"
        key = gui.find("apikey").text
        options = root.find("options")
        settings = {"listenAddress": f"tcp://127.0.0.1:{self.ports[i]}", "globalAnnounceEnabled": "false",
                    "localAnnounceEnabled": "false", "relaysEnabled": "false", "natEnabled": "false",
                    "urAccepted": "-1", "autoUpgradeIntervalH": "0", "startBrowser": "false",
                    "crashReportingEnabled": "false"}
        for name, value in settings.items():
            for old in options.findall(name):
                options.remove(old)
            ET.SubElement(options, name).text = value
        tree.write(path)
        return key

    def api(self, i, path):
        req = urllib.request.Request(f"http://127.0.0.1:{self.gui[i]}{path}", headers={"X-API-Key": self.keys[i]})
        with urllib.request.urlopen(req, timeout=5) as r:
            return json.loads(r.read())

    def _wait_connected(self, folder_id, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                c = self.api(0, "/rest/system/connections")["connections"]
                if c.get(self.ids[1], {}).get("connected"):
                    states = [self.api(i, f"/rest/db/status?folder={folder_id}")["state"] for i in (0, 1)]
                    if all(s == "idle" for s in states):
                        return
            except Exception:
                pass
            time.sleep(0.1)
        raise TimeoutError("syncthing instances did not connect:\n" + self.procs[0].text()[-2000:])

    def wait_in_sync(self, folder_id, files, timeout=120):
        """Both instances idle, each holding `files` files that are the global version, each seeing
        the other complete: for trees placed on both sides before the start."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                ok = True
                for i in (0, 1):
                    st = self.api(i, f"/rest/db/status?folder={folder_id}")
                    other = self.api(i, f"/rest/db/completion?folder={folder_id}&device={self.ids[1 - i]}")
                    ok = ok and st["state"] == "idle" and st["needFiles"] == 0 and st["inSyncFiles"] == files \
                        and st["globalFiles"] == files and other["completion"] == 100 and other["needBytes"] == 0
                if ok:
                    return
            except Exception:
                pass
            time.sleep(0.2)
        raise TimeoutError("syncthing instances did not get in sync:\n" + self.procs[1].text()[-2000:])

    def rss_kib(self, i):
        with open(f"/proc/{self.procs[i].p.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def stop(self):
        for p in self.procs:
            p.stop()
