"""The OpenAI-compatible HTTP API of `pagoda serve`, driven by the official
`openai` Python package: completions and chat (streaming and not), n, stop,
logprobs, usage, seeds, and greedy output against `pagoda generate` (an
independent path: the offline CLI runs its own engine in another process).
Also /v1/models, /tokenize against the HF tokenizers goldens, /detokenize,
/metrics, and the API key."""
import functools
import json
import subprocess
from concurrent.futures import ThreadPoolExecutor

import httpx
import openai
import pytest

from conftest import API_KEY, DATA, Ws, kv_blocks_used, metrics, wait_for

PROMPT = "The capital of France is"
CHAT = "What is the capital of France? Answer in one sentence."
GREEDY_TOKENS = 20


def make_client(server, api_key="unused"):
    """An openai client. The explicit httpx client sidesteps openai 1.54's
    `proxies=` argument, which httpx >= 0.28 no longer takes."""
    return openai.OpenAI(base_url=server.base_url + "/v1", api_key=api_key, max_retries=0,
                         http_client=httpx.Client(timeout=180))


@pytest.fixture(scope="module")
def client(server):
    return make_client(server)


@pytest.fixture(scope="module")
def model_id(server):
    status, _, body = server.request("GET", "/v1/models")
    assert status == 200, body
    return json.loads(body)["data"][0]["id"]


@functools.lru_cache(maxsize=None)
def cli_generate(pagoda_bin, model_path, precision, prompt, max_tokens, chat=False, logprobs=0):
    """`pagoda generate --json` greedy: the reference for every greedy path."""
    args = [pagoda_bin, "generate", model_path, "--prompt", prompt, "--max-tokens", str(max_tokens),
            "--temperature", "0", "--precision", precision, "--backend", "cpu", "--json",
            "--kv-cache-memory", str(64 << 20)]
    if chat:
        args.append("--chat")
    if logprobs:
        args += ["--logprobs", str(logprobs)]
    proc = subprocess.run(args, capture_output=True, timeout=300)
    assert proc.returncode == 0, proc.stderr.decode()
    return json.loads(proc.stdout.decode().splitlines()[0])


def reference(server, pagoda_bin, model_path, prompt, max_tokens, chat=False):
    return cli_generate(pagoda_bin, model_path, server.precision, prompt, max_tokens, chat)


# ---------------------------------------------------------------- completions

def test_models_lists_the_served_model(server, client, model_id):
    models = client.models.list()
    ids = [m.id for m in models.data]
    assert ids == [model_id]
    assert model_id  # non-empty
    assert models.data[0].object == "model"
    assert client.models.retrieve(model_id).id == model_id
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("no-such-model")


def test_completion_greedy_equals_cli(server, client, model_id, pagoda_bin, model_path):
    ref = reference(server, pagoda_bin, model_path, PROMPT, GREEDY_TOKENS)
    out = client.completions.create(model=model_id, prompt=PROMPT, max_tokens=GREEDY_TOKENS,
                                    temperature=0)
    assert len(out.choices) == 1
    choice = out.choices[0]
    assert choice.text == ref["samples"][0]["text"]
    assert choice.finish_reason == ref["samples"][0]["finish_reason"]
    assert out.usage.prompt_tokens == ref["usage"]["prompt_tokens"]
    assert out.usage.completion_tokens == ref["usage"]["completion_tokens"]
    assert out.usage.total_tokens == out.usage.prompt_tokens + out.usage.completion_tokens
    assert out.object == "text_completion"
    assert out.model == model_id


def test_completion_stream_equals_non_stream(server, client, model_id, pagoda_bin, model_path):
    ref = reference(server, pagoda_bin, model_path, PROMPT, GREEDY_TOKENS)
    stream = client.completions.create(model=model_id, prompt=PROMPT, max_tokens=GREEDY_TOKENS,
                                       temperature=0, stream=True,
                                       stream_options={"include_usage": True})
    text, finish, usage, chunks = "", None, None, 0
    for chunk in stream:
        chunks += 1
        if chunk.usage is not None:
            usage = chunk.usage
        for c in chunk.choices:
            assert c.index == 0
            text += c.text
            finish = c.finish_reason or finish
    assert chunks >= 3, "a stream of one chunk is not streaming"
    assert text == ref["samples"][0]["text"]
    assert finish == ref["samples"][0]["finish_reason"]
    assert usage is not None, "include_usage: the last chunk carries usage"
    assert usage.prompt_tokens == ref["usage"]["prompt_tokens"]
    assert usage.completion_tokens == ref["usage"]["completion_tokens"]


def test_completion_stream_without_usage_option_has_no_usage(client, model_id):
    stream = client.completions.create(model=model_id, prompt=PROMPT, max_tokens=4,
                                       temperature=0, stream=True)
    assert all(chunk.usage is None for chunk in stream)


def test_completion_n2_seeded(client, model_id):
    out = client.completions.create(model=model_id, prompt=PROMPT, max_tokens=12, n=2,
                                    temperature=1.0, seed=7)
    assert sorted(c.index for c in out.choices) == [0, 1]
    assert all(c.finish_reason in ("stop", "length") for c in out.choices)
    again = client.completions.create(model=model_id, prompt=PROMPT, max_tokens=12, n=2,
                                      temperature=1.0, seed=7)
    by_index = lambda r: [c.text for c in sorted(r.choices, key=lambda c: c.index)]  # noqa: E731
    assert by_index(out) == by_index(again)
    assert out.usage.completion_tokens <= 24


def test_completion_n2_stream_has_both_indices(client, model_id):
    stream = client.completions.create(model=model_id, prompt=PROMPT, max_tokens=8, n=2,
                                       temperature=1.0, seed=11, stream=True)
    texts, finishes = {0: "", 1: ""}, {}
    for chunk in stream:
        for c in chunk.choices:
            texts[c.index] += c.text
            if c.finish_reason:
                finishes[c.index] = c.finish_reason
    assert set(finishes) == {0, 1}
    ref = client.completions.create(model=model_id, prompt=PROMPT, max_tokens=8, n=2,
                                    temperature=1.0, seed=11)
    assert texts == {c.index: c.text for c in ref.choices}


def test_seed_reproducible_and_seeds_differ(client, model_id):
    def run(seed):
        return client.completions.create(model=model_id, prompt=PROMPT, max_tokens=24,
                                         temperature=1.0, seed=seed).choices[0].text
    first = run(1234)
    assert run(1234) == first
    others = {run(s) for s in (1, 2, 3)}
    assert len(others | {first}) > 1, "four seeds, one text: the seed is ignored"


def test_completion_stop_string(server, client, model_id, pagoda_bin, model_path):
    greedy = reference(server, pagoda_bin, model_path, PROMPT, GREEDY_TOKENS)["samples"][0]["text"]
    k = len(greedy) // 2
    stop = greedy[k:k + 3]
    assert len(stop) == 3, f"greedy text too short to pick a stop string: {greedy!r}"
    out = client.completions.create(model=model_id, prompt=PROMPT, max_tokens=GREEDY_TOKENS,
                                    temperature=0, stop=[stop, "\u2603never"])
    assert out.choices[0].text == greedy[:greedy.find(stop)]
    assert out.choices[0].finish_reason == "stop"


def test_completion_logprobs(server, client, model_id, pagoda_bin, model_path):
    ref = cli_generate(pagoda_bin, model_path, server.precision, PROMPT, 8, False, 2)
    out = client.completions.create(model=model_id, prompt=PROMPT, max_tokens=8, temperature=0,
                                    logprobs=2)
    lp = out.choices[0].logprobs
    n = out.usage.completion_tokens
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == n
    assert "".join(lp.tokens) == out.choices[0].text
    assert len(lp.text_offset) == n
    assert lp.text_offset == sorted(lp.text_offset)
    for chosen, top in zip(lp.token_logprobs, lp.top_logprobs):
        assert chosen <= 1e-6
        assert 1 <= len(top) <= 3  # 2 candidates (+ the chosen token when outside them)
        # greedy: the chosen token is the most likely one
        assert chosen == pytest.approx(max(top.values()), abs=1e-4)
    assert lp.token_logprobs == pytest.approx(ref["samples"][0]["logprobs"], abs=2e-3)


def test_completion_prompt_token_ids_equal_text(client, model_id):
    """A prompt given as token ids runs exactly as its text ("Hello world" is
    [19556, 905] per HF tokenizers); batches of prompts are a clear 400."""
    by_text = client.completions.create(model=model_id, prompt="Hello world", max_tokens=6,
                                        temperature=0)
    by_ids = client.completions.create(model=model_id, prompt=[19556, 905], max_tokens=6,
                                       temperature=0)
    assert by_ids.choices[0].text == by_text.choices[0].text
    assert by_ids.usage.prompt_tokens == by_text.usage.prompt_tokens == 2
    with pytest.raises(openai.BadRequestError):
        client.completions.create(model=model_id, prompt=[PROMPT, "Once upon a time"],
                                  max_tokens=4, temperature=0)


def test_unknown_model_is_404(client):
    with pytest.raises(openai.NotFoundError):
        client.completions.create(model="no-such-model", prompt=PROMPT, max_tokens=2)


def test_vllm_extras_are_applied(client, model_id):
    """top_k=1 and min_p=1 leave only the most likely token, so sampling at
    temperature 1 must give the greedy text; ignore_eos + min_tokens give
    exactly max_tokens tokens; penalties are accepted."""
    greedy = client.completions.create(model=model_id, prompt=PROMPT, max_tokens=12,
                                       temperature=0).choices[0].text
    for extra in ({"top_k": 1}, {"min_p": 1.0}):
        out = client.completions.create(model=model_id, prompt=PROMPT, max_tokens=12,
                                        temperature=1.0, seed=99, extra_body=extra)
        assert out.choices[0].text == greedy, extra
    out = client.completions.create(model=model_id, prompt=PROMPT, max_tokens=12, temperature=0,
                                    extra_body={"ignore_eos": True, "min_tokens": 12})
    assert out.usage.completion_tokens == 12 and out.choices[0].finish_reason == "length"
    out = client.completions.create(model=model_id, prompt=PROMPT, max_tokens=12, temperature=0.8,
                                    seed=4, presence_penalty=0.5, frequency_penalty=0.5,
                                    extra_body={"repetition_penalty": 1.2, "top_p": 0.9})
    assert out.usage.completion_tokens >= 1


def test_http_beam_search_matches_ws(server, client, model_id):
    out = client.completions.create(model=model_id, prompt=PROMPT, max_tokens=8, n=2,
                                    extra_body={"use_beam_search": True})
    texts = [c.text for c in sorted(out.choices, key=lambda c: c.index)]
    with Ws(server) as ws:
        ws.generate("b", prompt=PROMPT, max_tokens=8, n=2, beam_width=2)
        done = ws.run(["b"])["b"][-1]
    assert done["type"] == "done", done
    assert texts == [b["text"] for b in done["beams"]]


def test_sse_wire_format(server):
    """The raw stream: text/event-stream, every event a JSON chunk, then
    `data: [DONE]` last."""
    status, headers, body = server.request("POST", "/v1/completions",
                                           {"prompt": PROMPT, "max_tokens": 4, "stream": True,
                                            "temperature": 0})
    assert status == 200
    assert headers["content-type"].startswith("text/event-stream")
    events = [e for e in body.decode().split("\n\n") if e.strip()]
    assert all(e.startswith("data: ") for e in events), events
    assert events[-1] == "data: [DONE]"
    chunks = [json.loads(e[len("data: "):]) for e in events[:-1]]
    assert all(c["object"] == "text_completion" for c in chunks)
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"


def test_bad_parameter_is_openai_400(client, model_id):
    with pytest.raises(openai.BadRequestError) as err:
        client.completions.create(model=model_id, prompt=PROMPT, max_tokens=4, temperature=-1)
    body = err.value.body
    assert isinstance(body, dict) and "message" in body, body
    assert "temperature" in body["message"]


# ---------------------------------------------------------------------- chat

def chat_messages(text=CHAT):
    return [{"role": "user", "content": text}]


def test_chat_greedy_equals_cli(server, client, model_id, pagoda_bin, model_path):
    ref = reference(server, pagoda_bin, model_path, CHAT, GREEDY_TOKENS, chat=True)
    out = client.chat.completions.create(model=model_id, messages=chat_messages(),
                                         max_tokens=GREEDY_TOKENS, temperature=0)
    assert out.object == "chat.completion"
    msg = out.choices[0].message
    assert msg.role == "assistant"
    assert msg.content == ref["samples"][0]["text"]
    assert out.choices[0].finish_reason == ref["samples"][0]["finish_reason"]
    assert out.usage.prompt_tokens == ref["usage"]["prompt_tokens"]
    assert out.usage.completion_tokens == ref["usage"]["completion_tokens"]


def test_chat_stream(server, client, model_id, pagoda_bin, model_path):
    ref = reference(server, pagoda_bin, model_path, CHAT, GREEDY_TOKENS, chat=True)
    stream = client.chat.completions.create(model=model_id, messages=chat_messages(),
                                            max_tokens=GREEDY_TOKENS, temperature=0, stream=True,
                                            stream_options={"include_usage": True})
    text, role, finish, usage = "", None, None, None
    for chunk in stream:
        assert chunk.object == "chat.completion.chunk"
        if chunk.usage is not None:
            usage = chunk.usage
        for c in chunk.choices:
            role = c.delta.role or role
            text += c.delta.content or ""
            finish = c.finish_reason or finish
    assert role == "assistant"
    assert text == ref["samples"][0]["text"]
    assert finish == ref["samples"][0]["finish_reason"]
    assert usage is not None and usage.completion_tokens == ref["usage"]["completion_tokens"]


def test_chat_n2(client, model_id):
    out = client.chat.completions.create(model=model_id, messages=chat_messages(), max_tokens=8,
                                         n=2, temperature=1.0, seed=3)
    assert sorted(c.index for c in out.choices) == [0, 1]
    assert all(isinstance(c.message.content, str) for c in out.choices)


def test_chat_logprobs_top_logprobs(client, model_id):
    out = client.chat.completions.create(model=model_id, messages=chat_messages(), max_tokens=6,
                                         temperature=0, logprobs=True, top_logprobs=3)
    content = out.choices[0].logprobs.content
    assert len(content) == out.usage.completion_tokens
    assert "".join(t.token for t in content) == out.choices[0].message.content
    for t in content:
        assert t.logprob <= 1e-6
        assert len(t.top_logprobs) == 3
        tops = [x.logprob for x in t.top_logprobs]
        assert tops == sorted(tops, reverse=True)
        assert t.logprob == pytest.approx(tops[0], abs=1e-4)  # greedy picks the best
        assert t.bytes is None or bytes(t.bytes).decode(errors="replace") is not None


def test_chat_stop(client, model_id):
    full = client.chat.completions.create(model=model_id, messages=chat_messages(),
                                          max_tokens=GREEDY_TOKENS, temperature=0)
    text = full.choices[0].message.content
    stop = text[len(text) // 2:len(text) // 2 + 3]
    assert len(stop) == 3, text
    out = client.chat.completions.create(model=model_id, messages=chat_messages(),
                                         max_tokens=GREEDY_TOKENS, temperature=0, stop=stop)
    assert out.choices[0].message.content == text[:text.find(stop)]
    assert out.choices[0].finish_reason == "stop"


def test_concurrent_greedy_requests_agree(client, model_id):
    """Continuous batching: the same greedy request four times at once, and
    next to other traffic, gives the same text as alone."""
    alone = client.completions.create(model=model_id, prompt=PROMPT, max_tokens=12,
                                      temperature=0).choices[0].text

    def one(i):
        prompt = PROMPT if i % 2 == 0 else f"Count to ten: {i}"
        return prompt, client.completions.create(model=model_id, prompt=prompt, max_tokens=12,
                                                 temperature=0).choices[0].text
    with ThreadPoolExecutor(6) as pool:
        results = list(pool.map(one, range(6)))
    assert all(text == alone for prompt, text in results if prompt == PROMPT)


# ------------------------------------------------------ tokenize / detokenize

def golden_lines(limit=150):
    """(text, HF ids without special tokens, HF decode of those ids) for the
    first corpus lines (tests/data/tokenizer, made by tools/gen-tokenizer-goldens.py)."""
    corpus = (DATA / "tokenizer" / "corpus.jsonl").read_text(encoding="utf-8").split("\n")
    golden = (DATA / "tokenizer" / "golden-smollm2.jsonl").read_text().split("\n")
    rows = [json.loads(x) for x in golden[1:] if x]
    out = []
    for line, row in zip(corpus, rows):
        if line:
            text = json.loads(line)
            out.append((text, row["ids"], row.get("decode", text)))
    return out[:limit]


def test_tokenize_matches_hf_tokenizers(server):
    checked = 0
    for text, ids, _ in golden_lines():
        status, _, body = server.request("POST", "/tokenize",
                                         {"prompt": text, "add_special_tokens": False})
        assert status == 200, body
        reply = json.loads(body)
        assert reply["tokens"] == ids, text
        assert reply["count"] == len(ids)
        checked += 1
    assert checked >= 50


def test_tokenize_known_ids_and_max_model_len(server):
    status, _, body = server.request("POST", "/tokenize", {"prompt": "Hello world"})
    assert status == 200, body
    reply = json.loads(body)
    assert reply["tokens"] == [19556, 905]
    assert reply.get("max_model_len", 1) > 0


def test_detokenize_matches_hf_decode(server):
    checked = 0
    for _, ids, decoded in golden_lines():
        if not ids:
            continue
        status, _, body = server.request("POST", "/detokenize", {"tokens": ids})
        assert status == 200, body
        assert json.loads(body)["prompt"] == decoded, ids
        checked += 1
    assert checked >= 50


def test_detokenize_bad_id_is_400(server):
    status, _, body = server.request("POST", "/detokenize", {"tokens": [10 ** 7]})
    assert status == 400, body
    assert "message" in json.loads(body)["error"]


# ------------------------------------------------------------------- metrics

def test_metrics_names_and_blocks_return(server, client, model_id):
    before = metrics(server)
    client.completions.create(model=model_id, prompt=PROMPT, max_tokens=6, temperature=0)
    after = metrics(server)
    names = {k.split("{")[0] for k in after}
    for needed in ("pagoda:num_requests_running", "pagoda:num_requests_waiting",
                   "pagoda:prompt_tokens_total", "pagoda:generation_tokens_total",
                   "pagoda:time_to_first_token_seconds_bucket",
                   "pagoda:inter_token_latency_seconds_bucket",
                   "pagoda:request_queue_time_seconds_bucket"):
        assert any(n.startswith(needed.rsplit("_bucket", 1)[0]) for n in names), \
            f"{needed} missing from {sorted(names)}"
    assert any("kv" in n or "cache" in n for n in names)
    assert any("preempt" in n for n in names)
    assert any("prefix" in n for n in names)
    # Every request is admitted before its first token: its queue time is counted and shorter.
    assert after["pagoda:request_queue_time_seconds_count"] == after["pagoda:time_to_first_token_seconds_count"]
    assert after["pagoda:request_queue_time_seconds_sum"] < after["pagoda:time_to_first_token_seconds_sum"]
    gen_before = before.get("pagoda:generation_tokens_total", 0.0)
    assert after["pagoda:generation_tokens_total"] >= gen_before + 6
    wait_for(lambda: kv_blocks_used(server) == 0, timeout=15, what="KV blocks used back to 0")
    status, headers, body = server.request("GET", "/metrics")
    assert headers.get("content-type", "").startswith("text/plain")


def test_health(server):
    status, _, _ = server.request("GET", "/health")
    assert status == 200


# ------------------------------------------------------------------- API key

def test_api_key_required(key_server):
    status, _, body = key_server.request("GET", "/v1/models", headers={"Authorization": "Bearer nope"})
    assert status == 401, body
    assert "error" in json.loads(body)
    no_auth = key_server.request("POST", "/v1/completions",
                                 {"prompt": "x", "max_tokens": 1},
                                 headers={"Authorization": ""})
    assert no_auth[0] == 401
    status, _, body = key_server.request("GET", "/v1/models")  # sends API_KEY
    assert status == 200, body
    # /health stays open (load balancers probe it without a key)
    assert key_server.request("GET", "/health", headers={"Authorization": ""})[0] == 200


def test_api_key_with_openai_client(key_server):
    bad = make_client(key_server, api_key="wrong")
    with pytest.raises(openai.AuthenticationError):
        bad.models.list()
    good = make_client(key_server, api_key=API_KEY)
    model_id = good.models.list().data[0].id
    out = good.completions.create(model=model_id, prompt=PROMPT, max_tokens=3, temperature=0)
    assert out.usage.completion_tokens >= 1
