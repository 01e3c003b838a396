"""Speculative decoding through `pagoda serve --speculative ngram`, driven by
the official `openai` client: a request that copies from its prompt gets the
same tokens with speculation (the server default) and without (the request's
`speculative: "off"`), greedy and seeded; usage reports the drafted tokens as
OpenAI's accepted/rejected prediction tokens; /metrics counts them; bad
`speculative` values and unsupported combinations are 400s; a chat answer
constrained by response_format (a JSON schema) is the same with speculation
as without, drafts are accepted, and it validates against its schema."""
import json

import jsonschema
import openai
import pytest

from conftest import openai_client, served_model_id, metric_where, metrics, start_server, stop_server

TEXT = ("def area(width, height):\n    return width * height\n\n"
        "def perimeter(width, height):\n    return 2 * (width + height)\n")
PROMPT = "Here is a file:\n" + TEXT + "\nThe same file again:\n" + TEXT[:40]


@pytest.fixture(scope="module")
def spec_server(pagoda_bin, model_path, tmp_path_factory):
    log_path = tmp_path_factory.mktemp("serve-spec") / "server.log"
    srv = start_server(pagoda_bin, model_path, log_path,
                       extra_args=["--speculative", "ngram", "--num-speculative-tokens", "5"])
    yield srv
    stop_server(srv)


@pytest.fixture(scope="module")
def client(spec_server):
    return openai_client(spec_server)


@pytest.fixture(scope="module")
def model(spec_server):
    return served_model_id(spec_server)


def complete(client, model, speculative=None, **kw):
    extra = {} if speculative is None else {"speculative": speculative}
    args = dict(model=model, prompt=PROMPT, max_tokens=48, logprobs=1)
    args.update(kw)
    return client.completions.create(extra_body=extra, **args)


@pytest.mark.parametrize("sampling", [dict(temperature=0), dict(temperature=0.9, top_p=0.95, seed=11)])
def test_same_tokens_with_and_without_speculation(client, model, spec_server, sampling):
    before = metrics(spec_server)
    spec = complete(client, model, **sampling)
    plain = complete(client, model, speculative="off", **sampling)
    assert spec.choices[0].text == plain.choices[0].text
    assert spec.choices[0].logprobs.tokens == plain.choices[0].logprobs.tokens
    assert spec.choices[0].finish_reason == plain.choices[0].finish_reason
    details = spec.usage.completion_tokens_details
    assert details is not None, spec.usage
    assert details.accepted_prediction_tokens + details.rejected_prediction_tokens > 0
    if sampling["temperature"] == 0:  # greedy copies the file; a seeded run may stray and cool down
        assert details.accepted_prediction_tokens > 0
    assert plain.usage.completion_tokens_details is None
    after = metrics(spec_server)

    def grew(name, proposer):
        return metric_where(after, name, proposer=proposer) - metric_where(before, name, proposer=proposer)
    drafted = grew("pagoda:spec_decode_num_draft_tokens_total", "ngram")
    accepted = grew("pagoda:spec_decode_num_accepted_tokens_total", "ngram")
    assert drafted == details.accepted_prediction_tokens + details.rejected_prediction_tokens
    assert accepted == details.accepted_prediction_tokens
    assert grew("pagoda:spec_decode_num_draft_tokens_total", "draft") == 0
    rate = metric_where(after, "pagoda:spec_decode_draft_acceptance_rate", proposer="ngram")
    assert rate == pytest.approx(
        metric_where(after, "pagoda:spec_decode_num_accepted_tokens_total", proposer="ngram")
        / metric_where(after, "pagoda:spec_decode_num_draft_tokens_total", proposer="ngram"))


def test_streamed_usage_reports_the_drafts(client, model):
    stream = client.completions.create(model=model, prompt=PROMPT, max_tokens=32, temperature=0,
                                       stream=True, stream_options={"include_usage": True},
                                       extra_body={"speculative": {"method": "ngram",
                                                                   "num_speculative_tokens": 3}})
    chunks = list(stream)
    text = "".join(c.choices[0].text for c in chunks if c.choices)
    usage = chunks[-1].usage
    assert usage.completion_tokens == 32
    assert usage.completion_tokens_details.accepted_prediction_tokens > 0
    plain = complete(client, model, speculative="off", temperature=0, max_tokens=32)
    assert text == plain.choices[0].text


@pytest.mark.parametrize("body, words", [
    ({"speculative": "drafty"}, "speculative.method"),
    ({"speculative": "draft"}, "draft model"),  # this server has none
    ({"speculative": {"method": "ngram", "num_speculative_tokens": 0}}, "num_speculative_tokens"),
    ({"speculative": {"method": "ngram", "prompt_lookup_min": 3, "prompt_lookup_max": 2}}, "prompt_lookup_max"),
    ({"speculative": {"method": "ngram", "k": 2}}, "unknown field"),
    ({"speculative": 5}, "speculative"),
    ({"speculative": "ngram", "n": 2}, "n = 1"),
    ({"speculative": "ngram", "repetition_penalty": 1.2}, "penalties"),
])
def test_bad_speculative_values_are_400(client, model, body, words):
    with pytest.raises(openai.BadRequestError) as err:
        client.completions.create(model=model, prompt="Hi", max_tokens=4, extra_body=body)
    assert words in str(err.value)


def test_unsupported_requests_run_without_speculation_by_default(client, model, spec_server):
    before = metrics(spec_server)["pagoda:spec_decode_num_draft_tokens_total"]
    r = client.completions.create(model=model, prompt=PROMPT, max_tokens=8, n=2, temperature=0.8, seed=3)
    assert len(r.choices) == 2
    assert metrics(spec_server)["pagoda:spec_decode_num_draft_tokens_total"] == before


RECORD = {"name": "Ada Lovelace", "born": 1815, "role": "admin", "city": "London",
          "tags": ["math", "engines"]}
RECORD_SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "born": {"type": "integer"},
                   "role": {"enum": ["admin", "user"]}, "city": {"type": "string"},
                   "tags": {"type": "array", "items": {"type": "string"}}},
    "required": ["name", "born", "role", "city", "tags"],
}


@pytest.mark.parametrize("sampling", [dict(temperature=0), dict(temperature=0.8, seed=5)])
def test_response_format_is_the_same_with_speculation(client, model, sampling):
    doc = json.dumps(RECORD)
    args = dict(model=model, max_tokens=96, logprobs=True,
                messages=[{"role": "user", "content": "Repeat this JSON exactly: " + doc + "\nAgain: " + doc}],
                response_format={"type": "json_schema",
                                 "json_schema": {"name": "record", "schema": RECORD_SCHEMA, "strict": True}},
                **sampling)
    spec = client.chat.completions.create(**args)
    plain = client.chat.completions.create(extra_body={"speculative": "off"}, **args)
    assert spec.choices[0].message.content == plain.choices[0].message.content
    assert ([t.token for t in spec.choices[0].logprobs.content]
            == [t.token for t in plain.choices[0].logprobs.content])
    assert spec.choices[0].finish_reason == plain.choices[0].finish_reason == "stop"
    jsonschema.validate(json.loads(spec.choices[0].message.content), RECORD_SCHEMA)
    assert spec.usage.completion_tokens_details.accepted_prediction_tokens > 0
