"""A throw-away PostgreSQL (scripts/pg.sh, fsync on): the catalog of the postgres and s3 scenarios."""
import os
import re
import shutil
import subprocess

from .. import processes
from ..config import ROOT
from ..processes import POSTGRES, free_port, log, run, server_cpu


class Postgres:
    """A throw-away PostgreSQL on loopback from scripts/pg.sh, with fsync on (durable commits, as
    SQLite's synchronous=FULL), in $TMP/pg; stopped by `close` or, whatever happens, by cleanup.
    `missing` says why there is none (no server binaries: scripts/deps.sh installs them)."""

    def __init__(self):
        self.dir = os.path.join(processes.TMP, "pg")
        self.url, self.missing = None, None
        # As root the server runs as `postgres`, which must be able to traverse $TMP (mode 0700).
        os.chmod(processes.TMP, 0o711)
        r = subprocess.run([os.path.join(ROOT, "scripts/pg.sh"), "start", self.dir, str(free_port())],
                           capture_output=True, text=True, timeout=120, env={**os.environ, "FSYNC": "on"})
        if r.returncode != 0:
            self.missing = (r.stderr.strip() or f"scripts/pg.sh exited {r.returncode}")[-300:]
            return
        POSTGRES.append(self.dir)
        self.url = r.stdout.strip()
        psql = shutil.which("psql")
        self.version = (run([psql, "-At", "-c", "SHOW server_version", self.url], check=False).stdout.strip()
                        if psql else "") or "?"
        self.command = f"FSYNC=on scripts/pg.sh start $TMP/pg PORT   # PostgreSQL {self.version}, fsync on"

    def catalog(self, label):
        """A catalog URL of its own (a schema per Larder)."""
        return f"{self.url}?schema=bench_{re.sub('[^a-z0-9]', '_', label)}"

    def cpu(self):
        """CPU seconds of the postmaster and its live backends."""
        with open(os.path.join(self.dir, "data", "postmaster.pid")) as f:
            return server_cpu(int(f.readline()))

    def close(self):
        if self.dir in POSTGRES:
            POSTGRES.remove(self.dir)
            run([os.path.join(ROOT, "scripts/pg.sh"), "stop", self.dir], check=False)


def with_postgres(label, commands, body):
    """`body(pg)` with a throw-away PostgreSQL (its command noted in `commands`), stopped after;
    {"missing": why} when there is none."""
    pg = Postgres()
    if pg.missing:
        log(f"{label}: missing ({pg.missing})")
        return {"missing": pg.missing}
    commands.append(pg.command)
    try:
        return body(pg)
    finally:
        pg.close()
