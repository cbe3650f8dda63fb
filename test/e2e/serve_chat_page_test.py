#!/usr/bin/env python3
"""llmc serve's chat page (GET /, runtime/src/serve/chat_page.html), in a real headless browser.

A synthetic llama (vocab 300, hidden 64, 2 layers, f32 GGUF, untied embeddings so its replies are
more than one repeated token) is compiled and served with `llmc serve ART --port P --threads 1
--api-key KEY`. Headless Chromium (/usr/bin/chromium, or $CHROMIUM), driven over the DevTools
protocol by the small WebSocket client below (the stdlib has none; no pip package needed), loads
http://127.0.0.1:P/?max_tokens=16&temperature=0 and checks:

  GET /        the repository's chat_page.html byte for byte (a stale build fails), text/html,
               without the API key (a browser cannot send one when it navigates)
  wrong key    a reply marked data-finish-reason="error", the server's error.message shown in the
               page, and the message given back in the textarea to retry
  turn 1       the retry with the right key (clicking Send): the streamed reply equals the content
               of the same request made non-streaming with urllib (max_tokens 16, temperature 0);
               the user's text with HTML in it shows as text, no elements made of it
  turn 2       typed with keyboard events: Shift+Enter makes a new line, Enter sends; the reply
               equals the non-streaming one for the whole conversation (user, assistant, user)

Exits 0 on pass, 1 on failure (printing the server's log tail and the page's DOM), 77 (skip) when
Chromium, the llmc binary or the synthetic-model tool's dependencies are missing (said loudly).

  python3 test/e2e/serve_chat_page_test.py --llmc build/bin/llmc [--keep DIR]
"""
import argparse
import base64
import hashlib
import importlib.util
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SYNTH = os.path.join(ROOT, "tools", "synth-model", "synth_model.py")
PAGE = os.path.join(ROOT, "runtime", "src", "serve", "chat_page.html")
MODEL = ["--arch", "llama", "--vocab", "300", "--hidden", "64", "--heads", "4", "--kv-heads", "2",
         "--intermediate", "160", "--layers", "2", "--max-position", "512", "--gguf-type", "f32",
         "--no-tie-embeddings", "--seed", "9"]
API_KEY = "chat-page-test-key"
MAX_TOKENS = 16
TEXT1 = '<b>Hello</b> & "friends" <script>alert(1)</script> ünï'
DEADLINE = time.monotonic() + 57  # the whole test


class Skip(Exception):
    pass


class Fail(Exception):
    pass


def left(cap):
    """Seconds to wait: at most cap, never past the test's deadline."""
    t = min(cap, DEADLINE - time.monotonic())
    if t <= 0:
        raise Fail("the test ran past its 57 s deadline")
    return t


def wait_for(what, cond, cap, step=0.05):
    end = time.monotonic() + left(cap)
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > end:
            raise Fail(f"timed out after {cap} s waiting for {what}")
        time.sleep(step)


class WebSocket:
    """A minimal RFC 6455 client: enough for the DevTools protocol (text frames, any length)."""

    def __init__(self, url):
        u = urllib.parse.urlsplit(url)
        self.sock = socket.create_connection((u.hostname, u.port), timeout=left(10))
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET {u.path} HTTP/1.1\r\nHost: {u.hostname}:{u.port}\r\n"
                           "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                           f"Sec-WebSocket-Key: {key}\r\n"
                           "Sec-WebSocket-Version: 13\r\n\r\n").encode())
        self.buf = b""
        while b"\r\n\r\n" not in self.buf:
            self.buf += self._recv()
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        accept = base64.b64encode(hashlib.sha1(
            (key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest())
        if not head.startswith(b"HTTP/1.1 101") or accept not in head:
            raise Fail(f"WebSocket handshake to {url} refused: {head.decode(errors='replace')}")

    def _recv(self):
        self.sock.settimeout(left(20))
        c = self.sock.recv(1 << 16)
        if not c:
            raise Fail("the DevTools WebSocket closed")
        return c

    def _exact(self, n):
        while len(self.buf) < n:
            self.buf += self._recv()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    @staticmethod
    def _mask(data, key):
        k = (key * (len(data) // 4 + 1))[:len(data)]
        return (int.from_bytes(data, "big") ^ int.from_bytes(k, "big")).to_bytes(len(data), "big")

    def send(self, data, opcode=1):
        data = data.encode() if isinstance(data, str) else data
        n = len(data)
        head = bytes([0x80 | opcode])
        if n < 126:
            head += bytes([0x80 | n])
        elif n < 1 << 16:
            head += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            head += bytes([0x80 | 127]) + struct.pack(">Q", n)
        key = os.urandom(4)  # clients mask every frame
        self.sock.sendall(head + key + self._mask(data, key))

    def recv(self):
        """The next whole text message (fragments joined; pings answered)."""
        msg = b""
        while True:
            b0, b1 = self._exact(2)
            op, n = b0 & 0x0F, b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._exact(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._exact(8))[0]
            key = self._exact(4) if b1 & 0x80 else None
            data = self._exact(n)
            if key:
                data = self._mask(data, key)
            if op == 8:
                raise Fail("the DevTools WebSocket was closed by the browser")
            if op == 9:
                self.send(data, 10)
            elif op in (0, 1, 2):
                msg += data
                if b0 & 0x80:
                    return msg.decode()

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


class Browser:
    """Headless Chromium with one page, driven over the DevTools protocol."""

    def __init__(self, exe, work):
        profile = os.path.join(work, "chromium-profile")
        shutil.rmtree(profile, ignore_errors=True)  # a --keep DIR's old DevToolsActivePort
        self.log = os.path.join(work, "chromium.log")
        self.proc = subprocess.Popen(
            [exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
             "--no-first-run", "--no-default-browser-check", "--disable-extensions",
             "--disable-background-networking", "--disable-component-update",
             "--remote-debugging-port=0", f"--user-data-dir={profile}", "about:blank"],
            stdout=open(self.log, "w"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True)
        self.ws = None
        self.events = []  # console messages and exceptions, for the failure report
        self.active = os.path.join(profile, "DevToolsActivePort")

    def connect(self):
        """To the browser's first page (apart from starting it: a failure here is closed too)."""

        def port():
            if self.proc.poll() is not None:
                raise Fail(f"chromium exited ({self.proc.returncode}):\n{tail(self.log)}")
            try:
                lines = open(self.active).read().split("\n")
                return int(lines[0]) if len(lines) >= 2 and lines[1] else None
            except (OSError, ValueError):
                return None
        dev = wait_for("chromium's DevToolsActivePort", port, 20)
        with urllib.request.urlopen(f"http://127.0.0.1:{dev}/json/list", timeout=left(10)) as r:
            pages = [t for t in json.load(r) if t.get("type") == "page"]
        if not pages:
            raise Fail("chromium has no page target")
        self.ws = WebSocket(pages[0]["webSocketDebuggerUrl"])
        self.n = 0
        self.call("Runtime.enable")
        self.call("Page.enable")

    def call(self, method, **params):
        self.n += 1
        self.ws.send(json.dumps({"id": self.n, "method": method, "params": params}))
        while True:
            m = json.loads(self.ws.recv())
            if m.get("id") == self.n:
                if "error" in m:
                    raise Fail(f"DevTools {method} failed: {m['error']}")
                return m.get("result", {})
            if m.get("method") in ("Runtime.consoleAPICalled", "Runtime.exceptionThrown"):
                self.events.append(json.dumps(m["params"])[:600])

    def eval(self, expr):
        r = self.call("Runtime.evaluate", expression=expr, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise Fail(f"page script failed: {expr}\n{json.dumps(r['exceptionDetails'])[:1500]}")
        return r["result"].get("value")

    def key(self, key, modifiers=0, text=None):
        """A key press as the keyboard sends it (keydown with its text, then keyup)."""
        code = {"Enter": 13}[key]
        down = dict(type="keyDown", key=key, code=key, windowsVirtualKeyCode=code,
                    nativeVirtualKeyCode=code, modifiers=modifiers)
        if text:
            down.update(text=text, unmodifiedText=text)
        self.call("Input.dispatchKeyEvent", **down)
        self.call("Input.dispatchKeyEvent", type="keyUp", key=key, code=key,
                  windowsVirtualKeyCode=code, nativeVirtualKeyCode=code, modifiers=modifiers)

    def close(self):
        if self.ws:
            self.ws.close()
        stop(self.proc)


def stop(proc):
    """Ends a process this test started, and its children (its own session)."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
            proc.wait()


def tail(path, n=40):
    try:
        return "".join(open(path, errors="replace").readlines()[-n:])
    except OSError as e:
        return f"({e})"


def http(port, method, path, body=None, key=None):
    headers = {"Content-Type": "application/json"} if body is not None else {}
    if key:
        headers["Authorization"] = "Bearer " + key
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method, headers=headers,
                                 data=None if body is None else json.dumps(body).encode())
    try:
        with urllib.request.urlopen(req, timeout=left(20)) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(llmc, art, work):
    port = free_port()
    log = os.path.join(work, "server.log")
    proc = subprocess.Popen([llmc, "serve", art, "--host", "127.0.0.1", "--port", str(port),
                             "--threads", "1", "--api-key", API_KEY],
                            stdout=open(log, "w"), stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True)

    def healthy():
        if proc.poll() is not None:
            raise Fail(f"`llmc serve` exited ({proc.returncode}) before answering /health")
        try:
            return http(port, "GET", "/health")[0] == 200
        except (OSError, urllib.error.URLError):
            return False
    wait_for("the server's /health", healthy, 30, 0.1)
    return proc, port, log


def direct_reply(port, model, messages):
    """The non-streaming answer to what the page asks, with urllib."""
    code, _, body = http(port, "POST", "/v1/chat/completions", key=API_KEY, body={
        "model": model, "messages": messages, "max_tokens": MAX_TOKENS, "temperature": 0,
        "stream": False})
    if code != 200:
        raise Fail(f"POST /v1/chat/completions (non-streaming): HTTP {code}: {body[:500]!r}")
    return json.loads(body)["choices"][0]["message"]["content"]


REPLIES = "document.querySelectorAll('#messages .assistant')"
# The page's script defines $(id) = document.getElementById(id); page scripts here use it (not
# window.prompt etc.: element ids do not shadow the window's own names).


def wait_reply(b, n):
    """Waits for the page's n-th reply to finish; returns (text, finish_reason)."""
    wait_for(f"reply {n} to finish (body data-state idle)", lambda: b.eval(
        f"document.body.dataset.state === 'idle' && {REPLIES}.length === {n} && "
        f"{REPLIES}[{n - 1}].dataset.finishReason !== undefined"), 25)
    return b.eval(f"[{REPLIES}[{n - 1}].textContent, {REPLIES}[{n - 1}].dataset.finishReason]")


def check(cond, what):
    if not cond:
        raise Fail(what)
    print(f"ok: {what}", flush=True)


def run_checks(b, port):
    code, headers, page = http(port, "GET", "/")
    check(code == 200 and headers.get("Content-Type", "").startswith("text/html"),
          f"GET / without a key answers 200 text/html (got {code} {headers.get('Content-Type')})")
    check(page == open(PAGE, "rb").read(),
          "GET / is runtime/src/serve/chat_page.html byte for byte (a stale build differs)")
    code, _, body = http(port, "GET", "/v1/models", key=API_KEY)
    check(code == 200, f"GET /v1/models answers 200 (got {code}: {body[:300]!r})")
    model = json.loads(body)["data"][0]["id"]
    code, _, body = http(port, "POST", "/v1/chat/completions", key="wrong-key", body={
        "model": model, "messages": [{"role": "user", "content": "hi"}], "stream": True})
    check(400 <= code < 500, f"a wrong API key is refused with a 4xx (got {code})")
    wrong_key_message = json.loads(body)["error"]["message"]

    b.call("Page.navigate", url=f"http://127.0.0.1:{port}/?max_tokens={MAX_TOKENS}&temperature=0")
    wait_for("the page to load", lambda: b.eval(
        "document.readyState === 'complete' && typeof $ === 'function' && !!$('send')"), 15)
    check(b.eval("[$('max_tokens').value, $('temperature').value]") == [str(MAX_TOKENS), "0"],
          "the URL's max_tokens and temperature fill the settings")

    # A wrong key: the server's message in the page, the text back in the textarea.
    b.eval("$('api_key').value = 'wrong-key'; $('api_key').dispatchEvent(new Event('change'));"
           f"$('prompt').value = {json.dumps(TEXT1)}; $('send').click(); true")
    _, finish = wait_reply(b, 1)
    check(finish == "error", f"with a wrong key the reply ends in error (got {finish!r})")
    shown = b.eval("Array.from(document.querySelectorAll('#messages .error'), e => e.textContent)")
    check(len(shown) == 1 and wrong_key_message in shown[0],
          f"the page shows the server's error.message {wrong_key_message!r} (shows {shown!r})")
    check(b.eval("$('prompt').value") == TEXT1, "the failed message is back in the textarea")

    # Turn 1: the right key, Send clicked.
    b.eval(f"$('api_key').value = {json.dumps(API_KEY)};"
           "$('api_key').dispatchEvent(new Event('change')); $('send').click(); true")
    reply1, finish = wait_reply(b, 2)
    expect1 = direct_reply(port, model, [{"role": "user", "content": TEXT1}])
    check(finish in ("stop", "length"), f"turn 1 finishes with stop or length (got {finish!r})")
    check(reply1 != "", "turn 1's streamed reply is not empty")
    check(reply1 == expect1, f"turn 1's streamed reply {reply1!r} equals the non-streaming one "
          f"{expect1!r}")
    users = b.eval("Array.from(document.querySelectorAll('#messages .user'), e => e.textContent)")
    check(users[-1] == TEXT1 and b.eval("document.querySelectorAll('#messages b, #messages script')"
                                        ".length") == 0,
          "the user's HTML shows as text, no elements made of it")
    check(b.eval("$('model').textContent") == model,
          f"the page shows the model from /v1/models ({model!r})")

    # Turn 2, typed: Shift+Enter is a new line, Enter sends.
    b.eval("$('prompt').focus(); true")
    b.call("Input.insertText", text="line one")
    b.key("Enter", modifiers=8, text="\r")
    b.call("Input.insertText", text="line two")
    typed, n = b.eval(f"[$('prompt').value, {REPLIES}.length]")
    check(typed == "line one\nline two" and n == 2,
          f"Shift+Enter makes a new line and sends nothing (textarea {typed!r}, {n} replies)")
    b.key("Enter", text="\r")
    reply2, finish = wait_reply(b, 3)
    text2 = "line one\nline two"
    expect2 = direct_reply(port, model, [{"role": "user", "content": TEXT1},
                                         {"role": "assistant", "content": expect1},
                                         {"role": "user", "content": text2}])
    check(finish in ("stop", "length") and reply2 != "",
          f"turn 2 (Enter) finishes with a reply (finish {finish!r}, {len(reply2)} chars)")
    check(reply2 == expect2, f"turn 2's streamed reply {reply2!r} equals the non-streaming one for "
          f"the whole conversation {expect2!r}")
    check(b.eval("$('prompt').value") == "", "the textarea is empty after sending")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--llmc", required=True, help="the llmc binary (compiles and serves)")
    ap.add_argument("--keep", help="keep the model, artifact and logs in DIR")
    a = ap.parse_args()
    work = a.keep or tempfile.mkdtemp(prefix="llmc-chat-page-")
    os.makedirs(work, exist_ok=True)
    server = browser = None
    log = None
    try:
        chromium = os.environ.get("CHROMIUM") or shutil.which("chromium") or \
            shutil.which("chromium-browser") or shutil.which("google-chrome")
        if not chromium:
            raise Skip("no chromium (apt-get install chromium, or set $CHROMIUM)")
        if not os.path.exists(a.llmc):
            raise Skip(f"no llmc binary at {a.llmc}")
        missing = [m for m in ("numpy", "gguf") if importlib.util.find_spec(m) is None]
        if missing:
            raise Skip(f"the synthetic-model tool needs {' and '.join(missing)} (pip install)")
        gguf_path, art = os.path.join(work, "model.gguf"), os.path.join(work, "model.llmc")
        for cmd in ([sys.executable, SYNTH, "--format", "gguf", "--out", gguf_path] + MODEL,
                    [a.llmc, "compile", gguf_path, "-o", art]):
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=left(30))
            if r.returncode != 0:
                raise Fail(f"{' '.join(cmd)} failed ({r.returncode}):\n"
                           f"{r.stdout}{r.stderr[-3000:]}")
        server, port, log = start_server(a.llmc, art, work)
        browser = Browser(chromium, work)
        browser.connect()
        run_checks(browser, port)
        print("PASS serve_chat_page", flush=True)
        return 0
    except Skip as e:
        print(f"SKIPPED serve_chat_page: {e}", flush=True)
        return 77
    except (Fail, OSError, ValueError, KeyError, IndexError, subprocess.TimeoutExpired) as e:
        print(f"FAIL serve_chat_page: {type(e).__name__ + ': ' if not isinstance(e, Fail) else ''}"
              f"{e}", flush=True)
        if log:
            print(f"--- server log tail ({log}) ---\n{tail(log)}", flush=True)
        if browser and browser.ws:
            global DEADLINE
            DEADLINE = time.monotonic() + 5  # time to read the page back
            try:
                print("--- page DOM ---\n" + browser.eval(
                    "`data-state=${document.body.dataset.state}\\n` + "
                    "document.getElementById('messages').outerHTML"), flush=True)
            except Exception as e2:  # noqa: BLE001 - a report, best effort
                print(f"(no DOM: {e2})")
            if browser.events:
                print("--- page console ---\n" + "\n".join(browser.events[-20:]), flush=True)
        if browser:
            print(f"--- chromium log tail ---\n{tail(browser.log, 15)}", flush=True)
        return 1
    finally:
        if browser:
            browser.close()
        if server:
            stop(server)
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
