"""`tus`: a tus upload in each PATCH size, Larder against tusd and fastapi-tusd."""
import json
import os
import shutil

from .. import processes
from ..config import MiB, REPS, TUSD_BIN, TUS_CHUNKS
from ..larder import Larder
from ..measure import sha256_file, tus_upload, urlopen_text
from ..peers.fastapi_tusd import FastapiTusd, fastapi_tusd_available
from ..peers.tusd import Tusd
from ..processes import BenchError, log, server_cpu


def scenario_tus(files):
    """tus upload in each chunk size: Larder, tusd, fastapi-tusd, a fresh server per run,
    interleaved (the order rotates per round); the stored bytes are checked after each run."""
    path = files["tus"]
    size = os.path.getsize(path)
    digest = sha256_file(path)
    kinds = {"larder": None}
    missing = {}
    if os.access(TUSD_BIN, os.X_OK):
        kinds["tusd"] = None
    else:
        missing["tusd"] = f"no executable at {TUSD_BIN} (set LARDER_PEERS; see its README)"
    if fastapi_tusd_available():
        kinds["fastapi-tusd"] = None
    else:
        missing["fastapi-tusd"] = "fastapi-tusd/uvicorn not importable (run.sh installs them into Benchmarks/.venv-bench)"
    names = list(kinds)
    results = {}
    for chunk in TUS_CHUNKS:
        runs = {name: [] for name in names}
        cpu = {name: [] for name in names}
        for rep in range(REPS):
            k = rep % len(names)
            for name in names[k:] + names[:k]:
                store = os.path.join(processes.TMP, f"tus-{name}-{chunk}-{rep}")
                os.makedirs(store, exist_ok=True)
                os.sync()
                server = Larder(f"tus-{chunk}-{rep}") if name == "larder" else \
                    Tusd(store) if name == "tusd" else FastapiTusd(store)
                try:
                    c0 = server_cpu(server.proc.pid)
                    seconds, location = tus_upload(server.tus_endpoint, path, size, chunk * MiB)
                    cpu[name].append(server_cpu(server.proc.pid) - c0)
                    if name == "larder":
                        meta = json.loads(urlopen_text(server.base + "/v0/b/bench/o/bench.bin"))
                        if meta.get("sha256") != digest:
                            raise BenchError("larder stored different bytes")
                    elif name == "tusd" and server.stored_sha256(location) != digest:
                        raise BenchError("tusd stored different bytes")
                finally:
                    server.close()
                    shutil.rmtree(store, ignore_errors=True)
                runs[name].append(seconds)
                log(f"tus {chunk} MiB {name} round {rep + 1}: {seconds:.2f}s")
        results[chunk] = {"runs": runs, "cpu": cpu}
    return {"size": size, "chunks": results, "missing": missing}
