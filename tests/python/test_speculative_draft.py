"""Draft-model speculative decoding through `pagoda serve --speculative
draft:MODEL` (issue 24 item 1b), driven by the official `openai` client. The
draft is the served model's own file (the only real model CI has), so every
greedy draft is accepted: the same tokens with speculation (the server
default) and without (`speculative: "off"`), greedy and seeded; usage and
/metrics count the drafts; a request may still choose "ngram". A draft with
another vocabulary is refused at startup naming both files ("draft" on a
server without a draft model is a 400: test_speculative.py)."""
import subprocess

import pytest

from conftest import openai_client, served_model_id, ROOT, metric_where, metrics, start_server, stop_server

PROMPT = "Write a short story about a lighthouse keeper and a storm."


@pytest.fixture(scope="module")
def draft_server(pagoda_bin, model_path, tmp_path_factory):
    log_path = tmp_path_factory.mktemp("serve-draft") / "server.log"
    srv = start_server(pagoda_bin, model_path, log_path,
                       extra_args=["--speculative", "draft:" + model_path, "--num-speculative-tokens", "4"])
    yield srv
    stop_server(srv)


@pytest.fixture(scope="module")
def client(draft_server):
    return openai_client(draft_server)


@pytest.fixture(scope="module")
def model(draft_server):
    return served_model_id(draft_server)


def complete(client, model, speculative=None, **kw):
    extra = {"ignore_eos": True} if speculative is None else {"speculative": speculative, "ignore_eos": True}
    args = dict(model=model, prompt=PROMPT, max_tokens=40, logprobs=1)
    args.update(kw)
    return client.completions.create(extra_body=extra, **args)


@pytest.mark.parametrize("sampling", [dict(temperature=0), dict(temperature=0.9, top_p=0.95, seed=5)])
def test_same_tokens_with_and_without_the_draft_model(client, model, draft_server, sampling):
    before = metrics(draft_server)
    spec = complete(client, model, **sampling)
    plain = complete(client, model, speculative="off", **sampling)
    assert spec.choices[0].text == plain.choices[0].text
    assert spec.choices[0].logprobs.tokens == plain.choices[0].logprobs.tokens
    details = spec.usage.completion_tokens_details
    assert details is not None, spec.usage
    assert details.accepted_prediction_tokens > 0
    if sampling["temperature"] == 0:  # the draft is the target: its argmax is the target's
        assert details.rejected_prediction_tokens == 0
    after = metrics(draft_server)

    def grew(name, proposer):
        return metric_where(after, name, proposer=proposer) - metric_where(before, name, proposer=proposer)
    drafted = grew("pagoda:spec_decode_num_draft_tokens_total", "draft")
    assert drafted == details.accepted_prediction_tokens + details.rejected_prediction_tokens
    assert grew("pagoda:spec_decode_num_accepted_tokens_total", "draft") == details.accepted_prediction_tokens
    assert grew("pagoda:spec_decode_num_draft_tokens_total", "ngram") == 0


def test_a_request_may_choose_ngram_or_draft_explicitly(client, model):
    plain = complete(client, model, speculative="off", temperature=0)
    for method in ("ngram", "draft", {"method": "draft", "num_speculative_tokens": 2}):
        r = complete(client, model, speculative=method, temperature=0)
        assert r.choices[0].text == plain.choices[0].text, method


def test_a_draft_with_another_vocabulary_is_refused(pagoda_bin, model_path):
    tiny = str(ROOT / "tests" / "data" / "logits" / "moe-gguf" / "tiny-mixtral-f32.gguf")
    proc = subprocess.run([pagoda_bin, "serve", model_path, "--backend", "cpu", "--port", "0",
                           "--speculative", "draft:" + tiny], capture_output=True, timeout=120)
    assert proc.returncode != 0
    err = proc.stderr.decode()
    assert "different vocabularies" in err and tiny in err and model_path in err, err

