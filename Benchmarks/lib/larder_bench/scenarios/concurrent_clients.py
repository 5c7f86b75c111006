"""`concurrent`: many clients at once against one Larder, its peak RSS."""
import http.client
import os
import threading
import time
from urllib.parse import urlsplit

from ..config import CONCURRENT, CONCURRENT_UPLOAD_MIB, MiB, WRK_SECONDS
from ..larder import Larder
from ..measure import upload


def scenario_concurrent(files):
    """CONCURRENT clients at once against one Larder: each uploads CONCURRENT_UPLOAD_MIB (all
    bodies in flight together), then the same clients GET 4 KiB in a loop; Larder's peak RSS."""
    larder = Larder("concurrent", extra=["--per-ip-connection-limit", "0"])
    upload(larder, files["small"], "small.bin")
    body = os.urandom(CONCURRENT_UPLOAD_MIB * MiB)
    u = urlsplit(larder.base)
    stop_at = [0.0]
    connected = threading.Barrier(CONCURRENT)
    # The GET phase lasts WRK_SECONDS from the moment every upload is answered (set before any
    # client is released).
    uploaded = threading.Barrier(CONCURRENT, action=lambda: stop_at.__setitem__(0, time.monotonic() + WRK_SECONDS))
    errors, gets = [], []

    def client(i):
        try:
            conn = http.client.HTTPConnection(u.hostname, u.port, timeout=300)
            conn.connect()
            connected.wait(timeout=120)
            conn.request("POST", f"/v0/b/bench/o?name=c{i}.bin", body=body)
            r = conn.getresponse()
            r.read()
            if r.status != 200:
                errors.append(f"upload {r.status}")
            uploaded.wait(timeout=600)
            n = 0
            while time.monotonic() < stop_at[0]:
                conn.request("GET", "/v0/b/bench/o/small.bin?alt=media")
                r = conn.getresponse()
                r.read()
                if r.status != 200:
                    errors.append(f"get {r.status}")
                n += 1
            gets.append(n)
            conn.close()
        except Exception as e:  # reported, never hidden
            errors.append(repr(e)[:200])

    threads = [threading.Thread(target=client, args=(i,)) for i in range(CONCURRENT)]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=900)
    rss = larder.peak_rss_mib()
    larder.close()
    return {"rss": rss, "clients": CONCURRENT, "upload_mib": CONCURRENT_UPLOAD_MIB, "gets": sum(gets),
            "errors": errors[:5], "error_count": len(errors), "seconds": time.monotonic() - started}
