"""The security review of the front end (issue 11, item 6), against a real
`pagoda serve`: one connection cannot grow the server's memory (endless
chunk-size line, trailers, header block), request smuggling shapes are
refused, JSON routes need application/json, Host and Origin are checked on
HTTP as well as on the WebSocket (DNS rebinding), CORS is answered only for
listed origins (never `*`, never with credentials), every route but /health
and the UI's files needs the key (/metrics too, unless --public-metrics), no
key reaches the log, request fields are capped, a non-streamed answer has a
size cap, each client has a cap on requests in flight, a full waiting queue
answers 429, the `kv` stream shows a client only its own requests, static
files cannot be escaped, and the UI carries its security headers."""
import json
import select
import socket
import threading
import time

import pytest
from websockets.exceptions import InvalidStatus

from conftest import (API_KEY, Ws, kv_blocks_used, start_server, stop_server, wait_for)

PROMPT = "The quick brown fox"


def start_server_with(pagoda_bin, model_path, log_path, args, **kw):
    """start_server with `args` replacing the fixture's small CPU settings of
    the same flags (CLI11 refuses a flag given twice)."""
    import conftest
    given = set(args[::2])
    original = conftest.small_cpu_args

    def without_given(help_text):
        base = original(help_text)
        return [x for i in range(0, len(base), 2) if base[i] not in given for x in base[i:i + 2]]
    conftest.small_cpu_args = without_given
    try:
        return start_server(pagoda_bin, model_path, log_path, extra_args=list(args), **kw)
    finally:
        conftest.small_cpu_args = original


def rss_kib(server) -> int:
    with open(f"/proc/{server.proc.pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def raw_exchange(server, data: bytes, timeout: float = 10.0) -> bytes:
    """Sends `data` on a fresh connection and reads until the server closes."""
    s = socket.create_connection((server.host, server.port), timeout=timeout)
    try:
        s.sendall(data)
        out = b""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                chunk = s.recv(65536)
            except (ConnectionResetError, socket.timeout):
                break
            if not chunk:
                break
            out += chunk
        return out
    finally:
        s.close()


def status_of(reply: bytes) -> int:
    assert reply.startswith(b"HTTP/1.1 "), reply[:200]
    return int(reply[9:12])


def flood(server, head: bytes, filler: bytes, limit_bytes: int = 256 << 20, limit_s: float = 20.0):
    """Sends `head`, then `filler` over and over until the server answers
    (or closes); returns (reply bytes, bytes sent, peak RSS growth in KiB)."""
    s = socket.create_connection((server.host, server.port), timeout=10)
    base = rss_kib(server)
    peak = 0
    sent = 0
    reply = b""
    try:
        s.sendall(head)
        deadline = time.monotonic() + limit_s
        while sent < limit_bytes and time.monotonic() < deadline:
            readable, _, _ = select.select([s], [], [], 0)
            if readable:
                break
            try:
                s.sendall(filler)
            except (BrokenPipeError, ConnectionResetError):
                break
            sent += len(filler)
            if sent % (len(filler) * 16) == 0:
                peak = max(peak, rss_kib(server) - base)
        s.settimeout(10)
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                reply += chunk
        except (ConnectionResetError, socket.timeout):
            pass
        peak = max(peak, rss_kib(server) - base)
        return reply, sent, peak
    finally:
        s.close()


# ------------------------------------------------------- bounded read buffer

POST_CHUNKED = (b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")


@pytest.mark.parametrize("what,head,filler", [
    ("chunk-size line", POST_CHUNKED + b"1;", b"a" * 65536),
    ("chunk extension after data", POST_CHUNKED + b"1\r\n{\r\n2;ext=", b"b" * 65536),
    ("trailer section", POST_CHUNKED + b"0\r\nX-Trailer: ", b"c" * 65536),
    ("header block", b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ", b"d" * 65536),
])
def test_endless_line_is_cut_and_memory_stays_bounded(server, what, head, filler):
    """The issue's attack (2.3 GB after 27 s from one socket before the fix):
    the server answers 431 within a small bound and closes; its RSS does not
    follow the bytes sent."""
    reply, sent, growth = flood(server, head, filler)
    assert status_of(reply) == 431, (what, reply[:300])
    assert b"header_too_large" in reply
    assert sent <= 4 << 20, f"{what}: the server read {sent} bytes before answering"
    assert growth < 16 * 1024, f"{what}: RSS grew {growth} KiB"
    assert server.request("GET", "/health")[0] == 200


# --------------------------------------------------------------- smuggling

@pytest.mark.parametrize("framing", [
    b"Transfer-Encoding: gzip\r\n",
    b"Transfer-Encoding: gzip, chunked\r\n",
    b"Transfer-Encoding: chunked, chunked\r\n",
    b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
    b"Transfer-Encoding: chunked\r\nContent-Length: 4\r\n",
    b"Content-Length: 4\r\nTransfer-Encoding: chunked\r\n",
    b"Content-Length: 4\r\nContent-Length: 5\r\n",
])
def test_request_smuggling_shapes_are_refused(server, framing):
    smuggled = b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    data = (b"POST /tokenize HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" + framing +
            b"\r\n0\r\n\r\n" + smuggled)
    reply = raw_exchange(server, data)
    assert status_of(reply) == 400, reply[:300]
    assert reply.count(b"HTTP/1.1 ") == 1, f"a second (smuggled) request was answered: {reply[:600]}"
    assert b"Connection: close" in reply or b"connection: close" in reply.lower()


# ----------------------------------------------- Content-Type, Host, Origin

def test_simple_cross_site_post_is_refused(server):
    """The issue's finding: text/plain with a foreign Origin generated text."""
    body = json.dumps({"prompt": PROMPT, "max_tokens": 2})
    status, _, reply = server.request("POST", "/v1/completions", body,
                                      headers={"Content-Type": "text/plain",
                                               "Origin": "http://evil.example"})
    assert status == 403 and json.loads(reply)["error"]["code"] == "origin_not_allowed"
    for ctype in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data", None):
        hdrs = {"Content-Type": ctype} if ctype else {}
        status, _, reply = server.request("POST", "/v1/completions", body, headers=hdrs)
        assert status == 415, (ctype, status, reply[:200])
        assert json.loads(reply)["error"]["code"] == "unsupported_media_type"
    for path in ("/tokenize", "/detokenize", "/v1/chat/completions"):
        status, _, _ = server.request("POST", path, "{}", headers={"Content-Type": "text/plain"})
        assert status == 415, path
    status, _, _ = server.request("POST", "/v1/completions", body,
                                  headers={"Content-Type": "application/json; charset=utf-8"})
    assert status == 200


def test_dns_rebinding_host_is_refused(server):
    """Host names the server does not serve get 403 on HTTP and on /v1/ws,
    even when Origin matches Host (what rebinding produces)."""
    evil = f"evil.example:{server.port}"
    for method, path, body in (("GET", "/v1/models", None), ("GET", "/", None),
                               ("POST", "/v1/completions", {"prompt": PROMPT, "max_tokens": 2})):
        status, _, reply = server.request(method, path, body,
                                          headers={"Host": evil, "Origin": f"http://{evil}"})
        assert status == 403, (path, status)
        assert json.loads(reply)["error"]["code"] == "host_not_allowed"
    with pytest.raises(InvalidStatus) as err:
        Ws(server, additional_headers={"Host": evil}, origin=f"http://{evil}")
    assert err.value.response.status_code == 403
    for host in (f"localhost:{server.port}", f"127.0.0.1:{server.port}", f"[::1]:{server.port}"):
        assert server.request("GET", "/v1/models", headers={"Host": host})[0] == 200, host


def test_http_origin_checked_like_websocket(server):
    ok = server.request("GET", "/v1/models", headers={"Origin": f"http://127.0.0.1:{server.port}"})
    assert ok[0] == 200
    assert "access-control-allow-origin" not in ok[1]  # same origin: no CORS needed
    bad = server.request("GET", "/v1/models", headers={"Origin": "http://evil.example"})
    assert bad[0] == 403
    assert "access-control-allow-origin" not in bad[1]


# --------------------------------------------------------- a policy server

@pytest.fixture(scope="module")
def policy_server(pagoda_bin, model_path, tmp_path_factory):
    log = tmp_path_factory.mktemp("serve-policy") / "server.log"
    srv = start_server(pagoda_bin, model_path, log, api_key=API_KEY, extra_args=[
        "--allowed-origin", "https://ui.example", "--allowed-host", "api.example",
        "--max-requests-per-client", "2", "--max-response-bytes", "20000", "--public-metrics"])
    yield srv
    stop_server(srv)


def test_cors_preflight_and_answers(policy_server):
    srv = policy_server
    status, headers, _ = srv.request("OPTIONS", "/v1/completions", headers={
        "Origin": "https://ui.example", "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, content-type", "Authorization": ""})
    assert status == 204
    assert headers["access-control-allow-origin"] == "https://ui.example"
    assert "POST" in headers["access-control-allow-methods"]
    assert "authorization" in headers["access-control-allow-headers"].lower()
    assert "access-control-allow-credentials" not in headers
    status, headers, _ = srv.request("OPTIONS", "/v1/completions", headers={
        "Origin": "http://evil.example", "Access-Control-Request-Method": "POST"})
    assert status == 403 and "access-control-allow-origin" not in headers
    status, headers, _ = srv.request("POST", "/v1/completions", {"prompt": PROMPT, "max_tokens": 2},
                                     headers={"Origin": "https://ui.example"})
    assert status == 200
    assert headers["access-control-allow-origin"] == "https://ui.example"
    assert headers.get("vary") == "Origin"
    assert all(v != "*" for v in headers.values())
    assert srv.request("GET", "/v1/models", headers={"Host": "api.example"})[0] == 200
    assert srv.request("GET", "/v1/models", headers={"Host": "other.example"})[0] == 403


# ------------------------------------------------------------------ API key

def test_api_key_on_every_route_but_health_and_ui(key_server, policy_server):
    routes = [("GET", "/v1/models", None), ("GET", "/v1/models/x", None), ("GET", "/metrics", None),
              ("POST", "/v1/completions", {"prompt": PROMPT, "max_tokens": 2}),
              ("POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]}),
              ("POST", "/tokenize", {"prompt": "hi"}), ("POST", "/detokenize", {"tokens": [1]})]
    for key in (None, "wrong", API_KEY[:-1], API_KEY + "x"):
        hdrs = {"Authorization": f"Bearer {key}" if key else ""}
        for method, path, body in routes:
            status, _, reply = key_server.request(method, path, body, headers=hdrs)
            assert status == 401, (key, path, status)
            assert json.loads(reply)["error"]["code"] == "invalid_api_key"
        assert key_server.request("GET", "/health", headers=hdrs)[0] == 200
        status, headers, _ = key_server.request("GET", "/", headers=hdrs)
        assert status == 200 and headers["content-type"].startswith("text/html")
    assert key_server.request("GET", "/metrics")[0] == 200  # with the key
    # --public-metrics: /metrics without the key, the API still needs it.
    assert policy_server.request("GET", "/metrics", headers={"Authorization": ""})[0] == 200
    assert policy_server.request("GET", "/v1/models", headers={"Authorization": ""})[0] == 401


def test_no_secret_in_the_log(key_server):
    wrong = "wrong-key-abcdef987654"
    key_server.request("GET", "/v1/models", headers={"Authorization": f"Bearer {wrong}"})
    key_server.request("GET", f"/v1/ws?api_key={wrong}")
    key_server.request("POST", "/v1/completions", {"prompt": PROMPT, "max_tokens": 2})
    with open(key_server.log_path) as f:
        log = f.read()
    server_lines = "\n".join(line for line in log.splitlines() if not line.startswith("$ "))
    assert API_KEY not in server_lines
    assert wrong not in server_lines


# --------------------------------------------------------------------- caps

@pytest.mark.parametrize("fields,param", [
    ({"stop": [f"s{i}" for i in range(17)]}, "stop"),
    ({"stop": ["x" * 257]}, "stop"),
    ({"stop": [f"s{i}" for i in range(40000)]}, "stop"),
    ({"stop_token_ids": list(range(65))}, "stop_token_ids"),
    ({"n": 17}, "n"),
    ({"n": 64, "best_of": 64}, "n"),
    ({"n": 2, "best_of": 3}, "best_of"),
    ({"use_beam_search": True, "beam_width": 11}, "beam_width"),
    ({"logprobs": 21}, "logprobs"),
    ({"max_tokens": 10 ** 6}, "prompt"),
])
def test_request_caps(server, fields, param):
    status, _, reply = server.request("POST", "/v1/completions", {"prompt": PROMPT, **fields})
    assert status == 400, (fields, reply[:200])
    assert json.loads(reply)["error"]["param"] == param


def test_chat_top_logprobs_cap(server):
    status, _, reply = server.request("POST", "/v1/chat/completions", {
        "messages": [{"role": "user", "content": "hi"}], "logprobs": True, "top_logprobs": 21})
    assert status == 400 and json.loads(reply)["error"]["param"] == "top_logprobs"


def test_ws_caps(server):
    with Ws(server) as ws:
        ws.generate("c1", prompt=PROMPT, stop=[f"s{i}" for i in range(17)])
        ws.generate("c2", prompt=PROMPT, n=17)
        ws.generate("c3", prompt=PROMPT, stop_token_ids=list(range(65)))
        frames = ws.run(["c1", "c2", "c3"], timeout=30)
    for rid in ("c1", "c2", "c3"):
        last = frames[rid][-1]
        assert last["type"] == "error" and last["code"] == "bad_request", last


def test_non_streamed_response_size_cap(policy_server):
    """n=4 with logprobs=5 over 64 tokens is far over 20000 bytes: a clear 400,
    the request is cancelled (its blocks return); streaming is not capped."""
    srv = policy_server
    status, _, reply = srv.request("POST", "/v1/completions", {
        "prompt": PROMPT, "n": 4, "logprobs": 5, "max_tokens": 64, "ignore_eos": True, "temperature": 1.0})
    assert status == 400, reply[:300]
    err = json.loads(reply)["error"]
    assert err["code"] == "response_too_large" and "stream" in err["message"]
    wait_for(lambda: kv_blocks_used(srv) == 0, timeout=30, what="blocks back after the refusal")
    status, _, reply = srv.request("POST", "/v1/completions", {
        "prompt": PROMPT, "max_tokens": 8, "temperature": 0})
    assert status == 200


def open_stream(srv, max_tokens=400):
    """Starts a streamed completion on a raw socket; returns the socket once
    the 200 header arrived (the request is in flight)."""
    body = json.dumps({"prompt": PROMPT, "max_tokens": max_tokens, "ignore_eos": True,
                       "stream": True, "temperature": 0}).encode()
    s = socket.create_connection((srv.host, srv.port), timeout=60)
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
              b"Authorization: Bearer " + srv.api_key.encode() + b"\r\n"
              b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    head = s.recv(4096)
    assert head.startswith(b"HTTP/1.1 200"), head[:200]
    return s


def test_per_client_cap_on_requests_in_flight(policy_server):
    """--max-requests-per-client 2: two streams in flight (two connections),
    a third request on HTTP or WebSocket is refused with 429 /
    too_many_requests; once one ends, a new one is served."""
    srv = policy_server
    a, b = open_stream(srv), open_stream(srv)
    try:
        status, headers, reply = srv.request("POST", "/v1/completions", {"prompt": PROMPT, "max_tokens": 2})
        assert status == 429, reply[:200]
        assert json.loads(reply)["error"]["code"] == "too_many_requests"
        with Ws(srv) as ws:
            ws.generate("third", prompt=PROMPT, max_tokens=2)
            last = ws.run(["third"], timeout=30)["third"][-1]
            assert last["type"] == "error" and last["code"] == "too_many_requests", last
    finally:
        a.close()
    wait_for(lambda: srv.request("POST", "/v1/completions", {"prompt": PROMPT, "max_tokens": 2})[0] == 200,
             timeout=30, what="a slot after a disconnect")
    b.close()
    wait_for(lambda: kv_blocks_used(srv) == 0, timeout=30, what="blocks back")


def test_full_waiting_queue_answers_429(pagoda_bin, model_path, tmp_path):
    """A server of its own with --max-num-seqs 1 and --max-waiting 1: one
    request runs, one waits, the next is 429 overloaded (HTTP) / overloaded
    (WebSocket); the first two still complete."""
    own = start_server_with(pagoda_bin, model_path, tmp_path / "server.log",
                            ["--max-num-seqs", "1", "--max-waiting", "1"])
    try:
        with Ws(own) as ws:
            ws.generate("run", prompt=PROMPT, max_tokens=300, ignore_eos=True, temperature=0)
            # Two requests sent back to back are tokenized concurrently by their
            # request actors, so the second can reach the scheduler first: wait
            # until "run" runs before sending the one that must wait.
            first = ws.recv()
            while not (first.get("id") == "run" and first["type"] == "token"):
                assert first["type"] == "accepted", first
                first = ws.recv()
            ws.generate("wait", prompt=PROMPT + " jumps", max_tokens=4, temperature=0)
            wait_for(lambda: metrics_waiting(own) >= 1, timeout=30, what="one waiting request")
            status, headers, reply = own.request("POST", "/v1/completions", {"prompt": PROMPT, "max_tokens": 2})
            assert status == 429 and json.loads(reply)["error"]["code"] == "overloaded", reply[:200]
            assert headers.get("retry-after") == "1"
            ws.generate("third", prompt=PROMPT, max_tokens=2)
            frames = ws.run(["run", "wait", "third"], timeout=120)
            assert frames["third"][-1]["code"] == "overloaded", frames["third"]
            assert frames["run"][-1]["type"] == "done" and frames["wait"][-1]["type"] == "done"
    finally:
        stop_server(own, check=False)


def metrics_waiting(srv) -> float:
    from conftest import metrics
    return metrics(srv).get("pagoda:num_requests_waiting", 0.0)


# ------------------------------------------------------------ kv privacy

def test_kv_stream_shows_only_own_requests(server):
    """Client B streams a long request; client A's kv frames show B's blocks
    only as anonymous 'u' (no ids, ref 0, no sequences), and A's own request
    with its ids."""
    with Ws(server) as a, Ws(server) as b:
        # Long enough for several kv frames (one per 250 ms at most) while both
        # run: at about 4 ms a step, 40 tokens once fit in a single interval.
        b.generate("theirs", prompt=PROMPT * 4, max_tokens=600, ignore_eos=True, temperature=0)
        assert b.recv()["type"] == "accepted"
        a.send({"type": "kv_subscribe"})
        a.generate("mine", prompt="Count to ten:", max_tokens=300, ignore_eos=True, temperature=0)
        seen = []
        a.run(["mine"], timeout=120, on_frame=lambda f: f["type"] == "kv" and seen.append(f))
        a.send({"type": "kv_unsubscribe"})
        a.sync()
        b.send({"type": "cancel", "id": "theirs"})
    both = [f for f in seen if f["mine"] and f["others"] > 0]
    assert both, f"no kv frame while both requests ran ({len(seen)} frames)"
    for f in both:
        my_ids = {int(k) for k in f["mine"]}
        assert {s["request"] for s in f["seqs"]} <= my_ids
        assert all(set(o) <= my_ids for o in f["owners"])
        mine_blocks = {blk for s in f["seqs"] for blk in s["table"]}
        anonymous = [i for i, c in enumerate(f["state"]) if c == "u" and i not in mine_blocks]
        assert anonymous, "the other client's blocks are not shown as in use"
        assert all(f["ref"][i] == 0 and f["owners"][i] == [] for i in anonymous)


# ------------------------------------------------------- static files & UI

@pytest.mark.parametrize("target", [
    "/../README.md", "/%2e%2e/README.md", "/%2E%2E%2FREADME.md", "/..%2fREADME.md",
    "/..%5cREADME.md", "/%5c..%5cREADME.md", "/.%2e/README.md", "/%2e%2e%2f%2e%2e%2fetc/passwd",
    "/..\\README.md", "/.git/config",
])
def test_static_traversal(server, target):
    status, _, body = server.request("GET", target)
    assert status in (400, 404), (target, status)
    assert b"Pagoda" not in body[:2000] or b"error" in body[:200]


def test_ui_security_headers(server):
    status, headers, body = server.request("GET", "/")
    assert status == 200
    csp = headers["content-security-policy"]
    for part in ("default-src 'self'", "script-src 'self'", "connect-src 'self' ws: wss:",
                 "frame-ancestors 'none'", "object-src 'none'"):
        assert part in csp, (part, csp)
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["x-frame-options"] == "DENY"
    # The UI obeys the CSP: no inline script, no inline handlers, no inline style.
    html = body.decode()
    import re
    assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", html), "inline <script> in index.html"
    assert not re.search(r"\son[a-z]+\s*=", html), "inline event handler in index.html"
    assert not re.search(r"<style\b|\sstyle\s*=", html), "inline style in index.html"
    for src in re.findall(r'(?:src|href)="([^"#:]+)"', html):
        assert server.request("GET", "/" + src.lstrip("./"))[0] == 200, src
    api = server.request("GET", "/v1/models")
    assert api[1]["x-content-type-options"] == "nosniff"
