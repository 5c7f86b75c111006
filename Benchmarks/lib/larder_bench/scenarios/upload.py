"""`upload`: a simple upload, Larder POST against nginx WebDAV PUT."""
import os

from ..config import REPS
from ..larder import Larder
from ..measure import stamp, upload
from ..peers.nginx import Nginx, nginx_binary
from ..processes import log


def scenario_upload(files, commands):
    """Simple upload of BENCH_UPLOAD_MIB: Larder POST vs nginx WebDAV PUT, interleaved."""
    big = files["upload"]
    larder = Larder("upload")
    servers = [larder]
    if nginx_binary():
        servers.append(Nginx(workers=os.cpu_count()))
    times = {s.kind: [] for s in servers}
    cpu = {s.kind: [] for s in servers}
    for rep in range(REPS):
        stamp(big, rep)
        order = servers if rep % 2 == 0 else servers[::-1]
        for s in order:
            stats = []
            times[s.kind].append(upload(s, big, f"up{rep}.bin", stats))
            cpu[s.kind].append(stats[0][0])
            log(f"upload {s.kind} round {rep + 1}: {times[s.kind][-1]:.2f}s")
    for s in servers:
        s.close()
    if len(servers) == 1:
        times["nginx"] = None
    return {"times": times, "cpu": cpu, "size": os.path.getsize(big)}
