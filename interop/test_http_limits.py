"""HTTP-layer limits against the real binary: the connection limit is sized from the open-file
limit, so many slow uploads cannot exhaust descriptors; nobody gets a 500 and the server serves
again as soon as they go."""
import os
import re
import resource
import select
import socket
import subprocess
import time

import requests

OPEN_FILES = 256  # the server then takes (256 - 128) / 2 = 64 connections: a socket and a temp file each


def start_with_open_file_limit(data_dir, limit):
    binary = os.environ.get("LARDER_BIN")
    assert binary and os.path.exists(binary), "set LARDER_BIN to the built larder binary"
    proc = subprocess.Popen(
        [binary, "serve", "--data", str(data_dir), "--port", "0", "--allow-all", "--access-log", "off",
         "--per-ip-connection-limit", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit)))
    line = proc.stdout.readline().decode()
    match = re.search(r"listening on http://[^:]+:(\d+)", line)
    assert match, line
    return proc, int(match.group(1))


def test_slow_uploads_beyond_the_open_file_limit_get_no_500(tmp_path):
    proc, port = start_with_open_file_limit(tmp_path / "data", OPEN_FILES)
    url = f"http://127.0.0.1:{port}"
    slow = []
    try:
        for i in range(150):
            sock = socket.create_connection(("127.0.0.1", port), timeout=10)
            try:
                sock.sendall(f"POST /v0/b/app/o?name=slow-{i} HTTP/1.1\r\nHost: x\r\n"
                             f"Content-Length: 10000000\r\n\r\n".encode() + b"s" * 1000)
            except OSError:
                pass
            slow.append(sock)
        time.sleep(1.0)
        # 64 are served (a socket and a temp file each); the rest wait in the listen backlog,
        # costing the server no descriptor.
        descriptors = len(os.listdir(f"/proc/{proc.pid}/fd"))
        staging = str(tmp_path / "data") + "/"
        temp_files = sum(1 for f in os.listdir(f"/proc/{proc.pid}/fd")
                         if os.readlink(f"/proc/{proc.pid}/fd/{f}").startswith(staging)
                         and "/tmp/" in os.readlink(f"/proc/{proc.pid}/fd/{f}")[len(staging) - 1:])
        assert temp_files == 64, (temp_files, descriptors)
        assert descriptors < OPEN_FILES - 32, descriptors
        for sock in slow:
            ready, _, _ = select.select([sock], [], [], 0)
            if ready:
                try:
                    data = sock.recv(100)
                except OSError:
                    data = b""
                assert not data.startswith(b"HTTP/1.1 5"), data
    finally:
        for sock in slow:
            sock.close()
    deadline = time.monotonic() + 30
    while True:
        try:
            r = requests.post(f"{url}/v0/b/app/o?name=after.txt", data=b"after", timeout=10)
            break
        except requests.exceptions.ConnectionError:
            assert time.monotonic() < deadline, "the server did not serve again"
            time.sleep(0.2)
    assert r.status_code == 200, r.text
    assert requests.get(f"{url}/v0/b/app/o/after.txt?alt=media", timeout=10).content == b"after"
    proc.terminate()
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0
    assert b"connection limit lowered to 64: 256 open files allowed (RLIMIT_NOFILE)" in err, err[-2000:]
    assert b"Too many open files" not in err, err[-2000:]
