"""Starts `deepinfer serve` on a free loopback port for raw-HTTP tests, and small helpers.

The binary comes from DEEPINFER_BIN; the embedded tiny model is written once into
DEEPINFER_CACHE_DIR (ctest sets both)."""
import json
import os
import signal
import socket
import subprocess
import tempfile
import time

BIN = os.environ.get("DEEPINFER_BIN", "build/deepinfer")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, *args, prefix=(), env=None, ready=True):
        self.port = free_port()
        self.log = tempfile.NamedTemporaryFile(prefix="serve-", suffix=".log", delete=False)
        cmd = list(prefix) + [BIN, "serve", "--host", "127.0.0.1", "--port", str(self.port),
                              "--access-log", ""] + list(args)
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT,
                                     env={**os.environ, **(env or {})})
        if ready:
            self.wait_ready()

    def wait_ready(self, tries=1200):
        for _ in range(tries):
            assert self.proc.poll() is None, "server exited:\n" + self.log_text()
            try:
                status, _, _ = self.request("GET", "/health")
                if status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise AssertionError("/health never became 200:\n" + self.log_text())

    def log_text(self):
        with open(self.log.name, errors="replace") as f:
            return f.read()[-4000:]

    def alive(self):
        return self.proc.poll() is None

    def connect(self, timeout=60):
        return socket.create_connection(("127.0.0.1", self.port), timeout=timeout)

    def raw(self, data, timeout=60, read_all=True):
        """Sends bytes on a fresh connection; returns everything read until the server closes
        (read_all) or the first response's bytes."""
        with self.connect(timeout) as s:
            s.sendall(data)
            return read_responses(s, 1)[0] if not read_all else recv_all(s)

    def request(self, method, path, body=None, headers=None, timeout=120):
        """One request on its own connection: (status, headers dict lower-cased, body bytes)."""
        hdrs = {"Host": "127.0.0.1:%d" % self.port, "Connection": "close"}
        if body is not None:
            if not isinstance(body, (bytes, str)):
                body = json.dumps(body)
            if isinstance(body, str):
                body = body.encode()
            hdrs["Content-Type"] = "application/json"
            hdrs["Content-Length"] = str(len(body))
        hdrs.update(headers or {})
        head = "%s %s HTTP/1.1\r\n" % (method, path)
        head += "".join("%s: %s\r\n" % kv for kv in hdrs.items()) + "\r\n"
        with self.connect(timeout) as s:
            s.sendall(head.encode() + (body or b""))
            return read_responses(s, 1)[0]

    def post(self, path, body, **kw):
        status, headers, data = self.request("POST", path, body, **kw)
        return status, headers, json.loads(data) if data else None

    def metric(self, name, label_part=""):
        _, _, text = self.request("GET", "/metrics")
        for line in text.decode().splitlines():
            if line.startswith(name + "{") and label_part in line:
                return float(line.rsplit(" ", 1)[1])
        raise AssertionError("metric %s{%s} missing" % (name, label_part))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        os.unlink(self.log.name)


def recv_all(s):
    out = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            return out
        out += chunk


def read_responses(s, count):
    """Reads `count` HTTP/1.1 responses (Content-Length or close-delimited) from a socket."""
    buf = b""
    out = []
    while len(out) < count:
        while b"\r\n\r\n" not in buf:
            chunk = s.recv(65536)
            if not chunk:
                raise ConnectionError("closed before a response head: %r" % buf[:200])
            buf += chunk
        head, buf = buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ")[1])
        headers = {}
        for line in lines[1:]:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
        if status == 100:
            continue
        if "content-length" in headers:
            n = int(headers["content-length"])
            while len(buf) < n:
                chunk = s.recv(65536)
                if not chunk:
                    raise ConnectionError("closed inside a body")
                buf += chunk
            body, buf = buf[:n], buf[n:]
        else:
            body = buf + recv_all(s)
            buf = b""
        out.append((status, headers, body))
    return out


def normal_request_ok(server, timeout=120):
    """A 1-token completion from another client is answered, and the process is alive."""
    status, _, body = server.post("/v1/completions",
                                  {"prompt": "Hello", "max_tokens": 1, "temperature": 0},
                                  timeout=timeout)
    assert status == 200, body
    assert body["choices"][0]["finish_reason"] in ("length", "stop")
    assert server.alive()


def sse_events(body):
    events = []
    for block in body.decode().split("\n\n"):
        if block.startswith("data: ") and block != "data: [DONE]":
            events.append(json.loads(block[6:]))
    return events
