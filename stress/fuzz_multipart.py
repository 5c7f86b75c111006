"""Firebase multipart upload fuzzer: `X-Goog-Upload-Protocol: multipart` requests whose
`multipart/related` bodies (seeds: stress/corpus/multipart/*.mp, part header lines: part-headers.dict)
are mutated in their boundaries, CRLFs, part headers, JSON part and content, cut short, blown up, and
sent over raw sockets split at chosen points (so the streaming parser meets every state at a chunk
edge), by several threads against a real `larder serve` with rules (corpus/multipart/fuzz.rules).

A reference parser (`expected_content`, the grammar MultipartRelatedParser documents: exactly two
parts, JSON first, the first `CRLF--B` ends a part, nothing after the closing delimiter but one
CRLF) tells which bodies are well-formed and what their content is. Oracles:
- never a 500 (nor 502/504), never a hang (an answer or a close within the deadline), never dies;
- a refused body stores nothing: the target object's bytes (GET ?alt=media) and generation are
  what they were before;
- an accepted body was well-formed, and the object now holds exactly its content part (a body
  misread is an object overwritten with the wrong bytes); under `small/` it is under the rules' limit;
- a well-formed body with the seed's JSON, sent whole, is accepted;
- /metrics < 256 KiB, RSS +128 MB at most, the in-flight gauge back to 1, no temp file left in
  tmp/, and `larder verify` clean after the run.

    python -m stress.fuzz_multipart --seconds 10 --seed 1 --json out.json
"""
import base64
import dataclasses
import glob
import hashlib
import json
import os
import random
import re
import socket
import sys
import threading
import time

import requests

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    __package__ = "stress"  # noqa: A001  (run as a script: import siblings as the package)

from .harness import (final_status, fuzzer_main, BUCKET, drain, _skip_interim, metrics, pid_status, quote, start_server,  # noqa: E402
                      verify)

CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "multipart")
RULES = os.path.join(CORPUS, "fuzz.rules")
KiB = 1024
MiB = 1024 * KiB
SMALL_LIMIT = 4096          # fuzz.rules: small/ takes objects under this many bytes
HEADER_LIMIT = 8 * KiB      # MultipartRelatedParser.headerLimit
METADATA_LIMIT = 64 * KiB   # the JSON part's limit


# MARK: the reference parser


BOUNDARY_CHARS = set(b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ'()+_,-./:=? ")
# Swift's CharacterSet.whitespaces: tab and the Unicode space separators (not CR, LF, VT, FF).
WHITESPACE = "\t \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u202f\u205f\u3000"


class Malformed(Exception):
    """The body breaks the grammar: the server must refuse it and store nothing."""


def boundary_of(content_type):
    """MultipartRelatedParser.boundary(fromContentType:) and the boundary check of its init."""
    if content_type is None:
        raise Malformed("no Content-Type")
    parts = content_type.split(";")
    if parts[0].strip(WHITESPACE).lower() != "multipart/related":
        raise Malformed("not multipart/related")
    value = None
    for parameter in parts[1:]:
        pair = parameter.split("=", 1)
        if len(pair) != 2 or pair[0].strip(WHITESPACE).lower() != "boundary":
            continue
        value = pair[1].strip(WHITESPACE)
        if len(value) >= 2 and value.startswith('"') and value.endswith('"'):
            value = value[1:-1]
        break
    if not value:
        raise Malformed("no boundary")
    raw = value.encode()
    if not 1 <= len(raw) <= 70 or not set(raw) <= BOUNDARY_CHARS or raw.endswith(b" "):
        raise Malformed("boundary outside RFC 2046")
    return raw


def _header_block(body, i):
    """(block, next index): an empty block is one CRLF, else everything through the first CRLFCRLF."""
    if body[i:i + 2] == b"\r\n":
        return body[i:i + 2], i + 2
    end = body.find(b"\r\n\r\n", i)
    if end < 0:
        raise Malformed("truncated part headers" if len(body) - i <= HEADER_LIMIT else "part headers too long")
    if end + 4 - i > HEADER_LIMIT:
        raise Malformed("part headers too long")
    return body[i:end + 4], end + 4


def _part_type(block, first):
    content_type = None
    for line in block.decode("utf-8", "replace").split("\r\n"):
        if not line:
            continue
        if ":" not in line:
            raise Malformed("header line without a colon")
        name, value = line.split(":", 1)
        name, value = name.strip(WHITESPACE).lower(), value.strip(WHITESPACE)
        if name == "content-type":
            content_type = value
        elif name == "content-transfer-encoding" and value.lower() not in ("binary", "8bit", "7bit"):
            raise Malformed("transfer-encoded part")
    if first and (content_type is None or content_type.split(";")[0].strip(WHITESPACE).lower() != "application/json"):
        raise Malformed("the first part is not JSON")
    return content_type


def parse_reference(content_type, body):
    """(json bytes, content bytes) of a well-formed body; raises Malformed otherwise."""
    b = boundary_of(content_type)
    opening, delimiter = b"--" + b + b"\r\n", b"\r\n--" + b
    if not body.startswith(opening):
        raise Malformed("does not start with --boundary CRLF")
    block, i = _header_block(body, len(opening))
    _part_type(block, first=True)
    end = body.find(delimiter, i)
    if end < 0:
        raise Malformed("no delimiter after the JSON part")
    metadata = body[i:end]
    if len(metadata) > METADATA_LIMIT:
        raise Malformed("JSON part too large")
    i = end + len(delimiter)
    if body[i:i + 2] != b"\r\n":
        raise Malformed("no content part")
    block, i = _header_block(body, i + 2)
    _part_type(block, first=False)
    end = body.find(delimiter, i)
    if end < 0:
        raise Malformed("no closing delimiter")
    content = body[i:end]
    i = end + len(delimiter)
    if body[i:i + 2] != b"--":
        raise Malformed("a third part, or the boundary inside the content")
    if body[i + 2:] not in (b"", b"\r\n"):
        raise Malformed("trailing bytes")
    return metadata, content


# MARK: the corpus


@dataclasses.dataclass
class Seed:
    name: str
    content_type: str
    body: bytes   # with {NAME} where the object's name goes


def load_seeds():
    seeds = []
    for path in sorted(glob.glob(os.path.join(CORPUS, "*.mp"))):
        with open(path, "rb") as f:
            head, _, body = f.read().partition(b"\r\n\r\n")
        seeds.append(Seed(os.path.basename(path), head.split(b":", 1)[1].strip().decode(), body))
    return seeds


def load_part_headers():
    with open(os.path.join(CORPUS, "part-headers.dict"), encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f if line.strip() and not line.startswith("#")]
    return [re.sub(r"\{LONG:(\d+)\}", lambda m: "v" * int(m.group(1)), line).replace("\\x01", "\x01").encode()
            for line in lines]


# MARK: mutation


@dataclasses.dataclass
class Case:
    """One request: what is sent, how, and what the fuzzer knows about it."""
    query_name: str | None
    content_type: str | None
    body: bytes
    protocol: str | None = "multipart"
    declared_length: int | None = None   # Content-Length when it lies about the body
    chunked: bool = False                # Transfer-Encoding: chunked instead of Content-Length
    if_generation: str | None = None     # ifGenerationMatch
    splits: list = dataclasses.field(default_factory=list)   # body offsets where a send pauses
    mutations: list = dataclasses.field(default_factory=list)
    seed_metadata: bytes | None = None   # the seed's JSON part: a well-formed body with it must pass

    def head(self, port):
        query = f"?name={quote(self.query_name)}" if self.query_name is not None else "?"
        if self.if_generation is not None:
            query += f"&ifGenerationMatch={self.if_generation}"
        lines = [f"POST /v0/b/{BUCKET}/o{query} HTTP/1.1", f"Host: 127.0.0.1:{port}", "Connection: close"]
        if self.protocol is not None:
            lines.append(f"X-Goog-Upload-Protocol: {self.protocol}")
        if self.content_type is not None:
            lines.append(f"Content-Type: {self.content_type}")
        if self.chunked:
            lines.append("Transfer-Encoding: chunked")
        else:
            lines.append(f"Content-Length: {len(self.body) if self.declared_length is None else self.declared_length}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("utf-8", "surrogateescape")

    def received_body(self):
        """The body as the server will see it whole, or None when it never arrives whole."""
        if self.chunked:
            return self.body
        if self.declared_length is not None and self.declared_length != len(self.body):
            return None if self.declared_length > len(self.body) else self.body[:self.declared_length]
        return self.body

    def expected(self):
        """(kind, stored bytes): ("multipart", content) for a well-formed body the server must parse,
        ("raw", body) for a plain upload (no protocol header), ("refuse", None) otherwise."""
        body = self.received_body()
        if body is None:
            return "refuse", None
        proto = self.protocol.strip(WHITESPACE).lower() if self.protocol is not None else None
        if proto is None:
            return "raw", body
        if proto != "multipart":
            return "refuse", None
        try:
            metadata, content = parse_reference(self.content_type, body)
        except Malformed:
            return "refuse", None
        try:
            md5 = json.loads(metadata).get("md5Hash")
        except (ValueError, AttributeError, RecursionError):
            md5 = None
        if isinstance(md5, str) and md5 != base64.b64encode(hashlib.md5(content).digest()).decode():
            return "refuse", None  # the content is not what its md5Hash says: refused, never stored
        return "multipart", content

    def reproducer(self, port=0):
        return {"head": self.head(port).decode("utf-8", "replace"), "body": repr(self.body[:2500]),
                "body bytes": len(self.body), "sha256": hashlib.sha256(self.body).hexdigest()[:16],
                "splits": self.splits[:20], "mutations": self.mutations}


def build(seed, boundary, json_text, part0_headers, part1_headers, content, tail=b"--"):
    return (b"--" + boundary + b"\r\n" + part0_headers + b"\r\n" + json_text + b"\r\n--" + boundary + b"\r\n"
            + part1_headers + b"\r\n" + content + b"\r\n--" + boundary + tail)


# (No CR or LF: one in the Content-Type header breaks the request head, the HTTP fuzzer's ground.)
ODD_BOUNDARIES = ["", "a" * 71, "a" * 70, "ends in space ", "semi;colon", "quote\"d", "tab\tb",
                  "é", "-", "--", "B", "BOUNDARY", "83671420925871936049"]


def mutate(seed, names, part_headers, rng):
    """A Case from a seed: the seed's body with 1–3 structural mutations, sometimes byte damage,
    sometimes sent in pieces. `names` are the worker's own object names."""
    target = rng.choice(names)
    body = seed.body.replace(b"{NAME}", target.encode())
    case = Case(target, seed.content_type, body)
    try:
        case.seed_metadata = parse_reference(seed.content_type, body)[0]
    except Malformed:
        pass
    try:
        boundary = boundary_of(seed.content_type)
    except Malformed:
        boundary = b"B"
    for _ in range(rng.randint(1, 3)):
        op = rng.randrange(17)
        case.mutations.append(op)
        delimiter = b"\r\n--" + boundary
        if op == 0:
            # The Content-Type's boundary: another one, quoted, odd, or missing.
            new = rng.choice(ODD_BOUNDARIES + [boundary.decode() + "x", boundary.decode()[:-1] or "x"])
            form = rng.choice(["boundary={}", 'boundary="{}"', "boundary = {}", "BOUNDARY={}", "charset=x",
                               "boundary={}; boundary=other", "boundary="])
            ctype = rng.choice(["multipart/related", "Multipart/Related", "multipart/form-data", "multipart/mixed",
                                "multipart/related ", "text/plain", ""])
            case.content_type = f"{ctype}; {form.format(new)}"
            if rng.random() < 0.5 and "{}" in form:
                # ...and the body written with it, so the body can still be well-formed.
                try:
                    nb = boundary_of(case.content_type)
                    case.body = case.body.replace(b"--" + boundary, b"--" + nb)
                    boundary = nb
                except Malformed:
                    pass
        elif op == 1:
            # A CRLF of the wrapper dropped, doubled, or made a bare LF or CR.
            spots = [m.start() for m in re.finditer(b"\r\n", case.body)]
            if spots:
                at = rng.choice(spots)
                swap = rng.choice([b"", b"\r\n\r\n", b"\n", b"\r", b" \r\n"])
                case.body = case.body[:at] + swap + case.body[at + 2:]
        elif op == 2:
            # A part header line added to the JSON part or the content part.
            case.body = add_part_header(case.body, delimiter, rng.choice(part_headers), rng)
        elif op == 3:
            # The JSON part replaced.
            other = rng.choice([n for n in names if n != target] or names).encode()
            named = b'{"name":"' + target.encode() + b'"'
            text = rng.choice([b"{", b"null", b"[]", b'"x"', b"{}", b'{"name":1}', b'{"name":"' + other + b'"}',
                               b'{"name":""}', b'{"name":"../x"}', named + b',"metadata":[1]}',
                               named + b',"md5Hash":"AAAAAAAAAAAAAAAAAAAAAA=="}',
                               named + b',"contentType":"text/' + b"x" * 300 + b'"}',
                               named + b',"metadata":{"' + b"k" * 2000 + b'":"v"}}',
                               b'{"a":' * 600 + b'1' + b'}' * 600, b"\xff\xfe{}", (named + b"}") * 2,
                               named + b',"pad":"' + b"p" * rng.choice([65400, 65600, 200000]) + b'"}'])
            start = case.body.find(b"\r\n\r\n")
            end = case.body.find(delimiter, start + 4)
            if start >= 0 and end >= 0:
                case.body = case.body[:start + 4] + text + case.body[end:]
        elif op == 4:
            # Truncated: Content-Length says the cut length (the body ends early, whole as far as HTTP goes).
            at = rng.randrange(len(case.body) + 1)
            case.body = case.body[:at]
        elif op == 5:
            # Content-Length lies: more than is sent (the client half-closes), or less (the rest is garbage).
            case.declared_length = max(0, len(case.body) + rng.choice([1, 100, 70000, -1, -5]))
        elif op == 6:
            # A huge content part, random bytes with delimiter look-alikes spread through it.
            size = rng.choice([256 * KiB, 1 * MiB, 3 * MiB, 6 * MiB])
            content = bytearray(rng.randbytes(size))
            for _ in range(rng.randint(0, 20)):
                at = rng.randrange(size)
                look = rng.choice([delimiter[:-1], delimiter[:3], b"\r\n--", b"\r\r\n--" + boundary[:-1],
                                   b"\n--" + boundary])
                content[at:at + len(look)] = look
            case.body = replace_content(case.body, delimiter, bytes(content))
        elif op == 7:
            # The delimiter inside the content: followed by CRLF (a third part), by `--` (an early end), or by junk.
            content = b"before" + delimiter + rng.choice([b"\r\n", b"--", b"x", b" ", b"--\r\n"]) + b"after"
            case.body = replace_content(case.body, delimiter, content)
        elif op == 8:
            # Before the opening boundary (a preamble) or after the closing one (an epilogue).
            if rng.random() < 0.5:
                case.body = rng.choice([b"\r\n", b"preamble\r\n", b" ", b"--"]) + case.body
            else:
                case.body += rng.choice([b"\r\n", b"\r\n\r\n", b"epilogue", b"\r", b"\n", b"\r\nx", b"--"])
        elif op == 9:
            # No content part, or a third part, or the JSON part alone.
            first = case.body.find(delimiter)
            if rng.random() < 0.5 and first >= 0:
                case.body = case.body[:first] + delimiter + b"--"
            else:
                case.body = case.body[:-2] + b"\r\nContent-Type: text/plain\r\n\r\nthird" + delimiter + b"--"
        elif op == 10:
            # Part headers near the 8 KiB limit (either side of it).
            pad = b"X-Pad: " + b"p" * (HEADER_LIMIT - rng.choice([60, 40, 20, 0, -20]))
            case.body = add_part_header(case.body, delimiter, pad, rng)
        elif op == 11:
            # The protocol header: absent (a plain upload of the whole body), cased, spaced, or another.
            case.protocol = rng.choice([None, "Multipart", " multipart ", "MULTIPART", "resumable", "media", "",
                                        "multipart, multipart"])
        elif op == 12:
            # No ?name= (the JSON's name decides), or another of this worker's names (then they differ).
            case.query_name = rng.choice([None, rng.choice(names)])
        elif op == 13:
            # ifGenerationMatch: stale, zero (must not exist) or garbage. (The current one is set by the worker.)
            case.if_generation = rng.choice(["1", "0", "999999999", "x", "", "-1", "current"])
        elif op == 14:
            case.chunked = True
        elif op == 15:
            # Content that is nothing but CRs, LFs and dashes, or one byte, or empty.
            case.body = replace_content(case.body, delimiter, rng.choice(
                [b"", b"\r", b"\n", b"-", b"\r\n", b"\r\n-", b"\r\n--", b"\r\n--" + boundary[:-1], b"--" + boundary,
                 bytes(rng.choice(b"\r\n-") for _ in range(rng.randrange(1, 200)))]))
        else:
            # Byte damage anywhere in the body.
            if case.body:
                b = bytearray(case.body)
                for _ in range(rng.randint(1, 4)):
                    b[rng.randrange(len(b))] = rng.choice([13, 10, 45, rng.randrange(256)])
                case.body = bytes(b)
    case.splits = split_points(case.body, boundary, rng)
    return case


def add_part_header(body, delimiter, line, rng):
    """The body with `line` added at the end of the JSON part's or the content part's headers."""
    where = body.find(b"\r\n\r\n") if rng.random() < 0.5 else body.find(b"\r\n\r\n", body.find(delimiter) + 1)
    return body[:where + 2] + line + b"\r\n" + body[where + 2:] if where >= 0 else body


def replace_content(body, delimiter, content):
    """The body with its content part (between the 2nd header block and the last delimiter) replaced."""
    second = body.find(delimiter)
    headers_end = body.find(b"\r\n\r\n", second + 1) if second >= 0 else -1
    last = body.rfind(delimiter)
    if headers_end < 0 or last <= headers_end:
        return body
    return body[:headers_end + 4] + content + body[last:]


def split_points(body, boundary, rng):
    """Where the send pauses: none (one piece) half the time, else a few offsets inside delimiters,
    CRLFs and header ends, and random ones."""
    if rng.random() < 0.5 or len(body) < 2:
        return []
    marks = [m.start() for m in re.finditer(re.escape(b"\r\n--" + boundary) + b"|\r\n\r\n|\r\n", body)]
    points = set()
    for _ in range(rng.randint(1, 6)):
        if marks and rng.random() < 0.8:
            points.add(rng.choice(marks) + rng.randint(0, len(boundary) + 4))
        else:
            points.add(rng.randrange(1, len(body)))
    return sorted(p for p in points if 0 < p < len(body))


# MARK: sending


@dataclasses.dataclass
class Answer:
    status: int | None
    raw: bytes
    closed: bool
    hung: bool

    def json(self):
        body = _skip_interim(self.raw).partition(b"\r\n\r\n")[2]
        try:
            return json.loads(body)
        except ValueError:
            return None


def send(port, case, timeout=10.0, linger=3.0):
    """Sends the case (in pieces at its split points, a few ms apart, with TCP_NODELAY so each is its
    own segment), then reads until the server closes or one whole answer is in. When nothing came
    within `timeout` (1.5 s when Content-Length promises more than is sent: the server must wait),
    half-closes and waits `linger` more: still nothing and no close is a hang (the harness's `drain`)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    raw, closed, hung = b"", False, False
    body = case.body
    if case.chunked:
        pieces = [body[a:b] for a, b in zip([0] + case.splits, case.splits + [len(body)])]
        wire = [b"%x\r\n" % len(p) + p + b"\r\n" for p in pieces if p] + [b"0\r\n\r\n"]
    else:
        if case.declared_length is not None and case.declared_length > len(body):
            timeout = 1.5
        sent = body[:case.declared_length] if case.declared_length is not None else body
        cuts = [c for c in case.splits if c < len(sent)]
        wire = [sent[a:b] for a, b in zip([0] + cuts, cuts + [len(sent)])]
    sock.settimeout(timeout)
    try:
        sock.connect(("127.0.0.1", port))
        try:
            sock.sendall(case.head(port))
            for i, piece in enumerate(wire):
                if i:
                    time.sleep(0.003)
                sock.sendall(piece)
        except OSError:
            pass  # refused and closed before the whole body: the answer is still there to read
        raw, closed, hung = drain(sock, timeout, linger, settle=0)
    except OSError:
        closed = True
    finally:
        sock.close()
    return Answer(final_status(raw), raw, closed, hung)


# MARK: the fuzz loop


class Findings:
    def __init__(self):
        self.lock = threading.Lock()
        self.items = []
        self.counts = {"requests": 0, "accepted": 0, "refused": 0, "closed without answer": 0,
                       "well-formed sent": 0, "split sends": 0, "chunked sends": 0, "huge bodies (>=256 KiB)": 0,
                       "error answers not in JSON": 0, "object checks": 0}
        self.statuses = {}
        self.reasons = {}      # the server's refusal messages, first words -> count (what the fuzzer reached)
        self.examples = {"not JSON": [], "closed": []}   # a few of each, for the report

    def fail(self, oracle, case, detail, port=0):
        with self.lock:
            if sum(1 for f in self.items if f["oracle"] == oracle) < 3:
                self.items.append({"oracle": oracle, "known": [], "detail": detail[:600],
                                   "request": json.dumps(case.reproducer(port)) if case else ""})


class Worker:
    """One thread's requests on its own object names, whose state it alone changes."""

    def __init__(self, index, server, findings, rng, seeds, part_headers):
        self.server, self.findings, self.rng = server, findings, rng
        self.seeds, self.part_headers = seeds, part_headers
        self.names = [f"open/w{index}/target.bin", f"open/w{index}/other.bin", f"small/w{index}/target.bin",
                      f"text/w{index}/target.txt"]
        self.state = {}   # name -> (generation, sha256) of what it holds
        self.http = requests.Session()

    def snapshot(self, name):
        """(generation, sha256 of the bytes) or None when absent."""
        url = f"{self.server.url}/v0/b/{BUCKET}/o/{quote(name)}"
        meta = self.http.get(url, timeout=30)
        if meta.status_code == 404:
            return None
        media = self.http.get(url + "?alt=media", timeout=60)
        if meta.status_code != 200 or media.status_code != 200:
            raise AssertionError(f"GET {name}: {meta.status_code}/{media.status_code} {meta.text[:200]}")
        return meta.json().get("generation"), hashlib.sha256(media.content).hexdigest()

    def run(self, deadline):
        for name in self.names:
            self.state[name] = self.snapshot(name)
        while time.monotonic() < deadline and self.server.proc.poll() is None:
            self.one()

    def one(self):
        f = self.findings
        case = mutate(self.rng.choice(self.seeds), self.names, self.part_headers, self.rng)
        json_name = metadata = None
        kind, content = case.expected()
        if kind == "multipart":
            metadata = parse_reference(case.content_type, case.received_body())[0]
            try:
                meta = json.loads(metadata or b"{}")
                json_name = meta.get("name") if isinstance(meta, dict) else None
            except (ValueError, UnicodeDecodeError, RecursionError):
                pass
        name = case.query_name if case.query_name is not None else json_name
        if case.if_generation == "current":
            current = self.state.get(name) if name in self.names else None
            case.if_generation = current[0] if current else "0"
        answer = send(self.server.port, case)
        port = self.server.port
        with f.lock:
            f.counts["requests"] += 1
            f.statuses[answer.status] = f.statuses.get(answer.status, 0) + 1
            f.counts["split sends"] += bool(case.splits)
            f.counts["chunked sends"] += case.chunked
            f.counts["huge bodies (>=256 KiB)"] += len(case.body) >= 256 * KiB
            f.counts["well-formed sent"] += kind != "refuse"
            if answer.status is None:
                f.counts["closed without answer"] += 1
                if len(f.examples["closed"]) < 3:
                    f.examples["closed"].append(f"{case.head(0)[:160]!r} + {len(case.body)} bytes, mutations "
                                                f"{case.mutations}, declared {case.declared_length}")
            elif 200 <= answer.status < 300:
                f.counts["accepted"] += 1
            else:
                f.counts["refused"] += 1
                head = _skip_interim(answer.raw).split(b"\r\n\r\n", 1)[0].lower()
                if b"application/json" not in head:
                    f.counts["error answers not in JSON"] += 1
                    if len(f.examples["not JSON"]) < 3:
                        f.examples["not JSON"].append(f"{answer.raw[:200]!r} for {case.head(0)[:200]!r}, "
                                                      f"mutations {case.mutations}")
                message = ((answer.json() or {}).get("error") or {}).get("message", "") if answer.json() else ""
                key = f"{answer.status} " + re.sub(r"'[^']*'|\d+", "…", str(message))[:70]
                f.reasons[key] = f.reasons.get(key, 0) + 1
        if answer.hung:
            f.fail("hang", case, "no answer and no close after the body and a half-close", port)
        if answer.status in (500, 502, 504):
            f.fail("500", case, answer.raw[:400].decode("latin-1"), port)
        accepted = answer.status is not None and 200 <= answer.status < 300
        if accepted:
            written = (answer.json() or {}).get("name")
            if kind == "refuse":
                f.fail("malformed body accepted", case, f"{answer.status}, stored as {written!r}; the reference "
                       f"parser refuses this body", port)
            if written not in self.names:
                f.fail("accepted under an unexpected name", case, f"{written!r}", port)
                return
            after = self.snapshot(written)
            with f.lock:
                f.counts["object checks"] += 1
            if kind != "refuse" and after[1] != hashlib.sha256(content).hexdigest():
                f.fail("wrong bytes stored", case, f"{written} holds sha256 {after[1][:16]}, the content part "
                       f"({len(content)} bytes) is {hashlib.sha256(content).hexdigest()[:16]}", port)
            if written.startswith("small/") and kind != "refuse" and len(content) >= SMALL_LIMIT:
                f.fail("rules bypassed", case, f"{written}: {len(content)} bytes accepted under small/", port)
            self.state[written] = after
        elif kind == "multipart" and metadata == case.seed_metadata and case.if_generation is None \
                and case.query_name is not None and case.query_name.startswith("open/") \
                and json_name in (None, case.query_name):
            # Well-formed, the seed's own JSON part, an open name, nothing else in the way: must be taken.
            f.fail("well-formed body refused", case, answer.raw[:400].decode("latin-1"), port)
        # Whatever the answer, no other name this worker holds changed, and a refused body changed nothing.
        for other in self.names:
            if accepted and other == (answer.json() or {}).get("name"):
                continue
            if other not in (case.query_name, json_name) and self.rng.random() > 0.1:
                continue  # spot-check the names this request did not name
            now = self.snapshot(other)
            with f.lock:
                f.counts["object checks"] += 1
            if now != self.state[other]:
                f.fail("refused body changed an object", case, f"{other}: {self.state[other]} -> {now} after "
                       f"{answer.status} {answer.raw[:200]!r}", port)
                self.state[other] = now


def fuzz(data_dir, seconds=10.0, seed=1, threads=4):
    server = start_server(data_dir, rules=RULES)
    pid = server.proc.pid
    findings = Findings()
    seeds, part_headers = load_seeds(), load_part_headers()
    # The seeds themselves must parse as the reference says and be accepted: else nothing past the wrapper is tested.
    sanity = []
    for s in seeds:
        case = Case(f"open/seed/{s.name}", s.content_type, s.body.replace(b"{NAME}", f"open/seed/{s.name}".encode()))
        answer = send(server.port, case)
        expected = case.expected()[1]
        stored = requests.get(f"{server.url}/v0/b/{BUCKET}/o/{quote(case.query_name)}?alt=media", timeout=30)
        if answer.status != 200 or stored.content != expected:
            sanity.append(f"{s.name}: {answer.status} {answer.raw[:200]!r}")
    for item in sanity:
        findings.fail("seed not accepted as the reference parses it", None, item)
    size0, _ = metrics(server.url)
    rss0 = pid_status(pid, "VmRSS")
    rng = random.Random(seed)
    deadline = time.monotonic() + seconds
    workers = [Worker(i, server, findings, random.Random(rng.random()), seeds, part_headers) for i in range(threads)]
    errors = []

    def guarded(w):
        try:
            w.run(deadline)
        except Exception as e:  # a broken oracle or a dead server: a finding, not a lost run
            errors.append(repr(e)[:500])

    pool = [threading.Thread(target=guarded, args=(w,)) for w in workers]
    for t in pool:
        t.start()
    samples = []
    while any(t.is_alive() for t in pool):
        time.sleep(1.0)
        if server.proc.poll() is None:
            try:
                samples.append((metrics(server.url, timeout=10)[0], pid_status(pid, "VmRSS")))
            except requests.RequestException as e:
                findings.fail("/metrics", None, repr(e))
    for t in pool:
        t.join()
    for e in errors:
        findings.fail("worker error", None, e)
    figures = {"seconds": seconds, "threads": threads, "seeds": len(seeds), **findings.counts,
               "statuses": {str(k): v for k, v in sorted(findings.statuses.items(), key=lambda kv: str(kv[0]))},
               "refusals by message (top 12)": dict(sorted(findings.reasons.items(), key=lambda kv: -kv[1])[:12]),
               "closed without answer, e.g.": findings.examples["closed"],
               "error answers not in JSON, e.g.": findings.examples["not JSON"]}
    if server.proc.poll() is not None:
        findings.fail("server died", None, f"exit {server.proc.returncode}")
        figures["server"] = f"died (exit {server.proc.returncode})"
        server.stop()
        return figures, findings.items
    size1, _ = metrics(server.url)
    rss1 = pid_status(pid, "VmRSS")
    figures.update({"/metrics bytes start/end": f"{size0}/{size1}",
                    "RSS MB start/peak sample/end": f"{rss0 / 1e6:.1f}/"
                    f"{max([r for _, r in samples if r] or [rss1]) / 1e6:.1f}/{rss1 / 1e6:.1f}"})
    if size1 > 256 * KiB:
        findings.fail("/metrics unbounded", None, f"{size0} -> {size1} bytes")
    if rss1 - rss0 > 128e6:
        findings.fail("RSS unbounded", None, f"{rss0} -> {rss1}")
    time.sleep(0.5)
    in_flight = metrics(server.url)[1].get("larder_http_requests_in_flight")
    figures["in-flight gauge at end"] = in_flight
    if in_flight is not None and in_flight > 1:
        findings.fail("in-flight gauge leak", None, f"{in_flight:.0f} requests in flight after the run")
    tmp_left = os.listdir(os.path.join(data_dir, "tmp")) if os.path.isdir(os.path.join(data_dir, "tmp")) else []
    figures["temp files left"] = len(tmp_left)
    if tmp_left:
        findings.fail("temp files left", None, f"{len(tmp_left)} in tmp/ after every request ended: {tmp_left[:5]}")
    server.stop()
    ok, code, kinds, err = verify(data_dir)
    figures["verify"] = f"exit {code}, findings {kinds or 'none'}"
    if code != 0:
        findings.fail("verify", None, f"exit {code}, findings {kinds}: {err[:300]}")
    return figures, findings.items


def main(argv=None):
    return fuzzer_main(argv, __doc__, fuzz, threads=4, data_prefix="larder-fuzz-multipart-")


if __name__ == "__main__":
    sys.exit(main())
