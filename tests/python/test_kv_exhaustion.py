"""KV exhaustion (issue 11, item 4): a server whose KV cache (a small
--kv-cache-memory) holds about one long request at a time gets several long
greedy requests at once. The scheduler must preempt and recompute: every
request completes (finish "length", all its tokens), none waits forever
(each has a deadline), the greedy outputs equal the same requests run alone
on the same server, the pool shows preemptions, and every block returns."""
import json
import threading
import time

import pytest

from conftest import Ws, metrics, start_server, stop_server, wait_for

KV_BYTES = 8 << 20  # about 11 blocks of 16 tokens on SmolLM2-135M
CONCURRENT = 6
DEADLINE_S = 240.0

PROMPTS = [
    "Write a letter to a friend about the sea.",
    "Describe a walk through an old forest.",
    "Explain how bread is made, step by step.",
    "Tell the story of a small robot on Mars.",
    "Give advice to someone learning to cook.",
    "Describe the rooms of a large old house.",
]


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


def complete(srv, prompt, max_tokens, timeout):
    status, _, body = srv.request("POST", "/v1/completions", {
        "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True},
        timeout=timeout)
    assert status == 200, body[:300]
    choice = json.loads(body)["choices"][0]
    return choice["text"], choice["finish_reason"], json.loads(body)["usage"]["completion_tokens"]


@pytest.fixture(scope="module")
def small_kv_server(pagoda_bin, model_path, tmp_path_factory):
    log = tmp_path_factory.mktemp("serve-kv") / "server.log"
    srv = start_server_with(pagoda_bin, model_path, log, ["--kv-cache-memory", str(KV_BYTES)])
    yield srv
    stop_server(srv)


def test_more_long_requests_than_the_cache_holds(small_kv_server):
    srv = small_kv_server
    with Ws(srv) as ws:
        total_blocks, block_size = ws.hello["kv_blocks_total"], ws.hello["block_size"]
    capacity = total_blocks * block_size
    # One request alone needs ~60% of the pool; CONCURRENT of them need
    # ~3.6x what it holds, so requests are preempted and recomputed.
    max_tokens = int(capacity * 0.6) - 16
    assert max_tokens >= 32, f"the pool is too small for the test ({total_blocks} blocks)"
    assert CONCURRENT * (max_tokens + 10) > 2 * capacity

    alone = [complete(srv, p, max_tokens, DEADLINE_S) for p in PROMPTS[:CONCURRENT]]
    for text, finish, n in alone:
        assert finish == "length" and n == max_tokens
    preempted_before = metrics(srv).get("pagoda:num_preemptions_total", 0.0)

    results, errors = [None] * CONCURRENT, []

    def worker(i):
        try:
            results[i] = complete(srv, PROMPTS[i], max_tokens, DEADLINE_S)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(f"request {i}: {e!r}")

    started = time.monotonic()
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(CONCURRENT)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(DEADLINE_S + 10)
    hung = [i for i, t in enumerate(threads) if t.is_alive()]
    assert not hung, f"requests {hung} never finished within {DEADLINE_S} s"
    assert not errors, errors
    elapsed = time.monotonic() - started

    preemptions = metrics(srv).get("pagoda:num_preemptions_total", 0.0) - preempted_before
    assert preemptions > 0, "the pool was never exhausted: no preemption happened"
    for i, ((text, finish, n), (ref_text, _, _)) in enumerate(zip(results, alone)):
        assert finish == "length" and n == max_tokens, (i, finish, n)
        assert text == ref_text, (f"request {i}: the greedy output under preemption differs from the same "
                                  f"request alone\nalone:     {ref_text!r}\nconcurrent: {text!r}")
    wait_for(lambda: metrics(srv).get("pagoda:kv_blocks_used") == 0, timeout=30, what="every block back")
    m = metrics(srv)
    assert m.get("pagoda:num_requests_running") == 0 and m.get("pagoda:num_requests_waiting") == 0
    print(f"kv exhaustion: {total_blocks} blocks x {block_size}, {CONCURRENT} x {max_tokens} tokens, "
          f"{preemptions:.0f} preemptions, {elapsed:.1f} s")
