"""What the `llmc serve` end-to-end tests share: a synthetic model compiled
once per work folder, a server process started on a free port and stopped
with a signal, and plain-socket HTTP helpers for the requests the `openai`
client would never send (malformed, slow, cut off).
"""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SYNTH = os.path.join(ROOT, "tools", "synth-model", "synth_model.py")
SMOLLM2 = os.path.expanduser("~/.cache/llmc/models/SmolLM2-135M-Instruct.Q4_1.gguf")

# Untied embeddings: with tied ones the random model repeats its last token,
# which would make every greedy stream look alike.
SYNTH_OPTS = ["--arch", "llama", "--vocab", "300", "--hidden", "128", "--heads", "4",
              "--kv-heads", "2", "--intermediate", "256", "--layers", "2",
              "--max-position", "2048", "--gguf-type", "q8_0", "--no-tie-embeddings"]


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}{r.stderr[-3000:]}")
    return r


def synthetic_artifact(llmc, work, name="synth"):
    art = os.path.join(work, name + ".llmc")
    if not os.path.exists(os.path.join(art, "manifest.json")):
        gguf = os.path.join(work, name + ".gguf")
        run([sys.executable, SYNTH, "--format", "gguf", "--out", gguf, "--seed", "5"] + SYNTH_OPTS)
        run([llmc, "compile", gguf, "-o", art])
    return art


def runtime_exe(llmc):
    rt = os.path.join(os.path.dirname(llmc), "llmc-rt")
    return rt if os.path.exists(rt) else llmc


class Server:
    """`llmc serve ART --port 0 ARGS...`; the port is read from its banner."""

    def __init__(self, exe, art, args=(), work=".", name="server"):
        self.log_path = os.path.join(work, name + ".log")
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen([exe, "serve", art, "--port", "0"] + list(args),
                                     stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 120
        self.port = None
        while time.time() < deadline and self.port is None:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}:\n{self.tail()}")
            m = re.search(r"on http://[0-9.]+:(\d+)", open(self.log_path).read())
            if m:
                self.port = int(m.group(1))
            else:
                time.sleep(0.05)
        if self.port is None:
            self.stop()
            raise RuntimeError(f"server did not start:\n{self.tail()}")
        self.base = f"http://127.0.0.1:{self.port}"

    def tail(self, n=4000):
        self.log.flush()
        return open(self.log_path, errors="replace").read()[-n:]

    def rss_kib(self):
        """(VmRSS, VmHWM) of the server process in KiB."""
        fields = {}
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                k, _, v = line.partition(":")
                fields[k] = v.strip()
        return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])

    def signal(self, sig=signal.SIGTERM):
        self.proc.send_signal(sig)

    def wait(self, timeout):
        return self.proc.wait(timeout=timeout)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def http(base, method, path, body=None, headers=None, timeout=60):
    """(status, headers, parsed JSON or text) of one request with urllib."""
    data = None
    hdrs = dict(headers or {})
    if body is not None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        hdrs.setdefault("Content-Type", "application/json")
    req = urllib.request.Request(base + path, data=data, method=method, headers=hdrs)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            status, h, raw = r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        status, h, raw = e.code, dict(e.headers), e.read()
    text = raw.decode("utf-8", errors="replace")
    try:
        return status, h, json.loads(text)
    except ValueError:
        return status, h, text


def raw_exchange(port, data, timeout=10, read=True):
    """Sends `data` on a fresh socket; returns what came back until the
    server closed (or `timeout`)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(data)
        if not read:
            return b""
        out = b""
        while True:
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                break
            if not chunk:
                break
            out += chunk
            if b"\r\n\r\n" in out and b"Connection: close" in out and len(out) > 0:
                # Error answers close the connection; keep reading to EOF.
                continue
        return out
    finally:
        s.close()


def metric(text, name):
    """The value of the first sample of metric `name` in Prometheus text."""
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    raise KeyError(name)


def wait_until(fn, timeout, step=0.05):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = fn()
        if v:
            return v
        time.sleep(step)
    return fn()
