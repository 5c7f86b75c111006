"""A TCP forwarder on 127.0.0.1:0 whose target can be switched while it runs: the load balancer of
the multi-node interop tests (interop/test_multinode_resumable.py).

Clients only ever talk to the proxy's URL, and the proxy passes the bytes through unchanged (so the
Host header, from which the server builds tus `Location` and Firebase `X-Goog-Upload-URL`, names the
proxy): an upload URL handed out by one node stays valid after the switch to another. A connection
keeps the target it was opened to; when that target dies it just breaks (both sides are reset),
and new connections go to the current target. No HTTP parsing, no buffering beyond one read.

A half-close is passed on, as a TCP load balancer does: a server that answers a refused upload from
its head sends the answer, shuts its side for writing and reads the rest of the body (a lingering
close). Shutting the whole pair down there instead left the client's socket facing an orphaned peer
with a zero window: the client, still sending its body, hung for a minute before it read the answer.
"""
import socket
import struct
import threading


class SwitchProxy:
    """`SwitchProxy(port)` forwards 127.0.0.1:`proxy.port` to 127.0.0.1:`port`; `switch(other)`."""

    def __init__(self, target_port):
        self._target = target_port
        self._lock = threading.Lock()
        self._connections = set()
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(128)
        self.port = self._listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._closed = False
        threading.Thread(target=self._accept, name="switch-proxy-accept", daemon=True).start()

    @property
    def target(self):
        with self._lock:
            return self._target

    def switch(self, target_port, drop_open=False):
        """New connections go to `target_port`; open ones stay where they are, unless `drop_open`
        breaks them (for a client that keeps its connection alive between requests, so that its
        next request surely goes to the new target: only when it has none in flight)."""
        with self._lock:
            self._target = target_port
            pairs = list(self._connections) if drop_open else []
        for pair in pairs:
            break_pair(pair)

    def close(self):
        """Stops listening and breaks every open connection."""
        self._closed = True
        try:
            self._listener.close()
        except OSError:
            pass
        with self._lock:
            pairs = list(self._connections)
        for pair in pairs:
            break_pair(pair)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _accept(self):
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._connect, args=(client,), name="switch-proxy-conn", daemon=True).start()

    def _connect(self, client):
        try:
            upstream = socket.create_connection(("127.0.0.1", self.target), timeout=5)
            upstream.settimeout(None)
        except OSError:
            # The target is down (refused): the client sees its connection closed, as behind a
            # load balancer whose backend died, and retries.
            _close(client)
            return
        for s in (client, upstream):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        pair = (client, upstream)
        with self._lock:
            self._connections.add(pair)
        relay(client, upstream)
        with self._lock:
            self._connections.discard(pair)


def relay(client, upstream, before_send=None):
    """Copies both ways between `client` and `upstream` until both directions have ended, then
    closes both. `before_send(data)` sees each piece the client sends first."""
    pair = (client, upstream)
    back = threading.Thread(target=pump, args=(upstream, client, pair), daemon=True)
    back.start()
    pump(client, upstream, pair, before_send)
    back.join()
    for s in pair:
        s.close()


def pump(source, sink, pair, before_send=None):
    """Copies `source` to `sink` until `source` ends, then shuts `sink` for writing (the half-close
    passed on; the other direction goes on). When either socket fails, the pair is broken: a dead
    target must break the client's connection at once. `before_send(data)` sees each piece first.
    The caller closes the sockets once both directions are done."""
    try:
        while True:
            data = source.recv(1 << 16)
            if not data:
                break
            if before_send:
                before_send(data)
            sink.sendall(data)
        sink.shutdown(socket.SHUT_WR)
    except OSError:
        break_pair(pair)


def break_pair(pair):
    """Resets both connections: each peer sees its connection fail (not a clean end), and a peer
    still sending is not left writing into a closed socket's zero window. Wakes any thread blocked
    on either socket; the sockets still need closing."""
    for s in pair:
        try:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def _close(s):
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    s.close()
