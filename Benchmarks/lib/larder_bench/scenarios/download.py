"""`download`: a large download, Larder against nginx, and Larder's peak RSS."""
import os

from ..config import REPS, SIZE
from ..larder import Larder
from ..measure import download, upload
from ..peers.nginx import Nginx, nginx_binary
from ..processes import log


def scenario_download(files, commands):
    """Large download from Larder and nginx (both sendfile), interleaved; Larder's peak RSS over
    the upload of the file and all downloads (a fresh process)."""
    big = files["download"]
    larder = Larder("download")
    servers = [larder]
    if nginx_binary():
        servers.append(Nginx(workers=os.cpu_count()))
    for s in servers:
        upload(s, big, "big.bin")
    times = {s.kind: [] for s in servers}
    cpu = {s.kind: [] for s in servers}
    for rep in range(REPS):
        order = servers if rep % 2 == 0 else servers[::-1]
        for s in order:
            stats = []
            times[s.kind].append(download(s, "big.bin", SIZE, stats))
            cpu[s.kind].append(stats[0][0])
            log(f"download {s.kind} round {rep + 1}: {times[s.kind][-1]:.2f}s")
    rss = larder.peak_rss_mib()
    for s in servers:
        if s is larder:
            s.close(keep_data=True)  # the verify scenario reads this store
        else:
            s.close()
    if len(servers) == 1:
        times["nginx"] = None
    return {"times": times, "cpu": cpu, "rss": rss, "store": larder.data}
