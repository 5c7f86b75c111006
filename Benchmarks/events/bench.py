#!/usr/bin/env python3
"""Object-change events: what the outbox and a subscription cost, and how soon an event arrives.

  1. 4 KiB uploads per second (Firebase simple upload, keep-alive, BENCH_EVENTS_CLIENTS threads
     for BENCH_EVENTS_SECONDS) with no subscription, then with one subscription to a local
     receiver (nginx answering 204, in a process of its own), interleaved over BENCH_EVENTS_REPS rounds on fresh data directories; the goal is a
     ratio >= 0.9 (the outbox costs at most a tenth).
  2. The commit-to-receiver delay at a paced BENCH_EVENTS_RATE (200) uploads/s: from the event's
     `time` (its commit, on this machine's clock) to its arrival at the receiver, p50 and p99
     (goal p99 <= 100 ms).
A measurement, never a test. Everything listens on 127.0.0.1; every directory is removed at exit.

  LARDER_BIN=.build/release/larder python3 Benchmarks/events/bench.py
"""
import datetime
import http.client
import http.server
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "interop"))
from larder_server import LarderServer  # noqa: E402

CLIENTS = int(os.environ.get("BENCH_EVENTS_CLIENTS", "4"))
SECONDS = float(os.environ.get("BENCH_EVENTS_SECONDS", "8"))
REPS = int(os.environ.get("BENCH_EVENTS_REPS", "3"))
RATE = int(os.environ.get("BENCH_EVENTS_RATE", "200"))
PACED_SECONDS = float(os.environ.get("BENCH_EVENTS_PACED_SECONDS", "10"))
BODY = os.urandom(4096)


class NginxReceiver:
    """nginx answering 204 to every POST, in a process of its own, counting deliveries in its
    access log: the throughput runs' receiver, so that receiving costs the uploads no more than a
    receiver on another machine would (a Python receiver in the clients' process competed with
    them for the interpreter's lock)."""

    def __init__(self, root):
        self.dir = os.path.join(root, "nginx")
        os.makedirs(self.dir)
        self.log = os.path.join(self.dir, "access.log")
        port = free_port()
        conf = os.path.join(self.dir, "nginx.conf")
        with open(conf, "w") as f:
            f.write(f"""daemon off; worker_processes 1; pid {self.dir}/nginx.pid; error_log {self.dir}/error.log;
events {{ worker_connections 256; }}
http {{
  client_body_temp_path {self.dir}; proxy_temp_path {self.dir}; fastcgi_temp_path {self.dir};
  uwsgi_temp_path {self.dir}; scgi_temp_path {self.dir};
  access_log {self.log};
  server {{ listen 127.0.0.1:{port}; location / {{ return 204; }} }}
}}
""")
        binary = shutil.which("nginx") or "/usr/sbin/nginx"
        self.proc = subprocess.Popen([binary, "-c", conf, "-p", self.dir], stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        self.url = f"http://127.0.0.1:{port}/"

    def count(self):
        with open(self.log, "rb") as f:
            return f.read().count(b"\n")

    def close(self):
        self.proc.terminate()
        self.proc.wait(10)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Receiver:
    """Answers 204 to every POST and notes when each event arrived and its ce-time."""

    def __init__(self):
        self.arrivals = []
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                arrived = time.time()
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                receiver.arrivals.append((arrived, self.headers.get("ce-time"), self.headers.get("ce-subject")))
                self.send_response(204)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()


def start(root, subscribe_to=None):
    data = os.path.join(root, "data")
    if subscribe_to:
        done = subprocess.run([os.environ["LARDER_BIN"], "events", "subscribe", subscribe_to, "--bucket", "bench",
                               "--data", data], capture_output=True, text=True, check=True)
        assert "secret" in done.stdout
    return LarderServer(data)


def upload_loop(port, prefix, deadline, counts, index, pace=None):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    n = 0
    next_at = time.monotonic()
    while time.monotonic() < deadline:
        if pace:
            next_at += pace
            delay = next_at - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        connection.request("POST", f"/v0/b/bench/o?name={prefix}-{index}-{n}", body=BODY,
                           headers={"Content-Type": "application/octet-stream"})
        response = connection.getresponse()
        response.read()
        assert response.status == 200, response.status
        n += 1
    counts[index] = n
    connection.close()


def throughput(subscribed):
    root = tempfile.mkdtemp(prefix="larder-bench-events-")
    receiver = NginxReceiver(root) if subscribed else None
    server = start(root, receiver.url if receiver else None)
    try:
        counts = [0] * CLIENTS
        deadline = time.monotonic() + SECONDS
        threads = [threading.Thread(target=upload_loop, args=(server.port, "t", deadline, counts, i))
                   for i in range(CLIENTS)]
        begun = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        rate = sum(counts) / (time.monotonic() - begun)
        if receiver:
            wait = time.monotonic() + 60
            while receiver.count() < sum(counts) and time.monotonic() < wait:
                time.sleep(0.05)
            assert receiver.count() >= sum(counts), "deliveries missing"
        return rate
    finally:
        server.stop()
        if receiver:
            receiver.close()
        shutil.rmtree(root, ignore_errors=True)


def delays():
    root = tempfile.mkdtemp(prefix="larder-bench-events-")
    receiver = Receiver()
    server = start(root, receiver.url)
    try:
        clients = 4
        counts = [0] * clients
        deadline = time.monotonic() + PACED_SECONDS
        threads = [threading.Thread(target=upload_loop, args=(server.port, "p", deadline, counts, i, clients / RATE))
                   for i in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wait = time.monotonic() + 60
        while len(receiver.arrivals) < sum(counts) and time.monotonic() < wait:
            time.sleep(0.05)
        ms = []
        for arrived, ce_time, _ in receiver.arrivals:
            committed = datetime.datetime.fromisoformat(ce_time.replace("Z", "+00:00")).timestamp()
            ms.append((arrived - committed) * 1000)
        ms.sort()
        return sum(counts) / PACED_SECONDS, ms
    finally:
        server.stop()
        receiver.close()
        shutil.rmtree(root, ignore_errors=True)


def main():
    none, one = [], []
    for _ in range(REPS):
        none.append(throughput(False))
        one.append(throughput(True))
    ratio = statistics.median(one) / statistics.median(none)
    rate, ms = delays()
    p50 = ms[len(ms) // 2]
    p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))]
    print("## Object-change events")
    print()
    print("| measure | value | goal |")
    print("|---|---|---|")
    print(f"| 4 KiB uploads/s, no subscription (median of {REPS}) | {statistics.median(none):.0f} | |")
    print(f"| 4 KiB uploads/s, one subscription (median of {REPS}) | {statistics.median(one):.0f} | |")
    print(f"| ratio | {ratio:.2f} | >= 0.90 |")
    print(f"| commit-to-receiver delay at {rate:.0f} uploads/s, p50 | {p50:.1f} ms | |")
    print(f"| commit-to-receiver delay at {rate:.0f} uploads/s, p99 | {p99:.1f} ms | <= 100 ms |")
    print(f"({len(ms)} events; {CLIENTS} upload clients for {SECONDS:.0f} s per throughput run)")


if __name__ == "__main__":
    main()
