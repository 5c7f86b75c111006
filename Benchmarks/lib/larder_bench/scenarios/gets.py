"""`gets`: 4 KiB GETs, Larder (access log off and on) against nginx."""
import os

from ..config import REPS
from ..larder import Larder
from ..measure import upload, wrk
from ..peers.nginx import Nginx, nginx_binary
from ..processes import log


def scenario_gets(files, commands):
    """4 KiB GETs: Larder (log off), Larder (log on, to a file), nginx (log off), interleaved."""
    small = files["small"]
    variants = {"larder": Larder("gets"), "larder+log": Larder("gets-log", access_log="file")}
    commands += [variants["larder"].command, variants["larder+log"].command]
    peers = {}
    if nginx_binary():
        peers["nginx"] = Nginx(workers=os.cpu_count())
        commands.append(peers["nginx"].command + "   # config: NGINX_CONF in Benchmarks/lib/larder_bench/peers/nginx.py")
    servers = {**variants, **peers}
    for s in servers.values():
        upload(s, small, "small.bin")
    runs = {name: [] for name in servers}
    names = list(servers)
    for rep in range(REPS):
        k = rep % len(names)
        for name in names[k:] + names[:k]:
            g = wrk(servers[name], "small.bin")
            runs[name].append(g)
            log(f"gets {name} round {rep + 1}: {g['rps']:,.0f}/s p99 {g['p99']} {g['cpu_us']:.0f} µs CPU")
    for s in servers.values():
        s.close()
    if "nginx" not in runs:
        runs["nginx"] = None
    return runs
