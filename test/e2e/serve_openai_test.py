#!/usr/bin/env python3
"""`llmc serve` with the official `openai` Python client, and under faults.

On a synthetic model (always) and SmolLM2-135M Q4_1 (when its GGUF is in
~/.cache/llmc/models; skipped loudly otherwise):

  api      completions and chat, streamed and whole; n=2; stop; seed
           reproducibility; logprobs; usage and finish_reason in every
           answer; /v1/models, /tokenize, /detokenize, /metrics, /health
  greedy   greedy text over HTTP equals `llmc run --greedy` for the same
           prompt (completions) and `llmc run --chat --greedy` (chat)
  errors   malformed JSON, wrong types, out-of-range values, invalid UTF-8,
           an unknown model, missing or wrong API key, an oversized body
           (413), oversized headers (431): each the right status and an
           OpenAI error naming the problem
  slow     a client that never finishes its headers is cut off by
           --read-timeout
  cancel   50 streaming clients disconnect at random points (a third of
           them echo their prompt with logprobs) while 10 others stream to the end: the 10 are unaffected
           (equal to the same requests served alone) and every KV block is
           freed
  overload --max-queue: 429 with Retry-After, never a lost request
  drain    SIGTERM during load: requests in flight finish, new connections
           are refused, exit 0; with a short --shutdown-timeout the rest end
           with finish_reason "abort" and [DONE], exit 0

Exits 0 when every case passes, 1 on any failure or when -k matches no
case, 77 when the `openai` package is missing (said loudly).

  python3 test/e2e/serve_openai_test.py --llmc build/bin/llmc [--server-exe BIN] [-k NAME]
      [--keep DIR]
"""
import argparse
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_harness as H  # noqa: E402

try:
    import openai
except ImportError:
    openai = None

KEY = "test-key-123"
RESULTS = []
# What -k selects from (the docstring's list).
CASES = ("api", "greedy", "errors", "slow", "cancel", "overload", "drain", "smollm2")


def check_echo(c, model, name, prompt, server):
    """echo: the prompt's text and its tokens' logprobs (an engine score
    request, the runner's forced picks) before the output; max_tokens 0
    scores the prompt alone, as lm-evaluation-harness asks."""
    _, _, tok = H.http(server.base, "POST", "/tokenize", {"prompt": prompt}, auth())
    ids = tok["tokens"]
    alone = c.completions.create(model=model, prompt=ids, max_tokens=0, echo=True, logprobs=20).choices[0]
    lp = alone.logprobs
    ok = (alone.finish_reason == "length" and len(lp.tokens) == len(ids) and lp.token_logprobs[0] is None
          and lp.top_logprobs[0] is None and all(x <= 0 for x in lp.token_logprobs[1:])
          and lp.text_offset == sorted(lp.text_offset))
    check(f"{name}/echo-alone", ok, f"{len(lp.tokens)} prompt tokens, the first without a logprob")
    # n choices of one prompt: one score request (its prompt tokens counted
    # once), the same logprobs in each choice, then each its own sample.
    tokens_before = H.metric(H.http(server.base, "GET", "/metrics", None, auth())[2],
                             "llmc:prompt_tokens_total")
    three = c.completions.create(model=model, prompt=ids, max_tokens=0, echo=True, logprobs=20,
                                 n=3).choices
    scored = H.metric(H.http(server.base, "GET", "/metrics", None, auth())[2],
                      "llmc:prompt_tokens_total") - tokens_before
    same = [x.logprobs.token_logprobs == lp.token_logprobs and x.logprobs.top_logprobs ==
            lp.top_logprobs and x.text == alone.text for x in three]
    check(f"{name}/echo-n3", len(three) == 3 and all(same) and scored == len(ids),
          f"{sum(same)}/3 choices with the prompt's logprobs; {scored:.0f} prompt tokens admitted "
          f"(want {len(ids)}: one score)")
    sampled = c.completions.create(model=model, prompt=ids, max_tokens=4, echo=True, logprobs=2, n=2,
                                   temperature=1.0, seed=7,
                                   extra_body={"ignore_eos": True}).choices
    check(f"{name}/echo-n2-sampled", len(sampled) == 2 and all(
        x.logprobs.token_logprobs[:len(ids)] == lp.token_logprobs and
        x.finish_reason == "length" and len(x.logprobs.tokens) == len(ids) + 4 for x in sampled),
          f"{[x.text[len(alone.text):] for x in sampled]!r}")
    # vLLM's prompt_logprobs: the same scores beside a generation, the
    # prompt token and its N best at each position, ranked.
    status, _, body = H.http(server.base, "POST", "/v1/completions",
                             {"model": model, "prompt": ids, "max_tokens": 3, "temperature": 0,
                              "prompt_logprobs": 3}, auth())
    plp = body["choices"][0].get("prompt_logprobs") if status == 200 else None
    def position_ok(i):
        d = plp[i]
        own = d.get(str(ids[i]))
        top = sorted((e for e in d.values() if e["rank"] is not None), key=lambda e: e["rank"])
        return (own is not None and abs(own["logprob"] - lp.token_logprobs[i]) < 1e-6
                and [e["rank"] for e in top] == [1, 2, 3] and len(d) <= 4
                and all(a["logprob"] >= b["logprob"] for a, b in zip(top, top[1:]))
                # The echo's best are keyed by text, where byte tokens
                # collide ("\ufffd"): its max is at most the true best.
                and top[0]["logprob"] >= max(lp.top_logprobs[i].values()) - 1e-6)
    ok = (plp is not None and len(plp) == len(ids) and plp[0] is None
          and all(position_ok(i) for i in range(1, len(ids)))
          and body["choices"][0]["text"] != "" and body["usage"]["completion_tokens"] == 3)
    check(f"{name}/prompt-logprobs", ok, f"{status}: {len(plp) if plp else None} positions, the "
          f"echo's scores, 3 ranked best each, then {body['choices'][0]['text'] if status == 200 else body!r}")
    # A chat's one prompt (its template applied): beside the choices.
    status, _, body = H.http(server.base, "POST", "/v1/chat/completions",
                             {"model": model, "messages": [{"role": "user", "content": prompt}],
                              "max_tokens": 2, "prompt_logprobs": 2, "n": 2}, auth())
    chat_plp = body.get("prompt_logprobs") if status == 200 else None
    check(f"{name}/prompt-logprobs-chat", chat_plp is not None and chat_plp[0] is None and
          len(chat_plp) == body["usage"]["prompt_tokens"] and len(body["choices"]) == 2 and
          all(2 <= len(d) <= 3 for d in chat_plp[1:]),
          f"{status}: {len(chat_plp) if chat_plp else None} positions of "
          f"{body.get('usage', {}).get('prompt_tokens')} prompt tokens")
    status, _, body = H.http(server.base, "POST", "/v1/completions",
                             {"model": model, "prompt": ids, "prompt_logprobs": 1, "stream": True},
                             auth())
    check(f"{name}/prompt-logprobs-stream", status == 400 and
          body.get("error", {}).get("param") == "prompt_logprobs", f"{status} {body}")
    # The last prompt position's row, scored (its 20 best) and generated
    # from (a greedy step's 20 best): the same distribution.
    gen = c.completions.create(model=model, prompt=ids[:-1], max_tokens=1, temperature=0,
                               logprobs=20).choices[0].logprobs.top_logprobs[0]
    scored = lp.top_logprobs[-1]
    common = set(gen) & set(scored)
    worst = max((abs(gen[k] - scored[k]) for k in common), default=1.0)
    # The prompt's last token, when among the generation's 20 best: its
    # scored logprob is the generation's for it.
    last = lp.tokens[-1]
    own = abs(gen[last] - lp.token_logprobs[-1]) < 1e-5 if last in gen else name == "synth"
    check(f"{name}/echo-vs-generation", len(common) >= (10 if name == "synth" else 20) and worst < 1e-5
          and own, f"{len(common)} common tokens of the top 20, worst difference {worst:.1e}; the last "
          f"prompt token {last!r} {'in' if last in gen else 'not in'} the generation's 20 best")
    # echo with output: the prompt's text, then the greedy output's.
    plain = c.completions.create(model=model, prompt=prompt, max_tokens=5, temperature=0, logprobs=1).choices[0]
    both = c.completions.create(model=model, prompt=prompt, max_tokens=5, temperature=0, logprobs=1,
                                echo=True).choices[0]
    ok = (both.text == prompt + plain.text and both.logprobs.tokens[-5:] == plain.logprobs.tokens
          and all(abs(a - b) < 1e-6 for a, b in zip(both.logprobs.token_logprobs[-5:],
                                                     plain.logprobs.token_logprobs)))
    check(f"{name}/echo+output", ok, f"{both.text!r}")
    text, finish, _, _ = stream_text(
        c.completions.create(model=model, prompt=prompt, max_tokens=5, temperature=0, echo=True,
                             stream=True), chat=False)
    check(f"{name}/echo-stream", text == both.text and finish == both.finish_reason, f"{text!r}")


def check(name, ok, detail=""):
    RESULTS.append((name, bool(ok)))
    detail = " ".join(str(detail).split())
    print(f"{'PASS' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}", flush=True)
    return ok


def client(server, key=KEY):
    return openai.OpenAI(base_url=server.base + "/v1", api_key=key, max_retries=0, timeout=120)


def stream_text(stream, chat):
    text, finish, usage, chunks = "", None, None, 0
    for ch in stream:
        chunks += 1
        if ch.usage is not None:
            usage = ch.usage
        for c in ch.choices:
            piece = c.delta.content if chat else c.text
            text += piece or ""
            finish = c.finish_reason or finish
    return text, finish, usage, chunks


def case_api(server, name):
    c = client(server)
    model = c.models.list().data[0].id
    check(f"{name}/models", model, f"model id {model!r}")
    prompt = "The capital of France is"
    whole = c.completions.create(model=model, prompt=prompt, max_tokens=12, temperature=0)
    ch = whole.choices[0]
    check(f"{name}/completion", ch.finish_reason in ("length", "stop") and
          0 < whole.usage.completion_tokens <= 12 and whole.usage.prompt_tokens > 0 and
          whole.usage.total_tokens == whole.usage.prompt_tokens + whole.usage.completion_tokens,
          f"{ch.text!r} finish={ch.finish_reason} usage={whole.usage}")
    text, finish, usage, chunks = stream_text(
        c.completions.create(model=model, prompt=prompt, max_tokens=12, temperature=0, stream=True,
                             stream_options={"include_usage": True}), chat=False)
    check(f"{name}/completion-stream", text == ch.text and finish == ch.finish_reason and usage
          and usage.completion_tokens == whole.usage.completion_tokens and chunks >= 2,
          f"{chunks} chunks, same text and usage as the whole answer: {text == ch.text}")
    msgs = [{"role": "user", "content": "What is the capital of France?"}]
    chat = c.chat.completions.create(model=model, messages=msgs, max_tokens=12, temperature=0)
    check(f"{name}/chat", chat.choices[0].message.role == "assistant" and chat.usage.total_tokens
          == chat.usage.prompt_tokens + chat.usage.completion_tokens,
          f"{chat.choices[0].message.content!r} finish={chat.choices[0].finish_reason}")
    text, finish, usage, _ = stream_text(
        c.chat.completions.create(model=model, messages=msgs, max_tokens=12, temperature=0,
                                  stream=True, stream_options={"include_usage": True}), chat=True)
    check(f"{name}/chat-stream", text == chat.choices[0].message.content and usage and
          usage.completion_tokens == chat.usage.completion_tokens, f"{text!r}")
    # n=2 with a seed: two different samples, and the same two again.
    a = c.completions.create(model=model, prompt=prompt, max_tokens=16, temperature=1.0, n=2, seed=7)
    b = c.completions.create(model=model, prompt=prompt, max_tokens=16, temperature=1.0, n=2, seed=7)
    ta = [x.text for x in sorted(a.choices, key=lambda x: x.index)]
    tb = [x.text for x in sorted(b.choices, key=lambda x: x.index)]
    check(f"{name}/n=2+seed", len(ta) == 2 and ta == tb and ta[0] != ta[1],
          f"choices {ta!r}, repeated with the same seed")
    d = c.completions.create(model=model, prompt=prompt, max_tokens=16, temperature=1.0, seed=8)
    check(f"{name}/seed-differs", d.choices[0].text != ta[0], "seed 8 samples differently from seed 7")
    # stop: cut a greedy answer before a string from its middle.
    long = c.completions.create(model=model, prompt=prompt, max_tokens=24, temperature=0,
                                extra_body={"ignore_eos": True}).choices[0].text
    stop = long[len(long) // 2:len(long) // 2 + 2]
    cut = long.index(stop)
    s = c.completions.create(model=model, prompt=prompt, max_tokens=24, temperature=0, stop=[stop, "@@"],
                             extra_body={"ignore_eos": True}).choices[0]
    check(f"{name}/stop", s.text == long[:cut] and s.finish_reason == "stop",
          f"stop {stop!r}: {s.text!r} finish={s.finish_reason}")
    # logprobs: completions (top 3) and chat (top 2).
    lp = c.completions.create(model=model, prompt=prompt, max_tokens=6, temperature=0, logprobs=3).choices[0]
    ok = len(lp.logprobs.tokens) == 6 and all(
        x <= 0 for x in lp.logprobs.token_logprobs) and all(
        # Distinct tokens can share a printed piece (byte tokens): >= 1 then.
        len(t) >= (1 if name == "synth" else 3) and max(t.values()) <= lp.logprobs.token_logprobs[i]
        for i, t in enumerate(lp.logprobs.top_logprobs))
    check(f"{name}/logprobs", ok, f"tokens {lp.logprobs.tokens}, greedy token has the top logprob")
    cl = c.chat.completions.create(model=model, messages=msgs, max_tokens=4, temperature=0,
                                   logprobs=True, top_logprobs=2).choices[0]
    ok = len(cl.logprobs.content) == 4 and all(
        len(t.top_logprobs) == 2 and t.top_logprobs[0].logprob == t.logprob for t in cl.logprobs.content)
    check(f"{name}/chat-logprobs", ok, f"{[t.token for t in cl.logprobs.content]}")
    check_echo(c, model, name, prompt, server)
    # tokenize / detokenize round trip; metrics.
    st, _, tok = H.http(server.base, "POST", "/tokenize", {"prompt": prompt}, auth())
    st2, _, det = H.http(server.base, "POST", "/detokenize", {"tokens": tok["tokens"]}, auth())
    check(f"{name}/tokenize", st == 200 and st2 == 200 and det["prompt"].endswith(prompt),
          f"{tok['count']} tokens -> {det['prompt']!r}")
    st, _, text = H.http(server.base, "GET", "/metrics", None, auth())
    names = ["llmc:num_requests_running", "llmc:kv_cache_usage_perc", "llmc:prefix_cache_hit_rate",
             "llmc:num_preemptions_total", "llmc:prompt_tokens_total", "llmc:generation_tokens_total",
             "llmc:time_to_first_token_seconds_bucket", "llmc:inter_token_latency_seconds_bucket",
             "llmc:e2e_request_latency_seconds_bucket", "llmc:num_requests_waiting"]
    missing = [n for n in names if n not in text]
    check(f"{name}/metrics", st == 200 and not missing and H.metric(text, "llmc:generation_tokens_total") > 0,
          f"missing {missing}" if missing else "every metric present, tokens counted")


def auth(key=KEY):
    return {"Authorization": f"Bearer {key}"}


def cli_text(cmd):
    # Raw bytes, as the server's JSON has them: invalid UTF-8 (a random
    # model's byte tokens) replaced by U+FFFD per byte.
    r = subprocess.run(cmd, capture_output=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr[-2000:]!r}")
    return r.stdout.decode("utf-8", errors="replace")


def case_greedy(exe, server, art, name, prompts):
    c = client(server)
    for p in prompts:
        http_text = c.completions.create(model="", prompt=p, max_tokens=24, temperature=0,
                                         extra_body={"ignore_eos": True}).choices[0].text
        out = cli_text([exe, "run", art, "-p", p, "--greedy", "-n", "24", "--ignore-eos",
                        "--no-stats", "--threads", "2"])
        cli = out[len(p):-1] if out.startswith(p) and out.endswith("\n") else None
        check(f"{name}/greedy-vs-run {p[:20]!r}", http_text == cli, f"http {http_text!r} run {cli!r}")
    msg = prompts[0]
    http_chat = c.chat.completions.create(model="", messages=[{"role": "user", "content": msg}],
                                          max_tokens=24, temperature=0).choices[0].message.content
    out = cli_text([exe, "run", art, "-p", msg, "--chat", "--greedy", "-n", "24", "--no-stats",
                    "--threads", "2"] + (["--chat-template", "chatml"] if "synth" in name else []))
    check(f"{name}/greedy-chat-vs-run", http_chat + "\n" == out, f"http {http_chat!r} run {out!r}")


def expect_error(name, status, _headers, body, want_status, want_text):
    err = body.get("error", {}) if isinstance(body, dict) else {}
    msg = err.get("message", "")
    ok = status == want_status and want_text.lower() in (msg + " " + str(err.get("param"))).lower()
    check(f"errors/{name}", ok, f"{status} {msg!r} param={err.get('param')!r}")


def oversized_answer(send):
    """(status, headers, body) of a request whose body is over the limit: the
    server's answer, or a 413 when it cut the connection while the body was
    still on its way (a reset or a broken pipe: it answered, then closed
    without reading the rest). Any other failure (a timeout, a refused
    connection, a malformed answer) is no answer at all: status None, and the
    check fails with the error named."""
    try:
        return send()
    except Exception as e:
        # urllib wraps errors while sending in URLError; those while reading
        # the answer (http.client.RemoteDisconnected is a reset) come bare.
        cause = e.reason if isinstance(e, urllib.error.URLError) else e
        if isinstance(cause, (ConnectionResetError, BrokenPipeError)):
            return 413, {}, {"error": {"message": f"(the server cut the body off: "
                                                  f"{type(cause).__name__}) body"}}
        return None, {}, {"error": {"message": f"no answer: {type(cause).__name__}: {cause}"}}


def case_errors(server):
    b = server.base
    post = lambda body, hdrs=None, path="/v1/completions": H.http(
        b, "POST", path, body, auth() if hdrs is None else hdrs)
    expect_error("malformed-json", *post(b'{"prompt": "hi", '), 400, "not valid JSON")
    expect_error("wrong-type", *post({"prompt": "hi", "temperature": "hot"}), 400, "temperature")
    expect_error("out-of-range", *post({"prompt": "hi", "top_p": 1.5}), 400, "top_p")
    expect_error("n-range", *post({"prompt": "hi", "n": 0}), 400, "'n'")
    expect_error("missing-prompt", *post({"max_tokens": 3}), 400, "prompt")
    expect_error("bad-message", *post({"messages": [{"role": "robot", "content": "x"}]},
                                      path="/v1/chat/completions"), 400, "messages[0].role")
    expect_error("invalid-utf8", *post(b'{"prompt": "\xff\xfe bad"}'), 400, "UTF-8")
    expect_error("unknown-model", *post({"model": "gpt-17", "prompt": "hi"}), 404, "gpt-17")
    expect_error("no-api-key", *post({"prompt": "hi"}, {}), 401, "API key")
    expect_error("wrong-api-key", *post({"prompt": "hi"}, auth("nope")), 401, "API key")
    st, _, _ = H.http(b, "GET", "/health")
    check("errors/health-needs-no-key", st == 200, f"/health without a key: {st}")
    expect_error("unknown-endpoint", *H.http(b, "GET", "/v1/nothing", None, auth()), 404, "/v1/nothing")
    expect_error("wrong-method", *H.http(b, "GET", "/v1/completions", None, auth()), 405, "POST")
    expect_error("too-long-prompt", *post({"prompt": [5] * 3000, "max_tokens": 4}), 400, "context length")
    big = b'{"prompt": "' + b"a" * (9 << 20) + b'"}'
    expect_error("oversized-body", *oversized_answer(lambda: post(big)), 413, "body")
    # The same limit seen from the headers alone: the answer must be a 413
    # read back, before any of the body is sent (a crash is no answer).
    raw = H.raw_exchange(server.port, b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
                         b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n"
                         % len(big))
    check("errors/oversized-body-declared", raw.startswith(b"HTTP/1.1 413") and b"body" in raw,
          raw[:80].decode(errors="replace"))
    raw = H.raw_exchange(server.port, b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"h" * 20000 +
                         b"\r\n\r\n")
    check("errors/oversized-headers", raw.startswith(b"HTTP/1.1 431"), raw[:60].decode(errors="replace"))
    raw = H.raw_exchange(server.port, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
                         b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    check("errors/pipelined", raw.count(b"HTTP/1.1 200 OK") == 2, f"{raw.count(b'HTTP/1.1 200 OK')} "
          "answers to two pipelined requests")
    raw = H.raw_exchange(server.port, b"NOT HTTP AT ALL\r\n\r\n")
    check("errors/garbage", raw.startswith(b"HTTP/1.1 400"), raw[:60].decode(errors="replace"))
    st, _, _ = H.http(b, "GET", "/health")
    check("errors/still-up", st == 200 and server.proc.poll() is None, "the server is still serving")


def case_slow(server, read_timeout):
    s = socket.create_connection(("127.0.0.1", server.port), timeout=read_timeout + 10)
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Le")
    t0 = time.time()
    try:
        data = s.recv(100)
    except socket.timeout:
        data = None
    took = time.time() - t0
    s.close()
    check("slow/headers-never-finish", data == b"" and read_timeout - 0.5 <= took <= read_timeout + 5,
          f"closed after {took:.1f} s (--read-timeout {read_timeout})")


def sse_request(port, body, key=KEY, cut_after=None, timeout=120):
    """Streams a completion over a raw socket. With `cut_after` events read,
    the client goes away: it half-closes (the server takes the end of its
    request stream for a disconnect) and reads what the server had sent
    before it saw that, up to the close. Returns (text, finish, events):
    the text up to the cut; finish "cut", or "cut after X" where the
    request had finished with X when the client went away; every event
    read, those after the cut too."""
    data = json.dumps(dict(body, stream=True)).encode()
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Authorization: Bearer " + key.encode() + b"\r\nContent-Length: " +
              str(len(data)).encode() + b"\r\n\r\n" + data)
    buf, events, text, finish, cut = b"", 0, "", None, False
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
            while b"\n\n" in buf:
                ev, buf = buf.split(b"\n\n", 1)
                line = ev.split(b"data: ", 1)[-1]
                if line.strip() == b"[DONE]":
                    if cut:
                        break
                    return text, finish, events
                if b"{" not in line:
                    continue
                j = json.loads(line[line.index(b"{"):].decode())
                for ch in j.get("choices", []):
                    if not cut:
                        text += ch.get("text") or ""
                    finish = ch.get("finish_reason") or finish
                events += 1
                if not cut and cut_after is not None and events >= cut_after:
                    # Whether the request still ran when its client went
                    # away is the server's to say, not the client's clock: a
                    # client thread starved of the GIL for a second found
                    # its 400 tokens done (CI, 1 in about 12 runs).
                    cut = True  # finish: set where this event was the last
                    s.shutdown(socket.SHUT_WR)
    finally:
        s.close()
    if cut:
        return text, f"cut after {finish}" if finish else "cut", events
    return text, f"{finish} without [DONE]", events


def finished_counts(server):
    """llmc:request_success_total by finished_reason, from /metrics."""
    _, _, m = H.http(server.base, "GET", "/metrics", None, auth())
    counts = {}
    for line in m.splitlines():
        if line.startswith("llmc:request_success_total{") and 'finished_reason="' in line:
            reason = line.split('finished_reason="', 1)[1].split('"', 1)[0]
            counts[reason] = counts.get(reason, 0) + float(line.rsplit(" ", 1)[1])
    return counts


def idle(server):
    """Whether the server runs and queues nothing (/metrics)."""
    _, _, text = H.http(server.base, "GET", "/metrics", None, auth())
    return (H.metric(text, "llmc:num_requests_running") == 0 and
            H.metric(text, "llmc:num_requests_waiting") == 0)


def case_cancel(server, rng):
    # What earlier cases left running (a slow sanitized server may still be
    # generating for them) must not finish during this case's count.
    idle_before = H.wait_until(lambda: idle(server), 60)
    before = finished_counts(server)
    prompts = [[rng.randrange(2, 300) for _ in range(rng.randint(4, 60))] for _ in range(10)]
    body = lambda p, n: {"prompt": p, "max_tokens": n, "temperature": 0, "ignore_eos": True}
    alone = [sse_request(server.port, body(p, 40))[0] for p in prompts]
    results = [None] * 60
    def worker(i):
        if i < 10:
            results[i] = sse_request(server.port, body(prompts[i], 40))
        else:
            p = [rng.randrange(2, 300) for _ in range(rng.randint(4, 200))]
            # Long, so that most are cut while they run; one that ends
            # first is seen to (the server flushes what it had queued before
            # it closes on the hang-up, and one the engine ends while the
            # abort is on its way counts as aborted).
            b, cut_after = body(p, 1800), rng.randint(1, 30)
            # A third echo their prompt with its logprobs (a score request
            # first).
            if i % 3 == 0:
                b = dict(b, echo=True, logprobs=2)
            results[i] = sse_request(server.port, b, cut_after=cut_after)
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(60)]
    order = list(range(60))
    rng.shuffle(order)
    for i in order:
        threads[i].start()
    for t in threads:
        t.join(180)
    same = [results[i] is not None and results[i][0] == alone[i] and results[i][1] == "length"
            for i in range(10)]
    check("cancel/others-unaffected", all(same), f"{sum(same)}/10 full streams equal to alone")
    cut = sum(1 for r in results[10:] if r and r[1].startswith("cut"))
    # Cut requests that had finished when their client went away (it read
    # the finish after its cut).
    done_first = sum(1 for r in results[10:] if r and r[1] == "cut after length")
    def freed():
        _, _, text = H.http(server.base, "GET", "/metrics", None, auth())
        return (H.metric(text, "llmc:num_requests_running") == 0 and
                H.metric(text, "llmc:kv_cache_usage_perc") == 0 and text)
    text = H.wait_until(freed, 10)
    check("cancel/blocks-freed", bool(text) and cut == 50,
          f"{cut} clients disconnected; running and KV usage back to 0")
    # Every disconnected client's request ends aborted, and only the 20
    # uncut ones (10 alone, 10 beside the others) by length, with those cut
    # after the server finished them. Before the wait for an idle server, a
    # request of an earlier case still running under the sanitized server
    # finished by length during this count (1 to 7 in 2 of 4 CI runs), and
    # an echo choice cancelled while its prompt was scored went uncounted.
    # The engine's gauges fall before a connection's strand counts the
    # abort it was sent: wait for the count to settle (a wrong one stays).
    want = {"length": 20 + done_first, "abort": 50 - done_first}
    want = {k: v for k, v in want.items() if v}
    def settled():
        after = finished_counts(server)
        delta = {k: after.get(k, 0) - before.get(k, 0) for k in set(after) | set(before)}
        return {k: v for k, v in delta.items() if v}
    H.wait_until(lambda: settled() == want, 5)
    delta = settled()
    check("cancel/finish-reasons", bool(idle_before) and delta == want,
          f"finished during the case: {delta} (want {want}: {done_first} of the 50 cut "
          "had finished when their client went away)")


def case_overload(exe, art, work):
    with H.Server(exe, art, ["--threads", "1", "--max-seqs", "2", "--max-queue", "3",
                             "--api-key", KEY], work, "overload") as srv:
        statuses, retry = [], []
        lock = threading.Lock()
        # All 20 at once, each long enough (1000 tokens) that the first ones
        # cannot finish before the burst is in: with 60 tokens a fast run
        # answered all 20 one after another and refused none.
        start = threading.Barrier(20)
        def worker():
            start.wait()
            st, h, _ = H.http(srv.base, "POST", "/v1/completions",
                              {"prompt": [7] * 50, "max_tokens": 1000, "ignore_eos": True}, auth())
            with lock:
                statuses.append(st)
                if st == 429:
                    retry.append(h.get("Retry-After"))
        threads = [threading.Thread(target=worker) for _ in range(20)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        n429, n200 = statuses.count(429), statuses.count(200)
        # At least the queue (3) is answered; whether the engine has taken any
        # request into its step before the burst fills the queue depends on
        # timing (on a loaded CI machine, 2026-12-04: none yet, 3 answered).
        check("overload/429", n429 > 0 and n200 >= 3 and n429 + n200 == 20 and all(r == "1" for r in retry),
              f"{n200} answered, {n429} refused with 429 + Retry-After, none lost")


def case_drain(exe, art, work, rng):
    # Generous timeout: every request in flight finishes.
    srv = H.Server(exe, art, ["--threads", "1", "--api-key", KEY, "--shutdown-timeout", "60"], work,
                   "drain")
    results = [None] * 12
    def worker(i):
        results[i] = sse_request(srv.port, {"prompt": [rng.randrange(2, 300) for _ in range(20)],
                                            "max_tokens": 50, "temperature": 0, "ignore_eos": True})
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    H.wait_until(lambda: H.metric(H.http(srv.base, "GET", "/metrics", None, auth())[2],
                                  "llmc:num_requests_running") == 12, 20)
    srv.signal(signal.SIGTERM)
    time.sleep(0.3)
    try:
        socket.create_connection(("127.0.0.1", srv.port), timeout=2).close()
        refused = False
    except OSError:
        refused = True
    for t in threads:
        t.join(120)
    rc = srv.wait(60)
    if rc != 0:
        print(f"--- {srv.log_path}:\n{srv.tail(12000)}")
    srv.stop()
    done = sum(1 for r in results if r and r[1] == "length")
    check("drain/finishes-in-flight", done == 12 and rc == 0 and refused,
          f"{done}/12 finished after SIGTERM, new connections refused: {refused}, exit {rc}")
    # Short timeout: what is left is aborted, streams still end properly.
    # A cache for all 8 whole (no preemption: all stay running) and outputs
    # too long to finish in the 0.5 s.
    srv = H.Server(exe, art, ["--threads", "1", "--api-key", KEY, "--shutdown-timeout", "0.5",
                              "--kv-blocks", "1100"], work, "drain-abort")
    results = [None] * 8
    def worker2(i):
        results[i] = sse_request(srv.port, {"prompt": [rng.randrange(2, 300) for _ in range(20)],
                                            "max_tokens": 2000, "ignore_eos": True})
    threads = [threading.Thread(target=worker2, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    all_running = H.wait_until(lambda: H.metric(H.http(srv.base, "GET", "/metrics", None, auth())[2],
                                                "llmc:num_requests_running") == 8, 60)
    check("drain/all-8-running", all_running, "the 8 long requests run before SIGINT")
    t0 = time.time()
    srv.signal(signal.SIGINT)
    for t in threads:
        t.join(60)
    rc = srv.wait(60)
    if rc != 0:
        print(f"--- {srv.log_path}:\n{srv.tail(12000)}")
    took = time.time() - t0
    log = srv.tail()
    srv.stop()
    aborted = sum(1 for r in results if r and r[1] == "abort")
    ended = sum(1 for r in results if r and r[1] in ("abort", "length"))
    # The tiny model may finish a few streams inside the 0.5 s; every stream
    # must still end with a finish_reason and [DONE].
    check("drain/aborts-after-timeout", ended == 8 and aborted >= 1 and rc == 0 and took < 10,
          f"{aborted}/8 streams aborted, {ended - aborted} finished in time, all ended with "
          f"[DONE]; exit {rc} after {took:.1f} s")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--llmc", default=os.path.join(H.ROOT, "build", "bin", "llmc"))
    ap.add_argument("--server-exe", help="the llmc(-rt) that serves (default: --llmc's llmc-rt), "
                    "e.g. a sanitizer build's")
    ap.add_argument("-k", help="only cases whose name contains this")
    ap.add_argument("--keep", help="keep models, artifacts and logs in DIR")
    ap.add_argument("--no-smollm2", action="store_true", help="the synthetic model only")
    a = ap.parse_args()
    if openai is None:
        print("SKIPPED: the `openai` Python package is missing (scripts/setup installs it)")
        return 77
    if a.k and not any(a.k in c for c in CASES):
        print(f"FAIL: -k {a.k!r} matches no case (cases: {', '.join(CASES)})")
        return 1
    exe = a.server_exe or H.runtime_exe(a.llmc)
    work = a.keep or tempfile.mkdtemp(prefix="llmc-serve-")
    os.makedirs(work, exist_ok=True)
    rng = random.Random(11)
    want = lambda n: not a.k or a.k in n
    servers = []
    try:
        art = H.synthetic_artifact(a.llmc, work)
        read_timeout = 2
        srv = H.Server(exe, art, ["--threads", "2", "--api-key", KEY, "--chat-template", "chatml",
                                  "--read-timeout", str(read_timeout)], work, "synth")
        servers.append(srv)
        if want("api"):
            case_api(srv, "synth")
        if want("greedy"):
            case_greedy(exe, srv, art, "synth", ["hello world", "the quick brown fox jumps"])
        if want("errors"):
            case_errors(srv)
        if want("slow"):
            case_slow(srv, read_timeout)
        if want("cancel"):
            case_cancel(srv, rng)
        check("synth/server-survived", srv.proc.poll() is None, "the server never crashed")
        if want("overload"):
            case_overload(exe, art, work)
        if want("drain"):
            case_drain(exe, art, work, rng)
        if a.no_smollm2:
            print("SKIPPED smollm2: --no-smollm2")
        elif want("smollm2") or want("greedy"):
            if os.path.exists(H.SMOLLM2):
                sart = os.path.join(work, "smollm2.llmc")
                if not os.path.exists(os.path.join(sart, "manifest.json")):
                    H.run([a.llmc, "compile", H.SMOLLM2, "-o", sart])
                s2 = H.Server(exe, sart, ["--threads", "2", "--api-key", KEY], work, "smollm2")
                servers.append(s2)
                if want("api") or want("smollm2"):
                    case_api(s2, "smollm2")
                case_greedy(exe, s2, sart, "smollm2",
                            ["The capital of France is", "Once upon a time"])
            else:
                print(f"SKIPPED smollm2: {H.SMOLLM2} not found (scripts/fetch-model fetches it)")
    except Exception as e:  # a failure of the harness is a failure, with the logs
        check("harness", False, f"{type(e).__name__}: {e}")
        for s in servers:
            print(f"--- {s.log_path}:\n{s.tail()}")
    finally:
        for s in servers:
            rc = s.stop()
            if not check(f"{os.path.basename(s.log_path)}/clean-exit", rc == 0, f"exit {rc} on SIGTERM"):
                print(f"--- {s.log_path}:\n{s.tail(12000)}")
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    failed = [n for n, ok in RESULTS if not ok]
    print(f"{len(RESULTS) - len(failed)} passed, {len(failed)} failed" +
          (f": {', '.join(failed)}" if failed else ""))
    return 0 if RESULTS and not failed else 1


if __name__ == "__main__":
    sys.exit(main())
