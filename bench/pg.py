"""A private PostgreSQL cluster for a benchmark: initdb in a scratch folder, a free loopback port, run as
an unprivileged user (nobody) when the benchmark runs as root, stopped by its pid at the end.

Durability is PostgreSQL's default (fsync and synchronous_commit on), as operators run it; the
tests' cluster turns both off for speed, a benchmark must not.
"""
import glob, os, pwd, signal, subprocess, time

import harness as h


def binaries():
    override = os.environ.get("SINKI_PG_BIN")
    if override:
        return override
    for bin_dir in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: float(p.split("/")[-2]), reverse=True):
        if all(os.access(os.path.join(bin_dir, tool), os.X_OK) for tool in ("initdb", "pg_ctl", "postgres", "createdb")):
            return bin_dir
    raise SystemExit("bench: PostgreSQL runs need the postgresql package (packaging/install-deps.sh installs it), "
                     "or SINKI_PG_BIN set to its bin folder")


class Cluster:
    """One running cluster; `url(name)` after `create(name)`."""

    def __init__(self, scratch, max_connections=300):
        self.bin = binaries()
        self.dir = scratch("postgres")
        os.makedirs(self.dir)
        self.prefix = []
        if os.geteuid() == 0:
            nobody = pwd.getpwnam("nobody")
            os.chown(self.dir, nobody.pw_uid, nobody.pw_gid)
            os.chmod(os.path.dirname(self.dir), 0o711)  # the scratch folder: nobody passes through it
            self.prefix = ["setpriv", f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}", "--clear-groups", "--"]
        data = os.path.join(self.dir, "data")
        self._run(["initdb", "-D", data, "-U", "sinki", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-instructions"], "initdb")
        self.port = h.free_port()
        options = (f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c max_connections={max_connections} "
                   "-c shared_buffers=256MB")
        self._run(["pg_ctl", "start", "-D", data, "-l", os.path.join(self.dir, "postgres.log"), "-w", "-t", "60", "-o", options], "pg_ctl")
        with open(os.path.join(data, "postmaster.pid")) as f:
            self.pid = int(f.readline())

    def _run(self, argv, what):
        env = dict(os.environ, LC_ALL="C")
        env.pop("PGDATA", None)
        out = subprocess.run(self.prefix + [os.path.join(self.bin, argv[0])] + argv[1:], capture_output=True, text=True,
                             env=env, cwd=self.dir)
        if out.returncode != 0:
            raise SystemExit(f"bench: {what} failed: {out.stdout[-2000:]}{out.stderr[-2000:]}")

    def create(self, name):
        self._run(["createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", "sinki", "-E", "UTF8", "-T", "template0", name], "createdb")
        return f"postgresql://sinki@127.0.0.1:{self.port}/{name}"

    def stop(self):
        try:
            os.kill(self.pid, signal.SIGINT)  # fast shutdown
        except ProcessLookupError:
            return
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                os.kill(self.pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.05)
        os.kill(self.pid, signal.SIGKILL)
