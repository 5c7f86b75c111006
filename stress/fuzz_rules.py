"""Rules fuzzer: mutated storage.rules files (seeds: stress/corpus/rules/*.rules) through
`larder rules check` and, when they check, `larder rules eval`. Every run is its own process.

Oracles: exit 0 or 1 (never a signal, never another code), each run under 5 s.

    python -m stress.fuzz_rules --seconds 10 --seed 1 --json out.json
"""
import glob
import os
import random
import re
import subprocess
import sys
import tempfile
import threading
import time

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    __package__ = "stress"  # noqa: A001

from .harness import fuzzer_main, larder_bin  # noqa: E402

CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "rules")
LIMIT = 5.0
TOKEN = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|[A-Za-z_][A-Za-z0-9_]*|\d+(?:\.\d+)?|\s+|.", re.S)
WORDS = ["match", "allow", "if", "function", "return", "service", "firebase.storage", "rules_version", "=", "==",
         "!=", "&&", "||", "!", "in", "is", "null", "true", "false", "request", "resource", ".", ",", ";", ":",
         "{", "}", "(", ")", "[", "]", "/", "**", "=**", "{x=**}", "{", "?", "%", "1e400", "-9223372036854775809",
         "99999999999999999999999", "0x10", "'\\u0000'", "'\\", "'(a+)+$'", "'(?P<x>a)'", "'\\\\p{L}'",
         "'[[:alpha:]]'", "'a{1000}{1000}'", "'\xff\xfe'", "request.auth.token", "resource.metadata",
         ".matches(", ".size()", ".split(", "timestamp.date(", "duration.value(", "int(", "string(", "math.abs(",
         "let x = 1;", "//", "/*", "*/", "\x00", "\ufeff", "read, write", "get, list, create, update, delete"]


def seeds():
    out = []
    for path in sorted(glob.glob(os.path.join(CORPUS, "*.rules"))):
        with open(path, encoding="utf-8") as f:
            out.append(f.read())
    return out


def mutate(text, rng):
    tokens = TOKEN.findall(text)
    for _ in range(rng.randint(1, 6)):
        if not tokens:
            tokens = [""]
        i = rng.randrange(len(tokens))
        op = rng.randrange(9)
        if op == 0:
            del tokens[i]
        elif op == 1:
            tokens.insert(i, tokens[i])
        elif op == 2:
            tokens.insert(i, rng.choice(WORDS))
        elif op == 3:
            j = rng.randrange(len(tokens))
            tokens[i], tokens[j] = tokens[j], tokens[i]
        elif op == 4:
            tokens[i] = rng.choice(WORDS)
        elif op == 5:  # deep nesting, at a point where an expression may stand
            depth = rng.choice([100, 1000, 5000, 20000])
            tokens.insert(i, rng.choice(["(" * depth + "true" + ")" * depth, "!" * depth + "true",
                                         "-" * depth + "1", "[" * depth + "]" * depth,
                                         "match /a {" * min(depth, 2000) + "}" * min(depth, 2000),
                                         "f(" * depth + ")" * depth, "a." * depth + "b",
                                         " && ".join(["true"] * depth)]))
        elif op == 6:
            tokens.insert(i, rng.choice(["'" + "a" * rng.choice([1000, 100000]) + "'",
                                         "x" * rng.choice([1000, 100000])]))
        elif op == 7:
            del tokens[rng.randrange(len(tokens)):]
        else:
            tokens[i] = "".join(chr(rng.randrange(0x20, 0x7f)) for _ in range(rng.randint(1, 4)))
    data = "".join(tokens).encode("utf-8", "surrogatepass")
    if rng.random() < 0.1:
        data = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            if data:
                data[rng.randrange(len(data))] = rng.randrange(256)
        data = bytes(data)
    return data


def run_once(path, args):
    started = time.monotonic()
    try:
        p = subprocess.run([larder_bin(), "rules", *args, path], capture_output=True, timeout=LIMIT + 5) \
            if args[0] == "check" else \
            subprocess.run([larder_bin(), "rules", "eval", path, *args[1:]], capture_output=True, timeout=LIMIT + 5)
        return p.returncode, time.monotonic() - started, p.stderr.decode(errors="replace")[-300:]
    except subprocess.TimeoutExpired:
        return "timeout", time.monotonic() - started, ""


EVALS = [["eval", "--op", "read", "--path", "/b/app/o/users/u1/x"],
         ["eval", "--op", "write", "--path", "/b/app/o/media/image/a.png", "--uid", "u1", "--size", "100",
          "--content-type", "image/png"],
         ["eval", "--op", "list", "--path", "/b/app/o/2024/01"],
         ["eval", "--op", "delete", "--path", "/b/app/o/a/b/c/d/e", "--uid", "b"]]


def worker(texts, deadline, rng, tmp, stats, findings, lock):
    n = 0
    while time.monotonic() < deadline:
        n += 1
        data = mutate(rng.choice(texts), rng)
        path = os.path.join(tmp, f"{threading.get_ident()}-{n}.rules")
        with open(path, "wb") as f:
            f.write(data)
        runs = [["check"]]
        code, seconds, err = run_once(path, ["check"])
        results = [(runs[0], code, seconds, err)]
        if code == 0:
            args = rng.choice(EVALS)
            results.append((args, *run_once(path, args)))
        for args, code, seconds, err in results:
            with lock:
                stats["runs"] += 1
                stats[f"{args[0]} exit {code}"] = stats.get(f"{args[0]} exit {code}", 0) + 1
                stats["slowest run (s)"] = round(max(stats["slowest run (s)"], seconds), 2)
                bad = code not in (0, 1) or seconds > LIMIT
                if bad and len(findings) < 20:
                    findings.append({"oracle": "signal or bad exit" if code not in (0, 1) else "slow",
                                     "known": [], "detail": f"larder rules {' '.join(args)}: exit {code} "
                                     f"after {seconds:.2f} s; {err}", "request": repr(data[:1500])})
        os.unlink(path)


def fuzz(seconds=10.0, seed=1, threads=2):
    stats = {"runs": 0, "slowest run (s)": 0.0}
    findings, lock = [], threading.Lock()
    rng = random.Random(seed)
    texts = seeds()
    deadline = time.monotonic() + seconds
    with tempfile.TemporaryDirectory(prefix="larder-fuzz-rules-") as tmp:
        work = os.path.join(tmp, "work")
        os.mkdir(work)
        pool = [threading.Thread(target=worker, args=(texts, deadline, random.Random(rng.random()), work, stats,
                                                      findings, lock)) for _ in range(threads)]
        for t in pool:
            t.start()
        for t in pool:
            t.join()
    return {"seconds": seconds, "seeds": len(texts), **stats}, findings


def main(argv=None):
    return fuzzer_main(argv, __doc__, fuzz)


if __name__ == "__main__":
    sys.exit(main())
