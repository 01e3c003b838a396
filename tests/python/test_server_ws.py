"""The /v1/ws protocol (docs/protocol.md) of `pagoda serve`, driven by the
`websockets` package: hello, greedy output against `pagoda generate`,
multiplexed requests with cancel (exactly one terminal frame per id), n
samples (cross-checked with the HTTP API on the same seed), logprobs, beam
search and the `kv` block-pool stream."""
import json

import pytest

from conftest import Ws, kv_blocks_used, sample_texts, wait_for
from test_server_openai import CHAT, PROMPT, cli_generate

GREEDY_TOKENS = 16


def reference(server, pagoda_bin, model_path, prompt, chat=False, max_tokens=GREEDY_TOKENS):
    return cli_generate(pagoda_bin, model_path, server.precision, prompt, max_tokens, chat)


def test_hello(server):
    with Ws(server) as ws:
        h = ws.hello
        assert h["v"] == 1
        assert h["model"]
        assert h["max_model_len"] > h["max_prompt_tokens"] > 0
        assert h["block_size"] > 0 and h["kv_blocks_total"] > 0
        assert h["max_requests_per_connection"] >= 1
        assert h["max_frame_bytes"] >= 1024


def test_greedy_prompt_equals_cli(server, pagoda_bin, model_path):
    ref = reference(server, pagoda_bin, model_path, PROMPT)
    with Ws(server) as ws:
        ws.generate("g", prompt=PROMPT, max_tokens=GREEDY_TOKENS, temperature=0)
        frames = ws.run(["g"])["g"]
    accepted = frames[0]
    assert accepted["type"] == "accepted" and accepted["id"] == "g", accepted
    assert accepted["n"] == 1 and accepted["beam_width"] == 0
    assert accepted["prompt_tokens"] == ref["usage"]["prompt_tokens"]
    done = frames[-1]
    assert done["type"] == "done", done
    assert sample_texts(frames) == [ref["samples"][0]["text"]]
    ids = [f["token_id"] for f in frames if f["type"] == "token" and "token_id" in f]
    assert ids == ref["samples"][0]["token_ids"]
    assert done["finish_reasons"] == [ref["samples"][0]["finish_reason"]]
    usage = done["usage"]
    assert usage["prompt_tokens"] == ref["usage"]["prompt_tokens"]
    assert usage["completion_tokens"] == ref["usage"]["completion_tokens"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert all("logprob" not in f for f in frames if f["type"] == "token")


def test_greedy_chat_equals_cli(server, pagoda_bin, model_path):
    ref = reference(server, pagoda_bin, model_path, CHAT, chat=True)
    with Ws(server) as ws:
        ws.generate("c", messages=[{"role": "user", "content": CHAT}],
                    max_tokens=GREEDY_TOKENS, temperature=0)
        frames = ws.run(["c"])["c"]
    assert frames[0]["prompt_tokens"] == ref["usage"]["prompt_tokens"]
    assert sample_texts(frames) == [ref["samples"][0]["text"]]
    assert frames[-1]["finish_reasons"] == [ref["samples"][0]["finish_reason"]]


def test_multiplexed_generate_and_cancel(server, pagoda_bin, model_path):
    """Three requests on one socket; one is cancelled after its first token.
    The others finish normally (the greedy one equals the CLI), every id gets
    exactly one terminal frame, and the blocks all come back."""
    ref = reference(server, pagoda_bin, model_path, PROMPT)
    cancelled = []

    with Ws(server) as ws:
        def on_frame(f):
            if f["type"] == "token" and f["id"] == "long" and not cancelled:
                ws.send({"type": "cancel", "id": "long"})
                cancelled.append(True)

        ws.generate("long", prompt="Write a long story about a dragon.", max_tokens=400,
                    temperature=0.8, seed=5, ignore_eos=True)
        ws.generate("greedy", prompt=PROMPT, max_tokens=GREEDY_TOKENS, temperature=0)
        ws.generate("sampled", prompt="Once upon a time", max_tokens=10, temperature=1.0, seed=9)
        out = ws.run(["long", "greedy", "sampled"], on_frame=on_frame)
    assert cancelled
    long_done = out["long"][-1]
    assert long_done["type"] == "done", long_done
    assert long_done["finish_reasons"] == ["abort"]
    assert long_done["usage"]["completion_tokens"] < 400
    assert sample_texts(out["greedy"]) == [ref["samples"][0]["text"]]
    assert out["greedy"][-1]["finish_reasons"] == [ref["samples"][0]["finish_reason"]]
    assert out["sampled"][-1]["type"] == "done"
    for rid, frames in out.items():
        assert frames[0]["type"] == "accepted", (rid, frames[0])
        assert sum(f["type"] in ("done", "error") for f in frames) == 1, rid
    wait_for(lambda: kv_blocks_used(server) == 0, timeout=20, what="KV blocks used back to 0")


def test_n2_matches_http_with_same_seed(server):
    params = dict(prompt=PROMPT, max_tokens=10, temperature=1.0, seed=21, n=2)
    with Ws(server) as ws:
        ws.generate("n2", **params)
        frames = ws.run(["n2"])["n2"]
    assert frames[0]["n"] == 2
    assert {f["index"] for f in frames if f["type"] == "token"} == {0, 1}
    done = frames[-1]
    assert len(done["finish_reasons"]) == 2
    status, _, body = server.request("POST", "/v1/completions", params)
    assert status == 200, body
    http_texts = {c["index"]: c["text"] for c in json.loads(body)["choices"]}
    assert sample_texts(frames, 2) == [http_texts[0], http_texts[1]]
    count = sum(1 for f in frames if f["type"] == "token" and "token_id" in f)
    assert done["usage"]["completion_tokens"] == count


def test_logprobs(server):
    with Ws(server) as ws:
        ws.generate("lp", prompt=PROMPT, max_tokens=6, temperature=0, logprobs=3)
        frames = ws.run(["lp"])["lp"]
    tokens = [f for f in frames if f["type"] == "token" and "token_id" in f]
    assert tokens
    for f in tokens:
        top = f["top_logprobs"]
        assert len(top) == 3
        assert [t["logprob"] for t in top] == sorted((t["logprob"] for t in top), reverse=True)
        assert top[0]["token_id"] == f["token_id"]  # greedy takes the best
        assert f["logprob"] == pytest.approx(top[0]["logprob"], abs=1e-4)
        assert f["logprob"] <= 1e-6
        assert isinstance(top[0]["text"], str)


def run_beams(ws, rid, **params):
    ws.generate(rid, **params)
    frames = ws.run([rid])[rid]
    if frames[0]["type"] == "error" or frames[-1]["type"] == "error":
        pytest.xfail(f"beam search not available: {frames[-1]}")
    return frames


def test_beam_search(server):
    with Ws(server) as ws:
        frames = run_beams(ws, "b", prompt=PROMPT, max_tokens=8, beam_width=2, n=2)
    assert frames[0]["type"] == "accepted" and frames[0]["beam_width"] == 2
    assert not [f for f in frames if f["type"] == "token"], "beam search streams no token frames"
    updates = [f for f in frames if f["type"] == "beams"]
    assert updates, "no beams frames"
    for u in updates:
        scores = [b["score"] for b in u["beams"]]
        assert scores == sorted(scores, reverse=True)
    done = frames[-1]
    assert done["type"] == "done"
    beams = done["beams"]
    assert len(beams) == 2 == len(done["finish_reasons"])
    assert [b["score"] for b in beams] == sorted((b["score"] for b in beams), reverse=True)
    for b, reason in zip(beams, done["finish_reasons"]):
        assert b["finished"] and b["finish_reason"] == reason
        assert 1 <= len(b["token_ids"]) <= 8
        assert b["score"] == pytest.approx(b["cumulative_logprob"] / len(b["token_ids"]), rel=1e-4)
        status, _, body = server.request("POST", "/detokenize", {"tokens": b["token_ids"]})
        assert status == 200 and json.loads(body)["prompt"] == b["text"]
    assert beams[0]["token_ids"] != beams[1]["token_ids"]


def test_beam_width_1_is_greedy(server, pagoda_bin, model_path):
    ref = reference(server, pagoda_bin, model_path, PROMPT, max_tokens=8)
    with Ws(server) as ws:
        frames = run_beams(ws, "b1", prompt=PROMPT, max_tokens=8, beam_width=1)
    assert frames[-1]["beams"][0]["token_ids"] == ref["samples"][0]["token_ids"]


def test_kv_stream_shows_shared_prompt_blocks(server):
    """While an n=3 request runs, a kv frame maps it (`mine`) to its blocks
    and its prompt blocks are shared by the 3 samples (ref > 1)."""
    prompt = "The history of the city of Paris, written for children, in ten chapters: " * 3
    seen = []
    with Ws(server) as ws:
        ws.send({"type": "kv_subscribe"})
        first = ws.recv()
        assert first["type"] == "kv" and first["seq"] == 0
        total = ws.hello["kv_blocks_total"]
        assert first["total"] == total
        assert first["used"] + first["free"] + first["cached"] == total
        assert len(first["state"]) == len(first["ref"]) == len(first["owners"]) == total
        assert set(first["state"]) <= set("ufc")

        def on_frame(f):
            if f["type"] == "kv":
                seen.append(f)
        ws.generate("kvreq", prompt=prompt, max_tokens=120, ignore_eos=True, temperature=1.0,
                    seed=1, n=3)
        ws.run(["kvreq"], on_frame=on_frame)
        ws.send({"type": "kv_unsubscribe"})
        ws.sync()
        assert not [f for f in ws.sync() if f["type"] == "kv"], "kv frames after kv_unsubscribe"
    seqs = [f["seq"] for f in seen]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    mine = [f for f in seen if "kvreq" in f.get("mine", {}).values()]
    assert mine, f"no kv frame showed the request ({len(seen)} kv frames)"
    shared = False
    for f in mine:
        rid = int(next(k for k, v in f["mine"].items() if v == "kvreq"))
        assert f["used"] + f["free"] + f["cached"] == f["total"]
        for s in (s for s in f["seqs"] if s["request"] == rid):
            for blk in s["table"]:
                assert f["state"][blk] == "u" and rid in f["owners"][blk]
                shared |= f["ref"][blk] > 1
    assert shared, "the 3 samples never shared a prompt block"


def test_duplicate_id_does_not_disturb(server):
    with Ws(server) as ws:
        ws.generate("d", prompt=PROMPT, max_tokens=24, ignore_eos=True, temperature=0)
        ws.generate("d", prompt=PROMPT, max_tokens=2)
        frames = []
        while True:
            f = ws.recv()
            frames.append(f)
            if f["type"] == "done":
                break
        dup = [f for f in frames if f["type"] == "error"]
        assert len(dup) == 1 and dup[0]["code"] == "duplicate_id" and dup[0]["id"] == "d"
        assert frames[-1]["usage"]["completion_tokens"] == 24
        assert not [f for f in ws.sync() if f.get("id") == "d"]
        # the id is free again after its terminal frame
        ws.generate("d", prompt=PROMPT, max_tokens=2, temperature=0)
        assert ws.run(["d"])["d"][-1]["type"] == "done"
