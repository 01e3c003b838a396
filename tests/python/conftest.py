"""Shared fixtures for the Python integration tests: the pagoda binary and the
default model (tools/dev exports PAGODA_BIN and PAGODA_MODEL), a running
`pagoda serve` (`server`, and `key_server` with an API key), and helpers for
/metrics and the /v1/ws protocol (Ws)."""
import http.client
import itertools
import json
import os
import pathlib
import re
import signal
import subprocess
import threading
import time
import urllib.parse

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"


@pytest.fixture(scope="session")
def pagoda_bin() -> str:
    path = os.environ.get("PAGODA_BIN", str(ROOT / "build" / "pagoda"))
    if not os.path.exists(path):
        pytest.skip(f"pagoda binary not found at {path} (build first)")
    return path


@pytest.fixture(scope="session")
def model_path() -> str:
    path = os.environ.get(
        "PAGODA_MODEL",
        os.path.expanduser("~/.cache/pagoda/models/SmolLM2-135M-Instruct.Q4_1.gguf"))
    if not os.path.exists(path):
        pytest.skip(f"default model not found at {path} (run tools/fetch-model)")
    return path


def run(args, stdin: str = "", check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(args, input=stdin.encode(), capture_output=True, timeout=120)
    if check and proc.returncode != 0:
        raise AssertionError(f"{args} exited {proc.returncode}: {proc.stderr.decode()}")
    return proc


# ---------------------------------------------------------------------------
# `pagoda serve` fixtures: one server process per test session, started on
# 127.0.0.1 with an ephemeral port and small CPU settings, shared by
# test_server_*.py. Teardown sends SIGTERM and requires a clean exit 0.


SERVE_LINE = re.compile(r"pagoda: serving .* on http://([^\s:/]+|\[[^\]]+\]):(\d+)")
START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 20.0
API_KEY = "test-key-0123456789"


def serve_flags(pagoda_bin: str) -> str:
    """The text of `pagoda serve --help` (to pass only flags it has)."""
    proc = subprocess.run([pagoda_bin, "serve", "--help"], capture_output=True, timeout=60)
    return proc.stdout.decode(errors="replace") + proc.stderr.decode(errors="replace")


def small_cpu_args(help_text: str) -> list:
    """Small CPU settings for the flags `pagoda serve` offers. The precision
    is `quantized` (fast on CPU); greedy comparisons with `pagoda generate`
    use the same precision (Server.precision)."""
    wanted = [("--backend", "cpu"), ("--precision", "quantized"),
              ("--kv-cache-memory", str(64 << 20)), ("--max-num-seqs", "16"),
              ("--max-num-batched-tokens", "256")]
    args = [x for flag, value in wanted
            if re.search(re.escape(flag) + r"\b", help_text) for x in (flag, value)]
    # PAGODA_TEST_SCHEDULING=lockstep runs every server without scheduling
    # ahead (outputs must be the same either way).
    if os.environ.get("PAGODA_TEST_SCHEDULING") == "lockstep" and "--no-async-scheduling" in help_text:
        args.append("--no-async-scheduling")
    return args


class Server:
    """A running `pagoda serve` process. base_url is http://127.0.0.1:PORT."""

    def __init__(self, proc, host, port, log_path, api_key, precision):
        self.proc = proc
        self.host = host
        self.port = port
        self.base_url = f"http://{host}:{port}"
        self.ws_url = f"ws://{host}:{port}/v1/ws"
        self.log_path = log_path
        self.api_key = api_key
        self.precision = precision

    def log(self) -> str:
        try:
            return pathlib.Path(self.log_path).read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def request(self, method: str, path: str, body=None, headers=None, timeout=60.0):
        """One HTTP request on a fresh connection -> (status, headers dict
        with lower-case names, body bytes). body: bytes, str, or a JSON-able
        object."""
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        try:
            hdrs = dict(headers or {})
            if body is not None and not isinstance(body, (bytes, str)):
                body = json.dumps(body)
                hdrs.setdefault("Content-Type", "application/json")
            if isinstance(body, str):
                body = body.encode()
            if self.api_key:
                hdrs.setdefault("Authorization", f"Bearer {self.api_key}")
            conn.request(method, path, body=body, headers=hdrs)
            resp = conn.getresponse()
            data = resp.read()
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data
        finally:
            conn.close()

    def alive(self) -> bool:
        return self.proc.poll() is None


def _pump(stream, lines: list, found: threading.Event, log):
    """Reads the server's stdout: records lines, mirrors them to the log."""
    for raw in iter(stream.readline, b""):
        line = raw.decode(errors="replace")
        log.write("[stdout] " + line)
        log.flush()
        lines.append(line)
        if SERVE_LINE.search(line):
            found.set()
    found.set()  # EOF: wake the waiter (it checks for the line itself)


def start_server(pagoda_bin, model_path, log_path, extra_args=(), api_key="", env=None):
    help_text = serve_flags(pagoda_bin)
    if "--web-root" not in help_text:
        pytest.skip("`pagoda serve` is not implemented in this build (no --web-root)")
    args = [pagoda_bin, "serve", model_path, "--host", "127.0.0.1", "--port", "0"]
    if "--web-root" in help_text:
        args += ["--web-root", str(ROOT / "web")]
    args += small_cpu_args(help_text)
    if api_key:
        args += ["--api-key", api_key]
    args += list(extra_args)
    precision = "quantized" if "--precision" in help_text else "exact"
    log = open(log_path, "w")
    log.write("$ " + " ".join(args) + "\n")
    log.flush()
    proc_env = dict(os.environ)
    proc_env.pop("PAGODA_API_KEY", None)
    proc_env.update(env or {})
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=log, env=proc_env)
    lines, found = [], threading.Event()
    threading.Thread(target=_pump, args=(proc.stdout, lines, found, log), daemon=True).start()
    found.wait(START_TIMEOUT_S)
    match = next((m for m in map(SERVE_LINE.search, lines) if m), None)
    if match is None:
        proc.kill()
        proc.wait()
        if "not implemented" in pathlib.Path(log_path).read_text():
            pytest.skip("`pagoda serve` is not implemented in this build")
        raise AssertionError(f"no serving line within {START_TIMEOUT_S} s; "
                             f"exit {proc.returncode}; log:\n{pathlib.Path(log_path).read_text()}")
    host = match.group(1).strip("[]")
    server = Server(proc, host, int(match.group(2)), log_path, api_key, precision)
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        try:
            if server.request("GET", "/health", timeout=10)[0] == 200:
                break
        except OSError:
            pass
        if time.monotonic() > deadline or not server.alive():
            stop_server(server, check=False)
            raise AssertionError(f"/health never answered 200; log:\n{server.log()}")
        time.sleep(0.2)
    return server


def stop_server(server: Server, check: bool = True):
    """SIGTERM, then the process must exit 0 within STOP_TIMEOUT_S."""
    if server.alive():
        server.proc.send_signal(signal.SIGTERM)
    try:
        code = server.proc.wait(STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        server.proc.kill()
        server.proc.wait()
        if check:
            raise AssertionError(f"no exit within {STOP_TIMEOUT_S} s of SIGTERM; log:\n{server.log()}")
        return
    if check:
        assert code == 0, f"exit code {code} after SIGTERM; log:\n{server.log()}"


@pytest.fixture(scope="session")
def server(pagoda_bin, model_path, tmp_path_factory):
    """A `pagoda serve` without an API key, shared by the whole session."""
    log_path = tmp_path_factory.mktemp("serve") / "server.log"
    srv = start_server(pagoda_bin, model_path, log_path)
    yield srv
    stop_server(srv)


@pytest.fixture(scope="session")
def key_server(pagoda_bin, model_path, tmp_path_factory):
    """A second `pagoda serve` that requires API_KEY (Server.request sends it
    unless told otherwise)."""
    log_path = tmp_path_factory.mktemp("serve-key") / "server.log"
    srv = start_server(pagoda_bin, model_path, log_path, api_key=API_KEY)
    yield srv
    stop_server(srv)


# ---------------------------------------------------------------------------
# /metrics helpers

METRIC_LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)")


def openai_client(server: Server, api_key: str = "unused"):
    """The official client on `server`'s /v1, no retries, 180 s timeout."""
    import httpx
    import openai
    return openai.OpenAI(base_url=server.base_url + "/v1", api_key=api_key, max_retries=0,
                         http_client=httpx.Client(timeout=180))


def served_model_id(server: Server) -> str:
    """The id /v1/models lists first."""
    status, _, body = server.request("GET", "/v1/models")
    assert status == 200, body
    return json.loads(body)["data"][0]["id"]


def parse_metrics(text: str) -> dict:
    """Prometheus text -> {name{labels}: float} plus, per bare name, the sum
    over its label sets ({name: float})."""
    out, sums = {}, {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = METRIC_LINE.match(line)
        if m:
            value = float(m.group(3))
            out[m.group(1) + (m.group(2) or "")] = value
            sums[m.group(1)] = sums.get(m.group(1), 0.0) + value
    for name, value in sums.items():
        out.setdefault(name, value)
    return out


def metric_where(values: dict, name: str, **labels) -> float:
    """The one sample of `name` (from parse_metrics) whose labels include
    every given label="value"."""
    want = [f'{k}="{v}"' for k, v in labels.items()]
    hits = [v for k, v in values.items() if k.startswith(name + "{") and all(w in k for w in want)]
    assert len(hits) == 1, (name, labels, sorted(k for k in values if k.startswith(name)))
    return hits[0]


def metrics(server: Server) -> dict:
    status, _, body = server.request("GET", "/metrics")
    assert status == 200, body[:500]
    return parse_metrics(body.decode())


def kv_blocks_used(server: Server) -> float:
    """The server's KV blocks in use, from /metrics."""
    values = metrics(server)
    for name in ("pagoda:kv_blocks_used", "pagoda:num_kv_blocks_used", "pagoda:gpu_cache_blocks_used"):
        if name in values:
            return values[name]
    keys = [k for k in values if "kv" in k and "block" in k and "used" in k]
    assert keys, f"no KV-blocks-used metric among {sorted(values)[:60]}"
    return values[keys[0]]


def wait_for(predicate, timeout: float = 15.0, interval: float = 0.1, what: str = "condition"):
    """Polls predicate() until true; fails with `what` after timeout seconds."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {what} (last: {last!r})")


def url_with_query(url: str, **params) -> str:
    return url + ("&" if "?" in url else "?") + urllib.parse.urlencode(params)


# ---------------------------------------------------------------------------
# /v1/ws helpers (docs/protocol.md): a blocking client over the `websockets`
# package's sync API, with a barrier (`sync`) that needs no sleeps: a cancel
# of an unused id is answered in order with `unknown_id`, so every frame the
# server produced for earlier client frames has arrived by then.


TERMINAL_ERROR_CODES = {"bad_request", "unknown_type", "too_many_requests", "prompt_too_long",
                        "not_ready", "shutting_down", "engine_error", "internal", "overloaded",
                        "engine_unavailable"}


class Ws:
    _sync_ids = itertools.count()

    def __init__(self, server, recv_hello=True, **kwargs):
        from websockets.sync.client import connect
        kwargs.setdefault("open_timeout", 30)
        kwargs.setdefault("max_size", None)
        kwargs.setdefault("compression", None)
        if server.api_key and "subprotocols" not in kwargs:
            kwargs["subprotocols"] = [f"bearer.{server.api_key}"]
        self.conn = connect(server.ws_url, **kwargs)
        self.hello = self.recv() if recv_hello else None
        if recv_hello:
            assert self.hello["type"] == "hello", self.hello

    def close(self):
        self.conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def send(self, frame):
        self.conn.send(frame if isinstance(frame, (str, bytes)) else json.dumps(frame))

    def recv(self, timeout: float = 180.0) -> dict:
        return json.loads(self.conn.recv(timeout))

    def generate(self, rid, **params):
        self.send({"type": "generate", "id": rid, **params})

    def sync(self, timeout: float = 180.0) -> list:
        """Frames received until the server has handled everything sent so far."""
        token = f"sync-{next(self._sync_ids)}"
        self.send({"type": "cancel", "id": token})
        frames = []
        while True:
            f = self.recv(timeout)
            if f.get("type") == "error" and f.get("id") == token:
                assert f["code"] == "unknown_id", f
                return frames
            frames.append(f)

    def run(self, ids, timeout: float = 300.0, on_frame=None) -> dict:
        """Reads until every id in `ids` has its terminal frame; returns
        {id: [frames]} (the last one terminal). on_frame(frame) sees every
        frame first (also other ids' and kv frames). Then checks, with a
        barrier, that no id got a second terminal frame or anything after it."""
        pending, out = set(ids), {i: [] for i in ids}
        deadline = time.monotonic() + timeout
        while pending:
            f = self.recv(max(1.0, deadline - time.monotonic()))
            if on_frame:
                on_frame(f)
            rid = f.get("id")
            if rid in out:
                assert rid in pending, f"frame after the terminal frame of {rid}: {f}"
                out[rid].append(f)
                if is_terminal(f):
                    pending.discard(rid)
        late = [f for f in self.sync() if f.get("id") in out]
        assert not late, f"frames after terminal frames: {late[:3]}"
        return out


def is_terminal(frame: dict) -> bool:
    return frame["type"] == "done" or (frame["type"] == "error" and frame["code"] in TERMINAL_ERROR_CODES)


def sample_texts(frames: list, n: int = 1) -> list:
    texts = [""] * n
    for f in frames:
        if f["type"] == "token":
            texts[f["index"]] += f["text"]
    return texts
