#!/usr/bin/env python3
"""Generates tests/data/chat/tools.cases.json: chat requests with tools, tool
calls and tool results, and the prompt jinja2 renders for them through
transformers' apply_chat_template (the reference for tests/tool_template_test.cpp,
which sends the same request bodies through the server's request parsing and
chat rendering).

Makes:
  tests/data/chat/qwen2.5.jinja       Qwen/Qwen2.5-7B-Instruct's template
  tests/data/chat/llama-3.1.jinja     meta-llama/Llama-3.1-8B-Instruct's template
  tests/data/chat/mistral-nemo.jinja  mistralai/Mistral-Nemo-Instruct-2407's template
      (copies of llama.cpp's models/templates/*.jinja; env PAGODA_LLAMA_CPP: the
      llama.cpp sources; when unset the existing copies are reused)
  tests/data/chat/tools.cases.json    per case: template, bos/eos, the OpenAI
      request body, and the rendered prompt (or the error jinja2 raised)
qwen3.jinja is gen-chat-goldens.py's copy.

From an OpenAI request to the template's arguments, the server's documented
rules (net/tool_request.hpp, net/tool_prompt.hpp), written here independently:
  - messages: content null -> ""; tool_calls' function.arguments (a JSON
    string) -> the object it encodes (json.loads; kept a string otherwise);
    role "developer" -> "system";
  - tools: [{"type": "function", "function": {name, description?,
    parameters?}}] as given; tool_choice "none" -> no tools.
strftime_now is pinned to 2024-07-26 14:05:09 (Llama 3.1 prints the date).

Run from the repository root:
  /work/wt/gold/bin/python tools/gen-tool-chat-goldens.py
Deterministic: same inputs, same file.
"""
import copy
import datetime as _dt
import json
import os
import pathlib
import shutil
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "chat"
FIXED_NOW = (2024, 7, 26, 14, 5, 9)

from tokenizers import Tokenizer, models  # noqa: E402
from transformers import PreTrainedTokenizerFast  # noqa: E402
from transformers.utils import chat_template_utils as ctu  # noqa: E402


class _FixedDatetime(_dt.datetime):
    @classmethod
    def now(cls, tz=None):
        return cls(*FIXED_NOW)


ctu.datetime = _FixedDatetime

# name -> (llama.cpp template file or None for an existing copy, bos, eos)
TEMPLATES = {
    "qwen3": (None, "<|endoftext|>", "<|im_end|>"),
    "qwen2.5": ("Qwen-Qwen2.5-7B-Instruct.jinja", "<|endoftext|>", "<|im_end|>"),
    "llama-3.1": ("meta-llama-Llama-3.1-8B-Instruct.jinja", "<|begin_of_text|>", "<|eot_id|>"),
    "mistral-nemo": ("mistralai-Mistral-Nemo-Instruct-2407.jinja", "<s>", "</s>"),
}

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather in a city",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "City name"},
        "unit": {"type": "string", "enum": ["c", "f"]}}, "required": ["city"]}}}
TIME = {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}
BARE = {"type": "function", "function": {"name": "ping"}}


def call(cid, name, args):
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}


ASK = {"role": "user", "content": "What is the weather in Paris?"}
CALL1 = {"role": "assistant", "content": None,
         "tool_calls": [call("abc123XYZ", "get_weather", "{\"city\": \"Paris\", \"unit\": \"c\"}")]}
RESULT1 = {"role": "tool", "tool_call_id": "abc123XYZ", "content": "{\"temp\": 21, \"sky\": \"clear\"}"}

CASES = [
    ("tools_question", {"messages": [ASK], "tools": [WEATHER, TIME]}),
    ("tools_with_system", {"messages": [{"role": "system", "content": "Be brief."}, ASK],
                           "tools": [WEATHER, BARE]}),
    ("call_and_result", {"messages": [ASK, CALL1, RESULT1], "tools": [WEATHER]}),
    ("result_then_answer", {"messages": [ASK, CALL1, RESULT1,
                                         {"role": "assistant", "content": "It is 21 C and clear."},
                                         {"role": "user", "content": "Thanks"}], "tools": [WEATHER]}),
    ("call_with_text_and_string_args", {"messages": [ASK, {
        "role": "assistant", "content": "Let me look.",
        "tool_calls": [call("def456UVW", "get_weather", "not json")]},
        {"role": "tool", "tool_call_id": "def456UVW", "content": "error"}], "tools": [WEATHER]}),
    ("tool_choice_none", {"messages": [ASK], "tools": [WEATHER], "tool_choice": "none"}),
    ("two_calls", {"messages": [ASK, {"role": "assistant", "content": None, "tool_calls": [
        call("abc123XYZ", "get_weather", "{\"city\": \"Paris\"}"),
        call("ghi789RST", "get_time", "{}")]},
        RESULT1, {"role": "tool", "tool_call_id": "ghi789RST", "content": "14:05"}], "tools": [WEATHER, TIME]}),
]


def copy_templates():
    src = os.environ.get("PAGODA_LLAMA_CPP")
    for name, (file, _, _) in TEMPLATES.items():
        dst = OUT / f"{name}.jinja"
        if file and src:
            shutil.copyfile(pathlib.Path(src) / "models" / "templates" / file, dst)
        elif not dst.exists():
            sys.exit(f"no PAGODA_LLAMA_CPP and no existing {dst}")


def template_messages(messages):
    out = []
    for m in copy.deepcopy(messages):
        if m.get("content") is None:
            m["content"] = ""
        if m.get("role") == "developer":
            m["role"] = "system"
        for c in m.get("tool_calls", []):
            try:
                parsed = json.loads(c["function"]["arguments"])
                if isinstance(parsed, dict):
                    c["function"]["arguments"] = parsed
            except ValueError:
                pass
        out.append(m)
    return out


def render(template, bos, eos, body):
    tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.BPE()), bos_token=bos, eos_token=eos)
    tok.chat_template = template
    tools = None if body.get("tool_choice") == "none" else body.get("tools")
    try:
        return {"expected": tok.apply_chat_template(template_messages(body["messages"]), tools=copy.deepcopy(tools),
                                                    add_generation_prompt=True, tokenize=False)}
    except Exception as e:  # the golden records jinja2's (or the template's) error
        return {"error": str(e), "error_type": type(e).__name__}


def main():
    copy_templates()
    cases = []
    for name, (_, bos, eos) in TEMPLATES.items():
        template = (OUT / f"{name}.jinja").read_text(encoding="utf-8")
        for case_name, body in CASES:
            rec = {"name": f"{name}/{case_name}", "template": f"{name}.jinja", "bos_token": bos, "eos_token": eos,
                   "request": body}
            rec.update(render(template, bos, eos, body))
            cases.append(rec)
    n_err = sum("error" in c for c in cases)
    print(f"tools: {len(cases)} cases ({n_err} errors)")
    (OUT / "tools.cases.json").write_text(
        json.dumps({"now": list(FIXED_NOW), "cases": cases}, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
