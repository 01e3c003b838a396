"""Tool calling in /v1/chat/completions, driven by the official `openai`
client against `pagoda serve` with the default model (SmolLM2-135M-Instruct,
whose template has no tool support: the server's Hermes-style fallback).

tool_choice "required" and a named function are enforced by the structural
tag grammar, so every call must name a given tool and its arguments must
parse and validate against the tool's JSON Schema (jsonschema). Streamed
answers must add up to the same calls as whole ones, never leak the
<tool_call> markup, and start each call with index, id, type and name.
Tool results (role: tool) go back through the template."""
import json

import jsonschema
import openai
import pytest

from test_server_openai import make_client

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather in a city",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "maxLength": 40},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city", "unit"], "additionalProperties": False}}}
TIME = {"type": "function", "function": {
    "name": "get_time", "description": "Current time in a time zone",
    "parameters": {"type": "object", "properties": {"zone": {"type": "string", "maxLength": 30}},
                   "required": ["zone"], "additionalProperties": False}}}
TOOLS = [WEATHER, TIME]
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
ASK = [{"role": "user", "content": "What is the weather like in Paris today?"}]


@pytest.fixture(scope="module")
def create(server):
    """client.chat.completions.create with the served model's id filled in."""
    client = make_client(server)
    status, _, body = server.request("GET", "/v1/models")
    assert status == 200, body
    model = json.loads(body)["data"][0]["id"]
    return lambda **kwargs: client.chat.completions.create(model=model, **kwargs)


def check_call(name, arguments, only=None):
    assert name in SCHEMAS, name
    if only:
        assert name == only
    args = json.loads(arguments)
    jsonschema.validate(args, SCHEMAS[name])
    return args


def collect_stream(stream):
    """(content, {index: {id, name, arguments}}, finish_reason) of a stream,
    checking OpenAI's delta rules on the way."""
    content, calls, finish = "", {}, None
    for chunk in stream:
        if not chunk.choices:
            continue
        choice = chunk.choices[0]
        delta = choice.delta
        if delta.content:
            content += delta.content
        for tc in delta.tool_calls or []:
            if tc.index not in calls:
                assert tc.id and tc.id.startswith("call_"), tc
                assert tc.type == "function" and tc.function.name, tc
                calls[tc.index] = {"id": tc.id, "name": tc.function.name, "arguments": ""}
            else:
                assert tc.id is None and tc.function.name is None, tc
            calls[tc.index]["arguments"] += tc.function.arguments or ""
        if choice.finish_reason:
            finish = choice.finish_reason
    return content, calls, finish


def test_required_call_parses_and_validates(create):
    r = create(messages=ASK, tools=TOOLS, tool_choice="required", parallel_tool_calls=False,
               max_tokens=120, temperature=0)
    msg = r.choices[0].message
    assert r.choices[0].finish_reason == "tool_calls", r
    assert msg.content is None
    assert len(msg.tool_calls) == 1
    tc = msg.tool_calls[0]
    assert tc.type == "function" and tc.id.startswith("call_")
    check_call(tc.function.name, tc.function.arguments)


def test_parallel_calls_each_validate(create):
    """With parallel calls allowed the small model keeps calling until
    max_tokens: every call but a cut last one must validate."""
    r = create(messages=ASK, tools=TOOLS, tool_choice="required", max_tokens=150, temperature=0.8, seed=7)
    choice = r.choices[0]
    calls = choice.message.tool_calls
    assert len(calls) >= 2, choice
    assert len({tc.id for tc in calls}) == len(calls)
    whole = calls if choice.finish_reason == "tool_calls" else calls[:-1]
    assert choice.finish_reason in ("tool_calls", "length")
    for tc in whole:
        check_call(tc.function.name, tc.function.arguments)


def test_named_call_streamed(create):
    stream = create(
        messages=[{"role": "user", "content": "What time is it in Tokyo?"}], tools=TOOLS,
        tool_choice={"type": "function", "function": {"name": "get_time"}}, parallel_tool_calls=False,
        max_tokens=120, temperature=0, stream=True)
    content, calls, finish = collect_stream(stream)
    assert finish == "tool_calls"
    assert "<tool_call>" not in content and "</tool_call>" not in content
    assert list(calls) == [0], calls
    check_call(calls[0]["name"], calls[0]["arguments"], only="get_time")


@pytest.mark.parametrize("choice", ["required", "auto"])
def test_streamed_equals_whole(create, choice):
    kwargs = dict(messages=ASK, tools=TOOLS, tool_choice=choice, max_tokens=80, temperature=0)
    whole = create(**kwargs).choices[0]
    content, calls, finish = collect_stream(create(stream=True, **kwargs))
    assert finish == whole.finish_reason
    assert content == (whole.message.content or "")
    got = [(c["name"], c["arguments"]) for _, c in sorted(calls.items())]
    want = [(tc.function.name, tc.function.arguments) for tc in whole.message.tool_calls or []]
    assert got == want
    assert "<tool_call>" not in content


def test_parallel_false_gives_one_call(create):
    r = create(
        messages=[{"role": "user", "content": "Weather in Paris and in Rome, and the time in Oslo?"}],
        tools=TOOLS, tool_choice="required", parallel_tool_calls=False, max_tokens=200, temperature=0)
    assert len(r.choices[0].message.tool_calls) == 1


def test_tool_result_round_trip(create, server):
    first = create(messages=ASK, tools=TOOLS, tool_choice="required", parallel_tool_calls=False,
                                           max_tokens=120, temperature=0)
    msg = first.choices[0].message
    assert msg.tool_calls
    history = ASK + [msg.model_dump(exclude_none=True)]
    for tc in msg.tool_calls:
        history.append({"role": "tool", "tool_call_id": tc.id, "content": json.dumps({"temp_c": 21, "sky": "clear"})})
    second = create(messages=history, tools=TOOLS, max_tokens=30, temperature=0)
    assert second.choices[0].finish_reason in ("stop", "length", "tool_calls")
    # The call and the result reached the prompt (the fallback renders them as text).
    status, _, body = server.request("POST", "/tokenize", {"messages": history})
    assert status == 200, body
    status, _, text = server.request("POST", "/detokenize", {"tokens": json.loads(body)["tokens"]})
    prompt = json.loads(text)["prompt"]
    assert '<tool_response>\n{"temp_c": 21, "sky": "clear"}\n</tool_response>' in prompt
    assert "<tool_call>\n{\"name\":\"" + msg.tool_calls[0].function.name in prompt


def test_tools_and_response_format(create):
    """A forced call cannot also obey response_format (400); with auto the
    response_format constraint wins and the answer is its JSON."""
    with pytest.raises(openai.BadRequestError) as err:
        create(messages=ASK, tools=TOOLS, tool_choice="required", response_format={"type": "json_object"},
               max_tokens=5)
    assert err.value.body["param"] == "tool_choice"
    schema = {"type": "object", "properties": {"answer": {"type": "string", "maxLength": 20}},
              "required": ["answer"], "additionalProperties": False}
    r = create(messages=ASK, tools=TOOLS, max_tokens=60, temperature=0,
               response_format={"type": "json_schema", "json_schema": {"name": "a", "schema": schema}})
    choice = r.choices[0]
    assert choice.finish_reason == "stop" and not choice.message.tool_calls, choice
    jsonschema.validate(json.loads(choice.message.content), schema)


@pytest.mark.parametrize("kwargs,param", [
    (dict(tool_choice="required"), "tool_choice"),
    (dict(tools=TOOLS, tool_choice={"type": "function", "function": {"name": "nope"}}), "tool_choice"),
    (dict(tools=[{"type": "function", "function": {"description": "no name"}}]), "tools[0].function.name"),
    (dict(tools=[{"type": "function", "function": {"name": "f", "parameters": {"type": "string"}}}]),
     "tools[0].function.parameters"),
])
def test_bad_tools_are_400s(create, kwargs, param):
    with pytest.raises(openai.BadRequestError) as err:
        create(messages=ASK, max_tokens=5, **kwargs)
    assert err.value.body["param"] == param
