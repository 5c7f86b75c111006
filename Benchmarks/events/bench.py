#!/usr/bin/env python3
"""Object-change events: what the outbox and a subscription cost, and how soon an event arrives.

  1. 4 KiB uploads per second (Firebase simple upload, keep-alive, BENCH_EVENTS_CLIENTS threads
     for BENCH_EVENTS_SECONDS) with no subscription, then with one subscription to a local
     receiver (nginx answering 204, in a process of its own, its access log buffered as a
     receiver elsewhere would not cost this machine a write per event), interleaved over
     BENCH_EVENTS_REPS rounds on fresh data directories after an uncounted warm-up pair, the
     order of each round's pair alternating; the result is the median of the rounds' ratios,
     the goal >= 0.9 (the outbox costs at most a tenth).
  2. The commit-to-receiver delay at a paced BENCH_EVENTS_RATE (200) uploads/s: from the event's
     `time` (its commit, on this machine's clock) to its arrival at the receiver, p50 and p99
     (goal p99 <= 100 ms).
  3. Per upload, its delivery included: the server's CPU (utime + stime from /proc, so the number
     holds on a loaded machine), split into the event threads' (per delivered event) and the rest
     (the uploads', the outbox rows included; the event threads' also split into user and kernel
     time), and its catalog write transactions (from /metrics).
A measurement, never a test. Everything listens on 127.0.0.1; every directory is removed at exit.

  LARDER_BIN=.build/release/larder python3 Benchmarks/events/bench.py
  BENCH_EVENTS_AB=old=/tmp/larder-old,new=.build/release/larder python3 Benchmarks/events/bench.py
"""
import datetime
import http.client
import http.server
import os
import re
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
REPS = int(os.environ.get("BENCH_EVENTS_REPS", "6"))
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
  access_log {self.log} combined buffer=64k flush=100ms;
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

    def cpu_seconds(self):
        """nginx's CPU (the master and its worker): what receiving cost this machine."""
        pids = [self.proc.pid]
        try:
            with open(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children") as f:
                pids += [int(p) for p in f.read().split()]
        except OSError:
            pass
        return sum(cpu_seconds(p) for p in pids)

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


def cpu_seconds(pid):
    """utime + stime of a process (its threads included), from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def delivery_cpu_seconds(pid):
    """utime + stime of the server's event threads (`event-deliverer`, `event-webhook`:
    claims, resources, bodies, POSTs), from /proc/PID/task; the rest of the server's CPU is the uploads'."""
    total = system = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                head, tail = f.read().rsplit(")", 1)
        except OSError:
            continue
        if head.split("(", 1)[1].startswith("event-"):
            fields = tail.split()
            total += int(fields[11]) + int(fields[12])
            system += int(fields[12])
    return total / os.sysconf("SC_CLK_TCK"), system / os.sysconf("SC_CLK_TCK")


def write_transactions(port):
    """How many catalog write transactions the server committed (or rolled back), from /metrics."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    connection.request("GET", "/metrics")
    text = connection.getresponse().read().decode()
    connection.close()
    return sum(float(m) for m in re.findall(r"^larder_catalog_lock_held_seconds_count\{[^}]*\} (\S+)$", text, re.M))


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
        cpu, writes = cpu_seconds(server.proc.pid), write_transactions(server.port)
        delivering, delivering_kernel = delivery_cpu_seconds(server.proc.pid)
        deadline = time.monotonic() + SECONDS
        threads = [threading.Thread(target=upload_loop, args=(server.port, "t", deadline, counts, i))
                   for i in range(CLIENTS)]
        begun = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        rate = sum(counts) / (time.monotonic() - begun)
        receiving = 0
        if receiver:
            wait = time.monotonic() + 60
            while receiver.count() < sum(counts) and time.monotonic() < wait:
                time.sleep(0.05)
            assert receiver.count() >= sum(counts), "deliveries missing"
            receiving = receiver.cpu_seconds() / sum(counts)
        # Per upload, its delivery included: the server's CPU and its catalog write transactions
        # (the /metrics scrape after the uploads adds none).
        cpu = (cpu_seconds(server.proc.pid) - cpu) / sum(counts)
        delivered, delivered_kernel = delivery_cpu_seconds(server.proc.pid)
        delivering = (delivered - delivering) / sum(counts)
        delivering_kernel = (delivered_kernel - delivering_kernel) / sum(counts)
        writes = (write_transactions(server.port) - writes) / sum(counts)
        return rate, cpu, writes, delivering, delivering_kernel, receiving
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


def builds():
    """The binaries to measure: LARDER_BIN, or with BENCH_EVENTS_AB="old=PATH,new=PATH" several,
    interleaved in every round of the same run (an A/B on a shared machine)."""
    ab = os.environ.get("BENCH_EVENTS_AB", "")
    if not ab:
        return [("", os.environ["LARDER_BIN"])]
    return [tuple(part.split("=", 1)) for part in ab.split(",")]


def main():
    binaries = builds()
    none = {label: [] for label, _ in binaries}
    one = {label: [] for label, _ in binaries}
    load = os.getloadavg()[0]
    # A warm-up pair, not counted: the first runs on this VM write onto never-used blocks, which
    # costs several times what rewriting freed ones does (every later run writes where the
    # previous run's removed directory was).
    os.environ["LARDER_BIN"] = binaries[0][1]
    throughput(False)
    throughput(True)
    for round in range(REPS):
        for label, binary in binaries:
            os.environ["LARDER_BIN"] = binary
            # The order alternates between rounds, so neither side always runs first (after the
            # other build's runs) or second.
            for subscribed in ((False, True) if round % 2 == 0 else (True, False)):
                (one if subscribed else none)[label].append(throughput(subscribed))
            load = max(load, os.getloadavg()[0])
    delay = {}
    for label, binary in binaries:
        os.environ["LARDER_BIN"] = binary
        delay[label] = delays()

    def median(runs, i):
        return statistics.median(run[i] for run in runs)

    def row(measure, values, goal=""):
        print(f"| {measure} | " + " | ".join(values) + f" | {goal} |")

    labels = [label for label, _ in binaries]
    print("## Object-change events")
    print()
    print("| measure | " + " | ".join(label or "value" for label in labels) + " | goal |")
    print("|---|" + "---|" * len(labels) + "---|")
    row(f"4 KiB uploads/s, no subscription (median of {REPS})", [f"{median(none[b], 0):.0f}" for b in labels])
    row(f"4 KiB uploads/s, one subscription (median of {REPS})", [f"{median(one[b], 0):.0f}" for b in labels])
    def ratios(b):
        return sorted(o[0] / n[0] for o, n in zip(one[b], none[b]))

    # Each round's pair ran back to back, so its ratio cancels what drifts between rounds (the
    # machine's load, the disk); their median is the result, the lowest and highest beside it.
    row(f"ratio: median of the rounds' (lowest–highest)",
        [f"{statistics.median(ratios(b)):.2f} ({ratios(b)[0]:.2f}–{ratios(b)[-1]:.2f})" for b in labels], ">= 0.90")
    row("server CPU per upload, no subscription", [f"{median(none[b], 1) * 1e6:.0f} µs" for b in labels])
    row("server CPU per upload and its delivery, one subscription",
        [f"{median(one[b], 1) * 1e6:.0f} µs" for b in labels])
    row("of which the event threads, per delivered event", [f"{median(one[b], 3) * 1e6:.0f} µs" for b in labels])
    row("  … user / kernel", [f"{statistics.median(run[3] - run[4] for run in one[b]) * 1e6:.0f} / "
                              f"{median(one[b], 4) * 1e6:.0f} µs" for b in labels])
    row("of which the other threads (the uploads), per upload",
        [f"{statistics.median(run[1] - run[3] for run in one[b]) * 1e6:.0f} µs" for b in labels])
    row("the receiver's CPU per delivery (nginx, its access log buffered)",
        [f"{median(one[b], 5) * 1e6:.0f} µs" for b in labels])
    row("catalog write transactions per upload, no subscription", [f"{median(none[b], 2):.2f}" for b in labels])
    row("catalog write transactions per upload, one subscription", [f"{median(one[b], 2):.2f}" for b in labels])
    for k, b in enumerate(labels):
        rate, ms = delay[b]
        p50 = ms[len(ms) // 2]
        p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))]
        tag = f" ({b})" if b else ""
        for name, value, goal in (("p50", p50, ""), ("p99", p99, "<= 100 ms")):
            row(f"commit-to-receiver delay at {rate:.0f} uploads/s, {name}{tag}",
                [f"{value:.1f} ms" if i == k else "" for i in range(len(labels))], goal)
    print(f"({CLIENTS} upload clients for {SECONDS:.0f} s per throughput run; 1-minute load average up to "
          f"{max(load, os.getloadavg()[0]):.1f} on {os.cpu_count()} cores)")


if __name__ == "__main__":
    main()
