#!/usr/bin/env python3
"""Server CPU per small upload, by kind of content, on one `larder serve`: how much of a 4 KiB
upload's CPU is libmagic's, end to end.

    Benchmarks/magic/uploads.py [LARDER_BIN ...]     # default: the release build

Each kind is uploaded by `wrk` (CONNECTIONS keep-alive connections, POSTs, each a new
name and new content, as Benchmarks/lib/bench.py's small-upload rows) for SECONDS; the kinds and
the binaries (several LARDER_BINs: before/after builds) take turns for ROUNDS rounds. Server CPU
is user + system from /proc/PID/stat, divided by the uploads answered 200. Kinds:
  text    the name, then dots to 4 KiB (bench.py's body): libmagic's dearest case, the text pass
  random  4 KiB of random bytes (an encrypted or app-specific blob)
  jpeg    a JFIF header, then random bytes: a famous binary format, answered early
Environment: SECONDS_PER_RUN (5), ROUNDS (3), SIZE (4096), CONNECTIONS (16).
"""
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SECONDS = int(os.environ.get("SECONDS_PER_RUN", "5"))
ROUNDS = int(os.environ.get("ROUNDS", "3"))
SIZE = int(os.environ.get("SIZE", "4096"))
CONNECTIONS = int(os.environ.get("CONNECTIONS", "16"))

LUA = """
local threads = 0
function setup(thread) threads = threads + 1; thread:set("id", threads) end
local n = 0
math.randomseed(os.time() + (id or 0))
local function noise(k)
  local t = {}
  for i = 1, k do t[i] = string.char(math.random(0, 255)) end
  return table.concat(t)
end
function request()
  n = n + 1
  local name = string.format("%s-%d-%d-%d", "{kind}", id, n, os.time())
  local body
  if "{kind}" == "text" then
    body = name .. string.rep(".", {size} - #name)
  elseif "{kind}" == "random" then
    body = noise({size})
  else
    -- JFIF APP0 segment, a comment segment holding the name, then entropy-coded-looking bytes
    local head = "\\255\\216\\255\\224\\0\\16JFIF\\0\\1\\1\\0\\0\\1\\0\\1\\0\\0"
    local com = "\\255\\254" .. string.char(0, #name + 2) .. name
    body = head .. com .. noise({size} - #head - #com)
  end
  return wrk.format("POST", "/v0/b/bench/o?name=" .. name, {{["Content-Type"] = "application/octet-stream"}}, body)
end
"""


def cpu(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def serve(binary, data):
    proc = subprocess.Popen([binary, "serve", "--data", data, "--port", "0", "--host", "127.0.0.1", "--allow-all",
                             "--access-log", "off"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    line, deadline = b"", time.monotonic() + 60
    while time.monotonic() < deadline:
        if select.select([proc.stdout], [], [], 0.5)[0]:
            b = os.read(proc.stdout.fileno(), 1)
            if b == b"\n":
                m = re.search(rb"listening on (http://\S+)", line)
                if m:
                    return proc, m.group(1).decode().rstrip("/")
                line = b""
            elif b:
                line += b
    proc.kill()
    raise SystemExit(f"{binary} serve did not print its address")


def main():
    binaries = sys.argv[1:] or [os.path.join(
        subprocess.run(["swift", "build", "-c", "release", "--show-bin-path"], capture_output=True, text=True,
                       check=True).stdout.strip(), "larder")]
    tmp = tempfile.mkdtemp(prefix="larder-magic-uploads.")
    servers = []
    try:
        scripts = {}
        for kind in ("text", "random", "jpeg"):
            scripts[kind] = os.path.join(tmp, f"{kind}.lua")
            with open(scripts[kind], "w") as f:
                f.write(LUA.replace("{kind}", kind).replace("{size}", str(SIZE)).replace("{{", "{").replace("}}", "}"))
        for i, b in enumerate(binaries):
            data = os.path.join(tmp, f"data{i}")
            os.makedirs(data)
            servers.append((b, *serve(b, data)))
        print(f"# {os.cpu_count()} cores, load average {open('/proc/loadavg').read().split()[:3]} at start; "
              f"{SIZE} B uploads, {CONNECTIONS} connections, {SECONDS} s per run, {ROUNDS} rounds", flush=True)
        results = {}
        for r in range(ROUNDS):
            order = servers if r % 2 == 0 else servers[::-1]
            for kind in scripts:
                for b, proc, base in order:
                    before = cpu(proc.pid)
                    out = subprocess.run(["wrk", "-t2", f"-c{CONNECTIONS}", f"-d{SECONDS}s", "-s", scripts[kind], base],
                                         capture_output=True, text=True, timeout=SECONDS + 60).stdout
                    spent = cpu(proc.pid) - before
                    requests = int(re.search(r"(\d+) requests in", out).group(1))
                    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
                    ok = requests - (int(bad.group(1)) if bad else 0)
                    us = spent / max(1, ok) * 1e6
                    results.setdefault((b, kind), []).append(us)
                    print(f"round {r + 1} {kind:6} {b}: {ok} uploads, {us:.0f} µs server CPU each", flush=True)
        print(f"# load average {open('/proc/loadavg').read().split()[:3]} at end")
        print("| binary | kind | µs server CPU per upload (median) | runs |")
        print("|---|---|---:|---|")
        for (b, kind), xs in results.items():
            print(f"| {b} | {kind} | {sorted(xs)[len(xs) // 2]:.0f} | {', '.join(f'{x:.0f}' for x in xs)} |")
    finally:
        for _, proc, _ in servers:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
