"""Processes and cleanup: every server the suite starts is listed in PROCESSES (PostgreSQL data
directories in POSTGRES) and stopped by `cleanup`, which also removes the run's temp dir TMP (set by
main; read it as `processes.TMP`). Also the /proc readings of a server's CPU, writes and peak RSS."""
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import time

from .config import ROOT


class BenchError(Exception):
    pass


class Watchdog(BaseException):
    """Raised by SIGALRM / SIGTERM / SIGINT so that cleanup always runs."""


PROCESSES = []  # (name, Popen) of every server we started
POSTGRES = []  # data directories of the PostgreSQL servers we started (stopped with scripts/pg.sh)
TMP = None


def log(message):
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def stop(proc, sig=signal.SIGTERM, wait=35):
    if proc.poll() is not None:
        return
    try:
        proc.send_signal(sig)
        proc.wait(timeout=wait)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)
    except ProcessLookupError:
        pass


def cleanup():
    for name, proc in reversed(PROCESSES):
        stop(proc, signal.SIGQUIT if name == "nginx" else signal.SIGTERM, wait=15)
    PROCESSES.clear()
    for directory in POSTGRES:
        subprocess.run([os.path.join(ROOT, "scripts/pg.sh"), "stop", directory], capture_output=True, timeout=60)
    POSTGRES.clear()
    if TMP and os.path.isdir(TMP):
        shutil.rmtree(TMP, ignore_errors=True)


def on_signal(signum, _frame):
    raise Watchdog(f"signal {signal.Signals(signum).name}")


def run(args, timeout=120, check=True, **kw):
    r = subprocess.run(args, capture_output=True, text=True, timeout=timeout, **kw)
    if check and r.returncode != 0:
        raise BenchError(f"{' '.join(args)} exited {r.returncode}: {r.stderr.strip()[-500:]}")
    return r


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port, proc, seconds=30):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise BenchError(f"server exited with {proc.returncode} before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise BenchError(f"nothing listening on 127.0.0.1:{port} after {seconds}s")


def server_pids(pid):
    """The server and its live children (nginx's workers)."""
    pids = [pid]
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                pids.append(int(entry))
    return pids


def server_cpu(pid):
    """CPU seconds (user + system) used so far by the server and its live children."""
    total = 0
    for p in server_pids(pid):
        try:
            fields = open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def server_write_calls(pid):
    """write(2)-family calls made so far by the server and its live children (/proc/PID/io syscw)."""
    total = 0
    for p in server_pids(pid):
        try:
            total += int(re.search(r"syscw: (\d+)", open(f"/proc/{p}/io").read()).group(1))
        except (OSError, AttributeError):
            pass
    return total


def peak_rss_mib(pid):
    """The process's peak resident set (VmHWM) so far, MiB."""
    try:
        m = re.search(r"VmHWM:\s+(\d+) kB", open(f"/proc/{pid}/status").read())
        return int(m.group(1)) / 1024 if m else float("nan")
    except OSError:
        return float("nan")


def read_listening_line(proc, name, seconds=60):
    """The URL in the first stdout line that says 'listening on http://…'."""
    line, deadline = b"", time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        if select.select([proc.stdout], [], [], 0.5)[0]:
            b = os.read(proc.stdout.fileno(), 1)
            if not b:
                break
            if b == b"\n":
                text = line.decode(errors="replace")
                line = b""
                m = re.search(r"listening on (http://\S+)", text)
                if m:
                    return m.group(1).rstrip("/")
            else:
                line += b
    raise BenchError(f"{name} did not print its address")
