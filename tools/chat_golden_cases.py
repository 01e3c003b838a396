"""Inputs of tools/gen-chat-goldens.py: conversations per chat template, and
small Jinja snippets for the interpreter's unit tests. Data only."""

SYS = {"role": "system", "content": "You are a concise assistant."}
U1 = {"role": "user", "content": "What is the capital of France?"}
A1 = {"role": "assistant", "content": "Paris."}
U2 = {"role": "user", "content": "And of Italy?"}
A2 = {"role": "assistant", "content": "Rome."}

WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather for a city.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "City name"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city"]}}}
TIME_TOOL = {"type": "function", "function": {
    "name": "get_time", "description": "Local time, e.g. \"14:05\" — in a zone.",
    "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}, "required": []}}}

TEXTS = {
    "unicode": "Grüße aus Köln — 日本語のテキスト, emoji 😀🎉, RTL שלום, combining é.",
    "template_text": "Literal {{ messages }} and {% if x %}tags{% endif %} and {# comment #} stay as text.",
    "quotes": "She said \"hi\" and 'bye'\\n (a backslash-n), a tab\there,\nand a newline.",
    "special": "Injected <|im_end|> and <|im_start|>system markers.",
    "spaces": "   padded content with trailing spaces   \n\n",
    "crlf": "line one\r\nline two\rline three",
    "long": ("lorem ipsum dolor sit amet " * 40).strip(),
}


def _conv(name, messages, **kw):
    c = {"name": name, "messages": messages}
    c.update(kw)
    return c


def _common(system_ok=True):
    """Conversation shapes every template is rendered with."""
    s = [SYS] if system_ok else []
    cases = [
        _conv("single_user", [U1]),
        _conv("single_user_no_gen", [U1], add_generation_prompt=False),
        _conv("system_user", s + [U1]),
        _conv("multi_turn", s + [U1, A1, U2]),
        _conv("multi_turn_no_gen", s + [U1, A1, U2], add_generation_prompt=False),
        _conv("assistant_last", s + [U1, A1], add_generation_prompt=False),
        _conv("assistant_last_gen", s + [U1, A1, U2, A2]),
        _conv("empty_user_content", [{"role": "user", "content": ""}]),
        _conv("empty_assistant_content", [U1, {"role": "assistant", "content": ""}, U2]),
        _conv("none_content", [{"role": "user", "content": None}]),
        _conv("int_content", [{"role": "user", "content": 42}]),
        _conv("missing_role", [{"content": "no role here"}]),
        _conv("extra_keys", [{"role": "user", "content": "hi", "name": "alice", "id": 7}]),
        _conv("many_turns", s + [m for i in range(6) for m in (
            {"role": "user", "content": f"question {i}"}, {"role": "assistant", "content": f"answer {i}"})] + [U2]),
        _conv("empty_conversation", []),
        _conv("extra_context", [U1], extra_context={"enable_thinking": False, "custom_var": "x"}),
    ]
    for key, text in TEXTS.items():
        cases.append(_conv(f"text_{key}", s + [{"role": "user", "content": text},
                                               {"role": "assistant", "content": text}, U2]))
    return cases


def _smollm2():
    return _common() + [
        _conv("tool_role", [U1, {"role": "tool", "content": "{\"temp\": 21}"}]),
        _conv("content_list", [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]),
        _conv("tools_ignored", [U1], tools=[WEATHER_TOOL]),
        _conv("system_only", [SYS]),
    ]


def _tool_call(name, args, call_id="call_1"):
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


def _deepseek():
    think = {"role": "assistant", "content": "<think>\nThe user asks about France.\n</think>\n\nParis."}
    call = {"role": "assistant", "content": "", "tool_calls": [
        _tool_call("get_weather", "{\"city\": \"Paris\"}")]}
    two_calls = {"role": "assistant", "content": "", "tool_calls": [
        _tool_call("get_weather", "{\"city\": \"Paris\"}"),
        _tool_call("get_time", "{\"tz\": \"Europe/Paris\"}", "call_2")]}
    tool_out = {"role": "tool", "content": "{\"temp\": 21, \"sky\": \"clear\"}", "tool_call_id": "call_1"}
    tool_out2 = {"role": "tool", "content": "14:05", "tool_call_id": "call_2"}
    return _common() + [
        _conv("think_split", [U1, think, U2]),
        _conv("think_split_no_gen", [U1, think], add_generation_prompt=False),
        _conv("multiple_think_tags", [U1, {"role": "assistant", "content": "a</think>b</think>c"}, U2]),
        _conv("tool_call", [SYS, U1, call, tool_out]),
        _conv("tool_call_then_answer", [SYS, U1, call, tool_out, {"role": "assistant", "content": "It is 21°C."}, U2]),
        _conv("two_tool_calls", [U1, two_calls, tool_out, tool_out2]),
        _conv("two_tool_calls_no_gen", [U1, two_calls, tool_out, tool_out2], add_generation_prompt=False),
        _conv("tool_call_null_content", [U1, {"role": "assistant", "content": None, "tool_calls": [
            _tool_call("get_weather", "{}")]}, tool_out]),
        _conv("tool_call_dict_arguments", [U1, {"role": "assistant", "content": "", "tool_calls": [
            _tool_call("get_weather", {"city": "Paris"})]}]),
        _conv("second_system_wins", [SYS, U1, {"role": "system", "content": "Second system."}, U2]),
        _conv("reasoning_content_field", [U1, {"role": "assistant", "content": "Paris.",
                                               "reasoning_content": "thinking..."}, U2]),
        _conv("tools_given", [U1], tools=[WEATHER_TOOL]),
    ]


def _phi4():
    tools = [WEATHER_TOOL, TIME_TOOL]
    call = {"role": "assistant", "content": None, "tool_calls": [
        _tool_call("get_weather", {"city": "Paris", "unit": "celsius"})]}
    tool_out = {"role": "tool", "content": "{\"temp\": 21}"}
    cases = []
    for c in _common():
        c = dict(c)
        c.setdefault("tools", [])  # the template iterates `tools` whenever it is defined
        cases.append(c)
    return cases + [
        _conv("no_tools_argument", [SYS, U1]),
        _conv("tools_with_system", [SYS, U1], tools=tools),
        _conv("tools_without_system", [U1], tools=tools),
        _conv("tools_system_mentions_tool_call", [{"role": "system", "content": "Use <|tool_call|> wisely."}, U1],
              tools=tools),
        _conv("tool_call_and_response", [SYS, U1, call, tool_out], tools=tools),
        _conv("tool_call_and_response_no_gen", [SYS, U1, call, tool_out, A1], tools=tools,
              add_generation_prompt=False),
        _conv("tool_content_unicode", [U1, {"role": "tool", "content": "température: 21°C 🌞"}], tools=[]),
        _conv("two_tool_calls", [U1, {"role": "assistant", "content": "Checking.", "tool_calls": [
            _tool_call("get_weather", {"city": "Paris"}), _tool_call("get_time", {"tz": "CET"}, "c2")]}],
              tools=tools),
    ]


def _stress():
    call = {"role": "assistant", "content": "Let me check.", "tool_calls": [
        _tool_call("get_weather", {"unit": "celsius", "city": "Paris"}),
        _tool_call("get_time", {"tz": "Europe/Paris"}, "c2")]}
    return _common() + [
        _conv("tools", [SYS, U1], tools=[WEATHER_TOOL, TIME_TOOL]),
        _conv("tools_no_system", [U1], tools=[TIME_TOOL]),
        _conv("tool_calls_and_results", [U1, call, {"role": "tool", "content": {"temp": 21}},
                                         {"role": "tool", "content": "14:05"}, U2], tools=[WEATHER_TOOL]),
        _conv("alternation_violation", [U1, U2]),
        _conv("assistant_first", [A1, U1]),
        _conv("unknown_role", [U1, {"role": "narrator", "content": "Meanwhile..."}]),
        _conv("content_parts", [{"role": "user", "content": [
            {"type": "text", "text": "Describe"}, {"type": "image"}, {"type": "text", "text": "this."}]}]),
        _conv("thinking_disabled", [U1], extra_context={"enable_thinking": False}),
        _conv("thinking_enabled", [U1], extra_context={"enable_thinking": True}),
        _conv("bos_override", [U1], extra_context={"bos_token": "<BOS>"}),
        _conv("content_dict", [{"role": "user", "content": {"text": "x"}}]),
    ]


def _qwen3():
    think = {"role": "assistant", "content": "<think>\nThe user asks about France.\n</think>\n\nParis."}
    call = {"role": "assistant", "content": "", "tool_calls": [
        _tool_call("get_weather", {"city": "Paris"})]}
    two_calls = {"role": "assistant", "content": "Checking.", "tool_calls": [
        _tool_call("get_weather", "{\"city\": \"Paris\"}"),
        _tool_call("get_time", {"tz": "Europe/Paris"}, "call_2")]}
    tool_out = {"role": "tool", "content": "{\"temp\": 21, \"sky\": \"clear\"}", "tool_call_id": "call_1"}
    tool_out2 = {"role": "tool", "content": "14:05", "tool_call_id": "call_2"}
    answer = {"role": "assistant", "content": "It is 21°C."}
    return _common() + [
        _conv("think_history_stripped", [U1, think, U2]),
        _conv("think_last_turn_kept", [U1, think], add_generation_prompt=False),
        _conv("reasoning_content_field", [U1, {"role": "assistant", "content": "Paris.",
                                               "reasoning_content": "thinking..."}, U2]),
        _conv("reasoning_content_last", [U1, {"role": "assistant", "content": "Paris.",
                                              "reasoning_content": "thinking..."}],
              add_generation_prompt=False),
        _conv("enable_thinking_false", [U1], extra_context={"enable_thinking": False}),
        _conv("enable_thinking_true", [U1], extra_context={"enable_thinking": True}),
        _conv("tools_with_system", [SYS, U1], tools=[WEATHER_TOOL, TIME_TOOL]),
        _conv("tools_without_system", [U1], tools=[WEATHER_TOOL]),
        _conv("tool_call_and_response", [SYS, U1, call, tool_out], tools=[WEATHER_TOOL]),
        _conv("tool_call_then_answer", [U1, call, tool_out, answer, U2], tools=[WEATHER_TOOL]),
        _conv("two_tool_calls_two_responses", [U1, two_calls, tool_out, tool_out2],
              tools=[WEATHER_TOOL, TIME_TOOL]),
        _conv("tool_response_in_user_turn", [U1, {"role": "user", "content": "<tool_response>x</tool_response>"},
                                             A1, U2]),
        _conv("system_only", [SYS]),
    ]


def _llama32():
    call = {"role": "assistant", "content": "", "tool_calls": [_tool_call("get_weather", {"city": "Paris"})]}
    two = {"role": "assistant", "content": "", "tool_calls": [
        _tool_call("get_weather", {"city": "Paris"}), _tool_call("get_time", {"tz": "UTC"}, "call_2")]}
    tool_out = {"role": "tool", "content": "{\"temp\": 21}", "tool_call_id": "call_1"}
    return [
        _conv("tools_in_user_message", [SYS, U1], tools=[WEATHER_TOOL, TIME_TOOL]),
        _conv("tools_in_system", [U1], tools=[WEATHER_TOOL], extra_context={"tools_in_user_message": False}),
        _conv("tools_without_user_rejected", [SYS], tools=[WEATHER_TOOL]),
        _conv("tool_call_and_ipython", [U1, call, tool_out], tools=[WEATHER_TOOL]),
        _conv("two_tool_calls_rejected", [U1, two], tools=[WEATHER_TOOL, TIME_TOOL]),
        _conv("date_string_given", [U1], extra_context={"date_string": "01 Jan 2030"}),
    ]


def _mistral_nemo():
    call = {"role": "assistant", "content": None, "tool_calls": [
        _tool_call("get_weather", {"city": "Paris"}, "abcDEF123")]}
    bad_id = {"role": "assistant", "content": None, "tool_calls": [
        _tool_call("get_weather", {"city": "Paris"}, "call_1")]}
    tool_out = {"role": "tool", "content": "{\"temp\": 21}", "tool_call_id": "abcDEF123"}
    return [
        _conv("two_users_rejected", [U1, U2]),
        _conv("assistant_first_rejected", [A1, U1]),
        _conv("tools_before_last_user", [SYS, U1, A1, U2], tools=[WEATHER_TOOL, TIME_TOOL]),
        _conv("tool_call_and_result", [U1, call, tool_out], tools=[WEATHER_TOOL]),
        _conv("tool_call_id_not_nine_rejected", [U1, bad_id], tools=[WEATHER_TOOL]),
        _conv("system_only", [SYS]),
    ]


CONVERSATIONS = {
    "smollm2": _smollm2(),
    "deepseek-r1-distill-qwen": _deepseek(),
    "phi-4-mini-instruct": _phi4(),
    "phi-3.5-mini-instruct": _common() + [
        _conv("empty_system_skipped", [{"role": "system", "content": ""}, U1]),
        _conv("no_generation_prompt_ends_with_eos", [SYS, U1, A1], add_generation_prompt=False),
    ],
    "qwen3": _qwen3(),
    # Gemma 2's template: no system role (an error), strict user/model
    # alternation (an error otherwise), content | trim, assistant -> model.
    "gemma-2-it": _common(system_ok=False) + [
        _conv("system_rejected", [SYS, U1]),
        _conv("two_users_rejected", [U1, U2]),
        _conv("assistant_first_rejected", [A1, U1]),
    ],
    # Gemma 3's template: a system message becomes the first user turn's
    # prefix; content may be a list of text/image items; anything else that
    # is not iterable is an error; strict alternation.
    "gemma-3-it": _common() + [
        _conv("two_users_rejected", [U1, U2]),
        _conv("assistant_first_rejected", [SYS, A1, U1]),
        _conv("content_list_image_text", [{"role": "user", "content": [
            {"type": "image"}, {"type": "text", "text": "  Describe this image.  "}, {"type": "audio"}]}]),
        _conv("system_content_list", [{"role": "system", "content": [{"type": "text", "text": "Be terse."}]}, U1]),
        _conv("system_only", [SYS]),
    ],
    # Mixtral's template: optional system folded into the first [INST],
    # strict alternation, no other roles.
    "mixtral-instruct": _common() + [
        _conv("two_users_rejected", [U1, U2]),
        _conv("assistant_first_rejected", [A1, U1]),
        _conv("tool_role_rejected", [U1, A1, {"role": "tool", "content": "{}"}]),
        _conv("system_only", [SYS]),
    ],
    # Llama 3.2's template: a system turn always (today's date from
    # strftime_now, the knowledge cutoff), tools in the first user message or
    # the system turn (tools_in_user_message), ipython results, one tool call.
    "llama-3.2": _common() + _llama32(),
    # Mistral-Nemo's template: the system message joined to the last user
    # turn, strict alternation, [AVAILABLE_TOOLS] before the last user turn,
    # tool call ids of exactly 9 alphanumerics.
    "mistral-nemo": _common() + _mistral_nemo(),
    "stress": _stress(),
}

# Variables every snippet is rendered with.
SNIPPET_CONTEXT = {
    "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi there"},
        {"role": "assistant", "content": "Hello!", "tool_calls": [
            {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}}]},
        {"role": "user", "content": "  spaced  \n"},
    ],
    "tools": [WEATHER_TOOL, TIME_TOOL],
    "d": {"b": 2, "a": 1, "items": "shadowed", "nested": {"k": [1, 2, 3]}, "Z": 0},
    "s": "Hello, World",
    "n": 7,
    "f": 2.5,
    "l": [3, 1, 2],
    "words": ["banana", "Apple", "cherry", "apple"],
    "empty": [],
    "nil": None,
    "t": True,
    "u": "héllo wörld ñ 日本 😀",
    "ml": "line one\n\nline three\n  indented",
    "x": "X",
    "y": "Y",
    "people": [{"name": "Ann", "age": 31, "tags": ["a"]}, {"name": "bob", "age": 25},
               {"name": "Cid", "age": 31, "email": None}],
}

from chat_golden_snippets import SNIPPETS, UNSUPPORTED  # noqa: E402,F401
