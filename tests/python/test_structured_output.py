"""Structured output through the official `openai` client and /v1/ws
(issue 23): response_format json_object / json_schema on chat and
completions, vLLM's structured_outputs (json, regex, choice, grammar,
json_object) and guided_* fields, logit_bias, 400s naming the problem, and a
property test: every constrained output of the real model, greedy and
sampled with n > 1, parses and validates against its schema (`jsonschema`)."""
import json
import re

import jsonschema
import openai
import pytest

from conftest import Ws
from test_server_openai import make_client

SCHEMAS = {
    "nested": {"type": "object", "properties": {
        "user": {"type": "object", "properties": {
            "name": {"type": "string", "maxLength": 16},
            "id": {"type": "integer", "minimum": 0, "maximum": 99999}},
            "required": ["name", "id"], "additionalProperties": False},
        "active": {"type": "boolean"}},
        "required": ["user", "active"], "additionalProperties": False},
    "enums": {"type": "object", "properties": {
        "color": {"enum": ["red", "green", "blue"]},
        "size": {"type": "string", "enum": ["S", "M", "L"]}},
        "required": ["color", "size"], "additionalProperties": False},
    "bounded_array": {"type": "object", "properties": {
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 10},
                 "minItems": 1, "maxItems": 3}},
        "required": ["tags"], "additionalProperties": False},
    "any_of": {"type": "object", "properties": {
        "value": {"anyOf": [{"type": "integer", "minimum": -999, "maximum": 999},
                            {"type": "string", "maxLength": 8}, {"type": "null"}]}},
        "required": ["value"], "additionalProperties": False},
    "pattern": {"type": "object", "properties": {
        "code": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{2}$"},
        "n": {"type": "integer", "minimum": 1, "maximum": 9}},
        "required": ["code", "n"], "additionalProperties": False},
}

PROMPT = "Answer with a JSON object describing something you like."


@pytest.fixture(scope="module")
def client(server):
    return make_client(server)


def check_choices(choices, schema):
    for c in choices:
        text = c.message.content if hasattr(c, "message") else c.text
        assert c.finish_reason == "stop", (c.finish_reason, text)
        doc = json.loads(text)
        jsonschema.validate(doc, schema)


@pytest.mark.parametrize("name", sorted(SCHEMAS))
@pytest.mark.parametrize("temperature,n", [(0.0, 1), (1.0, 3)])
def test_schema_property_chat(client, name, temperature, n):
    schema = SCHEMAS[name]
    r = client.chat.completions.create(
        model="", messages=[{"role": "user", "content": PROMPT}], max_tokens=160,
        temperature=temperature, n=n, seed=11,
        response_format={"type": "json_schema",
                         "json_schema": {"name": name, "schema": schema, "strict": True}})
    assert len(r.choices) == n
    check_choices(r.choices, schema)


@pytest.mark.parametrize("name", ["nested", "any_of"])
def test_schema_property_completions_vllm_forms(client, name):
    schema = SCHEMAS[name]
    for body in ({"structured_outputs": {"json": schema}}, {"guided_json": json.dumps(schema)},
                 {"response_format": {"type": "json_schema",
                                      "json_schema": {"name": name, "schema": schema}}}):
        r = client.completions.create(model="", prompt="A JSON record:", max_tokens=160,
                                      temperature=1.0, n=2, seed=5, extra_body=body)
        check_choices(r.choices, schema)


def test_json_object(client):
    r = client.chat.completions.create(
        model="", messages=[{"role": "user", "content": PROMPT}], max_tokens=120, temperature=0,
        response_format={"type": "json_object"})
    if r.choices[0].finish_reason == "stop":
        assert isinstance(json.loads(r.choices[0].message.content), dict)
    else:  # an unbounded object may run out of tokens: it is still a JSON prefix
        assert r.choices[0].finish_reason == "length"
        assert r.choices[0].message.content.startswith("{")
    r = client.completions.create(model="", prompt="JSON:", max_tokens=60, temperature=0,
                                  extra_body={"structured_outputs": {"json_object": True}})
    assert r.choices[0].text.startswith("{")


def test_choice_regex_grammar(client):
    choices = ["alpha", "beta gamma", "delta"]
    for body in ({"structured_outputs": {"choice": choices}}, {"guided_choice": choices}):
        r = client.chat.completions.create(
            model="", messages=[{"role": "user", "content": "Pick one."}], max_tokens=10,
            temperature=1.0, n=4, seed=3, extra_body=body)
        assert all(c.message.content in choices for c in r.choices)
    pattern = r"[0-9]{3}-[a-z]{2,4}"
    r = client.completions.create(model="", prompt="Code:", max_tokens=12, temperature=1.0, n=3,
                                  seed=9, extra_body={"structured_outputs": {"regex": pattern}})
    assert all(re.fullmatch(pattern, c.text) for c in r.choices), [c.text for c in r.choices]
    grammar = 'root ::= "(" item ("," item)* ")"\nitem ::= [a-z] | [0-9]'
    r = client.completions.create(model="", prompt="List:", max_tokens=24, temperature=1.0, n=2,
                                  seed=4, extra_body={"structured_outputs": {"grammar": grammar}})
    for c in r.choices:
        if c.finish_reason == "stop":
            assert re.fullmatch(r"\([a-z0-9](,[a-z0-9])*\)", c.text), c.text


def test_streamed_schema_concatenates(client):
    schema = SCHEMAS["enums"]
    stream = client.chat.completions.create(
        model="", messages=[{"role": "user", "content": PROMPT}], max_tokens=60, temperature=0,
        stream=True, response_format={"type": "json_schema",
                                      "json_schema": {"name": "e", "schema": schema}})
    text, finish = "", None
    for chunk in stream:
        for c in chunk.choices:
            text += c.delta.content or ""
            finish = c.finish_reason or finish
    assert finish == "stop"
    jsonschema.validate(json.loads(text), schema)


def test_unfinished_grammar_ends_with_length(client):
    r = client.chat.completions.create(
        model="", messages=[{"role": "user", "content": PROMPT}], max_tokens=3, temperature=0,
        response_format={"type": "json_schema",
                         "json_schema": {"name": "n", "schema": SCHEMAS["nested"]}})
    assert r.choices[0].finish_reason == "length"


def test_logit_bias(client, server):
    prompt = "The capital of France is"
    base = client.completions.create(model="", prompt=prompt, max_tokens=1, temperature=0)
    first = base.choices[0].text
    status, _, body = server.request("POST", "/tokenize", {"prompt": prompt + first})
    assert status == 200, body
    both = json.loads(body)["tokens"]
    status, _, body = server.request("POST", "/tokenize", {"prompt": prompt})
    token_id = both[len(json.loads(body)["tokens"])]
    r = client.completions.create(model="", prompt=prompt, max_tokens=1, temperature=0,
                                  logit_bias={str(token_id): -100})
    assert r.choices[0].text != first
    r = client.completions.create(model="", prompt=prompt, max_tokens=3, temperature=0,
                                  logit_bias={str(token_id): 100})
    assert r.choices[0].text == first * 3


@pytest.mark.parametrize("body,needle", [
    ({"response_format": {"type": "json_schema",
                          "json_schema": {"name": "q", "schema": {"type": "quaternion"}}}}, "invalid"),
    ({"structured_outputs": {"regex": "a(b"}}, "regex"),
    ({"structured_outputs": {"json": {"type": "array", "uniqueItems": True}}}, "unsupported JSON schema keyword"),
    ({"structured_outputs": {"choice": []}}, "choice"),
    ({"logit_bias": {"5": 250}}, "logit_bias"),
    ({"structured_outputs": {"json": {"type": "object"}, "regex": "x"}}, "conflicts"),
    ({"structured_outputs": {"frobnicate": 1}}, "frobnicate"),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}}, "schema"),
    ({"guided_json": "{not json"}, "guided_json"),
])
def test_bad_constraints_are_400(client, body, needle):
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model="", prompt="x", max_tokens=4, extra_body=body)
    assert needle in str(e.value), str(e.value)


def test_ws_structured_outputs(server):
    schema = SCHEMAS["pattern"]
    with Ws(server) as ws:
        ws.generate("s", prompt="Record:", max_tokens=40, temperature=1.0, n=2, seed=2,
                    structured_outputs={"json": schema})
        ws.generate("bad", prompt="x", max_tokens=4, structured_outputs={"regex": "a(b"})
        out = ws.run(["s", "bad"])
    frames = out["s"]
    assert frames[-1]["type"] == "done", frames[-1]
    texts = {}
    for f in frames:
        if f["type"] == "token":
            texts[f["index"]] = texts.get(f["index"], "") + f.get("text", "")
    assert len(texts) == 2
    for t in texts.values():
        jsonschema.validate(json.loads(t), schema)
    err = out["bad"][-1]
    assert err["type"] == "error" and err["code"] == "bad_request", err


def test_beam_search_follows_the_schema(client):
    schema = SCHEMAS["enums"]
    r = client.completions.create(model="", prompt="A JSON record:", max_tokens=40, n=2,
                                  extra_body={"beam_width": 3, "structured_outputs": {"json": schema}})
    assert len(r.choices) == 2
    check_choices(r.choices, schema)
