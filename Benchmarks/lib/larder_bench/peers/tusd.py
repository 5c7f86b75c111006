"""tusd 1.13, the reference tus server ($LARDER_PEERS/tusd/tusd)."""
import os
import subprocess

from ..config import TUSD_BIN
from ..measure import sha256_file
from ..processes import PROCESSES, read_listening_line, stop


class Tusd:
    """tusd 1.13 (the reference tus server) from $LARDER_PEERS/tusd/tusd."""

    def __init__(self, store):
        self.store = store
        self.proc = subprocess.Popen([TUSD_BIN, "-host", "127.0.0.1", "-port", "0", "-upload-dir", store],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        PROCESSES.append(("tusd", self.proc))
        self.tus_endpoint = read_listening_line(self.proc, "tusd") + "/"

    def stored_sha256(self, location):
        return sha256_file(os.path.join(self.store, location.rstrip("/").rsplit("/", 1)[1]))

    def close(self):
        stop(self.proc)
        PROCESSES.remove(("tusd", self.proc))
