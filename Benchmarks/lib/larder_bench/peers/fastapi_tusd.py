"""fastapi-tusd under uvicorn, a Python tus server (run.sh installs it into a venv)."""
import os
import subprocess
import sys

from .. import processes
from ..processes import PROCESSES, free_port, stop, wait_for_port


FASTAPI_APP = """
from fastapi import FastAPI
from fastapi_tusd import TusRouter
import os
app = FastAPI()
port = os.environ["BENCH_PORT"]
app.include_router(TusRouter(store_dir=os.environ["BENCH_STORE"], location=f"http://127.0.0.1:{port}/files"),
                   prefix="/files")
"""


def fastapi_tusd_available():
    """fastapi-tusd and uvicorn importable by this Python (run.sh installs them into a venv)."""
    r = subprocess.run([sys.executable, "-c", "import fastapi_tusd, uvicorn"], capture_output=True)
    return r.returncode == 0


class FastapiTusd:
    """fastapi-tusd (PyPI) under uvicorn: a Python tus server."""

    def __init__(self, store):
        port = free_port()
        app_dir = os.path.join(processes.TMP, "fastapi-app")
        os.makedirs(app_dir, exist_ok=True)
        with open(os.path.join(app_dir, "tusapp.py"), "w") as f:
            f.write(FASTAPI_APP)
        env = dict(os.environ, BENCH_PORT=str(port), BENCH_STORE=store)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "tusapp:app", "--app-dir", app_dir, "--host", "127.0.0.1",
             "--port", str(port), "--log-level", "warning", "--no-access-log"], env=env,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        PROCESSES.append(("fastapi-tusd", self.proc))
        # (fastapi-tusd's OPTIONS answer fails under current FastAPI: probe the socket instead.)
        wait_for_port(port, self.proc, seconds=60)
        self.tus_endpoint = f"http://127.0.0.1:{port}/files"

    def close(self):
        stop(self.proc)
        PROCESSES.remove(("fastapi-tusd", self.proc))
