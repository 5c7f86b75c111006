"""JWT fuzzer: tokens mutated as text (flipped, cut, spliced segments) and as structure (headers with
other `alg`/`kid`/`typ`, claims of the wrong types or sizes, re-signed with the store's HS256
secret so the claim checks run), sent in Authorization headers to a real `larder serve` with rules.
Seeds: stress/corpus/jwt/*.json (header/claims pairs).

Oracles: the answer is 2xx, 401 or 403 (404 where the object is absent, 431 past the header limit),
never 500; the server never dies and never hangs.

    python -m stress.fuzz_jwt --seconds 10 --seed 1 --json out.json
"""
import base64
import glob
import hashlib
import hmac
import json
import os
import random
import sqlite3
import sys
import threading
import time

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    __package__ = "stress"  # noqa: A001

from .fuzz_http import start_target  # noqa: E402
from .harness import fuzzer_main, exchange, pid_status  # noqa: E402

CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "jwt")
# 431: a token padded past the 16 KiB header limit is refused for its size, in JSON; also honest.
ALLOWED = {200, 204, 401, 403, 404, 431}


def b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def sign(header, claims, secret):
    head = b64(json.dumps(header, separators=(",", ":")).encode() if not isinstance(header, bytes) else header)
    body = b64(json.dumps(claims, separators=(",", ":")).encode() if not isinstance(claims, bytes) else claims)
    mac = hmac.new(secret, f"{head}.{body}".encode(), hashlib.sha256).digest()
    return f"{head}.{body}.{b64(mac)}"


def seeds():
    out = []
    for path in sorted(glob.glob(os.path.join(CORPUS, "*.json"))):
        with open(path) as f:
            out.append(json.load(f))
    return out


ODD_VALUES = [None, True, 0, -1, 1.5, 1e300, -1e300, 2 ** 63, 2 ** 64 + 1, "", "u1", "u2", "x" * 5000, [], ["u1"],
              {}, {"a": {"b": {"c": [1, 2, {"d": None}]}}}, "\u0000", "\ud7ff", "../../x", "1796000000"]
CLAIMS = ["sub", "user_id", "uid", "exp", "iat", "nbf", "iss", "aud", "auth_time", "firebase", "email",
          "email_verified", "token", "admin", "claims"]
ALGS = ["HS256", "HS384", "HS512", "none", "None", "RS256", "ES256", "EdDSA", "", None, 1, ["HS256"], "hs256"]


def structured(seed, secret, rng, now):
    header = dict(seed["header"])
    claims = dict(seed["claims"])
    for key in ("exp", "iat", "nbf", "auth_time"):
        if isinstance(claims.get(key), str) and claims[key].startswith("now"):
            claims[key] = now + int(claims[key][3:] or 0)
    for _ in range(rng.randint(1, 3)):
        op = rng.randrange(6)
        if op == 0:
            header["alg"] = rng.choice(ALGS)
        elif op == 1:
            header[rng.choice(["kid", "typ", "crit", "jku", "x5u", "cty"])] = rng.choice(ODD_VALUES)
        elif op in (2, 3):
            claims[rng.choice(CLAIMS)] = rng.choice(ODD_VALUES)
        elif op == 4:
            claims.pop(rng.choice(CLAIMS), None)
        else:
            nested = "x"
            for _ in range(rng.choice([10, 500, 3000])):
                nested = {"n": nested}
            claims["deep"] = nested
    try:
        token = sign(header, claims, secret)
    except (ValueError, RecursionError):
        token = sign({"alg": "HS256"}, {"sub": "u1"}, secret)
    if rng.random() < 0.3:  # signed with something else: must be a 401
        head, body, _ = token.split(".")
        token = f"{head}.{body}.{b64(rng.randbytes(rng.choice([0, 1, 32, 64, 512])))}"
    return token


def textual(token, rng):
    parts = token.split(".")
    op = rng.randrange(8)
    if op == 0:
        i = rng.randrange(len(token))
        return token[:i] + rng.choice("A_-+/=.\x00 é") + token[i + 1:]
    if op == 1:
        return token[:rng.randrange(len(token))]
    if op == 2:
        return ".".join(parts + [rng.choice(parts)] * rng.randint(1, 3))
    if op == 3:
        rng.shuffle(parts)
        return ".".join(parts)
    if op == 4:
        parts[rng.randrange(3)] = b64(rng.randbytes(rng.randrange(0, 300)))
        return ".".join(parts)
    if op == 5:
        parts[rng.randrange(3)] += "=" * rng.randint(1, 3)
        return ".".join(parts)
    if op == 6:
        return "." * rng.randint(0, 5)
    return token + "A" * rng.choice([100, 5000, 60000])


def request_for(token, rng):
    scheme = rng.choice(["Bearer ", "Bearer ", "Bearer ", "bearer ", "Bearer  ", "Firebase ", "", "Basic "])
    target = rng.choice([("GET", "/v0/b/app/o/auth%2Fu1%2Fseed.txt", b""),
                         ("GET", "/v0/b/app/o/auth%2Fu1%2Fseed.txt?alt=media", b""),
                         ("GET", "/v0/b/app/o/auth%2Fu2%2Fseed.txt", b""),
                         ("POST", "/v0/b/app/o?name=auth%2Fu1%2Ffuzz.txt", b"fuzz"),
                         ("GET", "/v0/b/app/o?prefix=auth%2Fu1%2F", b"")])
    method, path, body = target
    head = (f"{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: {len(body)}\r\n"
            f"Authorization: {scheme}{token}\r\n\r\n")
    return head.encode("utf-8", "surrogateescape") + body


def worker(target, secret, texts, deadline, rng, stats, findings, lock):
    while time.monotonic() < deadline and target.server.proc.poll() is None:
        seed = rng.choice(texts)
        token = structured(seed, secret, rng, int(time.time()))
        if rng.random() < 0.5:
            token = textual(token, rng)
        data = request_for(token, rng)
        got = exchange(target.port, data, timeout=3, linger=2)
        with lock:
            stats["requests"] += 1
            stats["statuses"][got.status] = stats["statuses"].get(got.status, 0) + 1
            bad = got.hung or got.status not in ALLOWED
            if bad and sum(1 for f in findings if f["detail"].startswith(str(got.status))) < 3:
                findings.append({"oracle": "hang" if got.hung else f"status {got.status}", "known": [],
                                 "detail": f"{got.status}: {got.raw[:300]!r}", "request": repr(data[:3000])})


def fuzz(data_dir, seconds=10.0, seed=1, threads=4):
    target = start_target(data_dir)
    # The HS256 key is the catalog's `token_secret` row (made by `larder token` in start_target).
    db = sqlite3.connect(f"file:{os.path.join(data_dir, 'larder.sqlite')}?mode=ro", uri=True)
    try:
        secret = db.execute("SELECT value FROM settings WHERE key = 'token_secret'").fetchone()[0]
    finally:
        db.close()
    texts = seeds()
    # The seeds re-signed as they are must be accepted: otherwise the fuzzer tests nothing past the signature.
    probe = sign(texts[0]["header"], {**texts[0]["claims"], "exp": int(time.time()) + 600, "iat": int(time.time())}, secret)
    accepted = exchange(target.port, request_for_fixed(probe), timeout=5).status
    stats = {"requests": 0, "statuses": {}}
    findings, lock = [], threading.Lock()
    rng = random.Random(seed)
    rss0 = pid_status(target.server.proc.pid, "VmRSS")
    deadline = time.monotonic() + seconds
    pool = [threading.Thread(target=worker, args=(target, secret, texts, deadline, random.Random(rng.random()),
                                                  stats, findings, lock)) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    alive = target.server.proc.poll() is None
    rss1 = pid_status(target.server.proc.pid, "VmRSS")
    if not alive:
        findings.append({"oracle": "server died", "known": [], "detail": f"exit {target.server.proc.returncode}",
                         "request": ""})
    target.server.kill()
    target.server.stop()  # closes its pipe
    figures = {"seconds": seconds, "seeds": len(texts), "self-signed seed token answered": accepted,
               "requests": stats["requests"],
               "statuses": {str(k): v for k, v in sorted(stats["statuses"].items(), key=lambda kv: str(kv[0]))},
               "RSS MB start/end": f"{(rss0 or 0) / 1e6:.1f}/{(rss1 or 0) / 1e6:.1f}"}
    if accepted != 200:
        findings.append({"oracle": "harness", "known": [], "request": probe,
                         "detail": f"a token signed with the token_secret got {accepted}: the claim checks went untested"})
    return figures, findings


def request_for_fixed(token):
    return (f"GET /v0/b/app/o/auth%2Fu1%2Fseed.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
            f"Authorization: Bearer {token}\r\n\r\n").encode()


def main(argv=None):
    return fuzzer_main(argv, __doc__, fuzz, data_prefix="larder-fuzz-jwt-")


if __name__ == "__main__":
    sys.exit(main())
