"""Slow clients: many connections from ONE address (127.0.0.3) that send headers a byte at a time
(slowloris) or bodies a few bytes at a time, while probes from ANOTHER address (127.0.0.2) must still
be answered within a deadline. Loopback routes all of 127/8, so the server sees two distinct peers.
"""
import socket
import threading
import time

import requests

from .harness import (BUCKET, Result, exchange, fd_kinds, pid_status, quote, raise_fd_limit,
                      settled_fd_kinds, start_server)

ATTACKER, VICTIM = "127.0.0.3", "127.0.0.2"


def attacker_socket(port, slow_body, k):
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind((ATTACKER, 0))
    sock.settimeout(2)
    sock.connect(("127.0.0.1", port))
    if slow_body:
        sock.sendall((f"POST /v0/b/{BUCKET}/o?name=slow%2F{k} HTTP/1.1\r\nHost: x\r\n"
                      f"Content-Length: 1048576\r\n\r\n").encode())
    else:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
    sock.setblocking(False)
    return sock


def trickle(sockets, stop, stats, interval):
    """A byte (or a header line's worth) per socket per interval; counts sockets the server closed."""
    while not stop.is_set():
        for entry in list(sockets):
            sock, slow_body = entry
            try:
                sock.send(b"x" if slow_body else b"X-Slow: 1\r\n")
            except (BlockingIOError, InterruptedError):
                pass
            except OSError:
                stats["closed by the server"] += 1
                sockets.remove(entry)
                sock.close()
        stop.wait(interval)


def run(data_dir, slow=300, seconds=8, deadline=2.0, interval=1.0, connection_limit=None):
    """`connection_limit` scales the server's --connection-limit down with `slow`, so a short run
    shows what 1 200 connections do to the default limit of 1 024 (None: the server's default)."""
    raise_fd_limit()
    server = start_server(data_dir, extra=("--connection-limit", str(connection_limit)) if connection_limit else ())
    pid = server.proc.pid
    requests.post(f"{server.url}/v0/b/{BUCKET}/o?name={quote('probe.txt')}", data=b"probe", timeout=10)
    kinds_before = fd_kinds(pid)
    stop = threading.Event()
    stats = {"closed by the server": 0, "connect failures": 0}
    sockets = []
    opened_at = time.monotonic()
    for k in range(slow):
        try:
            raw = attacker_socket(server.port, slow_body=k % 2 == 1, k=k)
        except OSError:
            stats["connect failures"] += 1
            continue
        sockets.append((raw, k % 2 == 1))
    open_seconds = time.monotonic() - opened_at
    trickler = threading.Thread(target=trickle, args=(sockets, stop, stats, interval))
    trickler.start()

    probes, served, worst, misses = 0, 0, 0.0, []
    probe_request = (f"GET /v0/b/{BUCKET}/o/probe.txt?alt=media HTTP/1.1\r\nHost: x\r\n"
                     f"Connection: close\r\n\r\n").encode()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        probes += 1
        got = exchange(server.port, probe_request, timeout=deadline, linger=0.1, source=VICTIM)
        if got.status == 200 and got.raw.endswith(b"probe") and got.seconds <= deadline:
            served += 1
            worst = max(worst, got.seconds)
        else:
            misses.append(f"status {got.status}, closed {got.closed}, {got.seconds:.2f} s")
        time.sleep(0.2)
    still_open = len(sockets)
    kinds_during, rss = fd_kinds(pid), pid_status(pid, "VmHWM")
    stop.set()
    trickler.join()
    for sock, _ in sockets:
        sock.close()
    kinds_after = settled_fd_kinds(pid, kinds_before)
    alive = server.proc.poll() is None
    server.kill()  # a stuck drain must not cost the suite 30 s; SIGTERM is the SIGTERM scenario's job
    server.stop()  # closes its pipe

    failures = []
    if served < probes:
        failures.append(f"{probes - served} of {probes} probes from another address not served within "
                        f"{deadline} s (e.g. {misses[:3]})")
    if not alive:
        failures.append("the server died")
    if kinds_after and kinds_before and (kinds_after["socket"] > kinds_before["socket"]
                                         or kinds_after["data"] > kinds_before["data"]):
        failures.append(f"descriptors not released: before {kinds_before}, after {kinds_after}")
    figures = {"slow connections from one address": slow, "server --connection-limit": connection_limit or "default", "opened in (s)": round(open_seconds, 1),
               **stats, "still open at the end": still_open, "seconds": seconds,
               "probes from another address": probes, "served within deadline": served,
               "deadline (s)": deadline, "slowest served probe (s)": round(worst, 3),
               "server FDs before/during/after": f"{kinds_before} / {kinds_during} / {kinds_after}",
               "peak RSS (MB)": None if rss is None else round(rss / 1e6, 1)}
    return Result("Slow clients", not failures, figures, failures)
