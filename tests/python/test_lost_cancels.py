"""Cancels are never lost (issue: 109 of 200 back-to-back generate + cancel
pairs used to run to max_tokens): hundreds of pairs on one /v1/ws socket,
and HTTP completions whose client disconnects right after sending, against
`pagoda serve` on the real model. None runs to max_tokens, every id gets
exactly one terminal frame, and every KV block returns."""
import json
import socket
import time

import pytest

from conftest import Ws, kv_blocks_used, metrics, start_server, stop_server, wait_for

PAIRS = 200
MAX_TOKENS = 64


@pytest.fixture(scope="module")
def roomy_server(pagoda_bin, model_path, tmp_path_factory):
    """A server whose per-connection and per-client caps admit every pair."""
    log = tmp_path_factory.mktemp("lost-cancels") / "serve.log"
    s = start_server(pagoda_bin, model_path, log,
                     extra_args=["--max-requests-per-connection", "1024",
                                 "--max-requests-per-client", "1024",
                                 "--max-waiting", "1024"])
    yield s
    stop_server(s)


def counter(server, name):
    return sum(v for k, v in metrics(server).items() if k.split("{")[0] == name)


def test_ws_generate_cancel_pairs_all_abort(roomy_server):
    tokens_before = counter(roomy_server, "pagoda:generation_tokens_total")
    with Ws(roomy_server) as ws:
        for i in range(PAIRS):
            ws.send({"type": "generate", "id": f"r{i}", "prompt": f"Count to {i}:",
                     "max_tokens": MAX_TOKENS, "temperature": 0, "ignore_eos": True})
            ws.send({"type": "cancel", "id": f"r{i}"})
        terminal = {}
        deadline = time.monotonic() + 240
        while len(terminal) < PAIRS and time.monotonic() < deadline:
            f = ws.recv(timeout=120)
            rid = f.get("id")
            if f["type"] == "done" or (f["type"] == "error" and f.get("terminal")):
                assert rid not in terminal, f"second terminal frame for {rid}: {f}"
                terminal[rid] = f
    assert len(terminal) == PAIRS, f"{PAIRS - len(terminal)} ids never ended"
    ran_out = [r for r, f in terminal.items() if f["type"] == "done" and "length" in f["finish_reasons"]]
    assert not ran_out, f"{len(ran_out)} cancelled requests ran to max_tokens: {ran_out[:5]}"
    aborted = [r for r, f in terminal.items() if f["type"] == "done" and f["finish_reasons"] == ["abort"]]
    errors = sum(1 for f in terminal.values() if f["type"] == "error")
    print(f"{len(aborted)} aborted, {errors} error frames of {PAIRS}")
    assert len(aborted) + errors == PAIRS
    wait_for(lambda: kv_blocks_used(roomy_server) == 0, timeout=60, what="KV blocks back")
    generated = counter(roomy_server, "pagoda:generation_tokens_total") - tokens_before
    assert generated < PAIRS * MAX_TOKENS / 4, f"{generated} tokens generated for cancelled requests"


def post_and_drop(server, stream: bool):
    body = json.dumps({"model": "m", "prompt": "Tell me a long story.", "max_tokens": MAX_TOKENS,
                       "temperature": 0, "ignore_eos": True, "stream": stream}).encode()
    head = (f"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode()
    with socket.create_connection((server.host, server.port), timeout=10) as s:
        s.sendall(head + body)
        s.shutdown(socket.SHUT_RDWR)  # gone before any answer


def test_http_immediate_disconnects_cancel(roomy_server):
    tokens_before = counter(roomy_server, "pagoda:generation_tokens_total")
    count = 100
    for i in range(count):
        post_and_drop(roomy_server, stream=i % 2 == 0)
    wait_for(lambda: counter(roomy_server, "pagoda:num_requests_running") == 0 and
             counter(roomy_server, "pagoda:num_requests_waiting") == 0 and
             kv_blocks_used(roomy_server) == 0, timeout=120, what="every request ended, blocks back")
    generated = counter(roomy_server, "pagoda:generation_tokens_total") - tokens_before
    assert generated < count * MAX_TOKENS / 4, f"{generated} tokens generated for dropped requests"
    assert roomy_server.alive()
