#!/usr/bin/env python3
"""xgrammar's own token bitmasks on recorded prefixes: the independent
reference for Pagoda's tokenizer bridge and grammar path (issue 23 item 6;
model/grammar_vocab, model/grammar_compiler, model/token_matcher).

The reference is PyPI's `xgrammar` Python package (its own wheel, the same
version as third_party/xgrammar) with its own Hugging Face bridge
(TokenizerInfo.from_huggingface), driven by SmolLM2-135M-Instruct's tokenizer
as transformers builds it from the GGUF file (AutoTokenizer.from_pretrained
with gguf_file=...), so neither the vocabulary nor the token bytes come from
Pagoda's code.

For every grammar below (compiled the way model/grammar_compiler.cpp compiles
each kind: JSON compact, not any_whitespace; json_schema strict, json_object
not strict; a choice list as an EBNF alternation written here; the tool-call
structural tag in the Hermes shape net/tool_grammar.cpp documents) and every
document (valid outputs, tokenized by the HF tokenizer canonically, in random
pieces, and one character at a time, as a model may split them), it records
the bitmask after each prefix ids[:k], k = 0..len(ids), and whether the
matcher is completed after the whole sequence. Matchers use the GGUF's EOS as
the stop token (override_stop_tokens, as TokenMatcher does).

Output: tests/data/grammar/xgrammar-goldens.json
  masks: the distinct masks, each {"n": allowed count, "allow"|"deny": ranges}
         ("a-b,c,..." over token ids; whichever list is shorter)
  cases: [{name, kind, spec | choices | tools+tool_choice, sequences:
           [{how, text, ids, masks: [index per prefix], completed}]}]
  hf_special_ids: the HF tokenizer's special added tokens (chat markers...):
         Pagoda never lets a grammar produce them, xgrammar's HF bridge gives
         them their text (see the C++ test's policy note).

Usage: python tools/gen-xgrammar-goldens.py [MODEL.gguf]
  (default: the path tools/fetch-model prints). Needs xgrammar, transformers,
  tokenizers, gguf, torch (CPU is enough).
"""
import json
import os
import random
import subprocess
import sys
from importlib import metadata

import gguf
import xgrammar as xgr
from transformers import AutoTokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "data", "grammar", "xgrammar-goldens.json")

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
        "role": {"enum": ["admin", "user", "guest"]},
        "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 3},
        "address": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "zip": {"type": "string", "pattern": "^[0-9]{5}$"},
            },
            "required": ["city", "zip"],
        },
    },
    "required": ["name", "role", "tags", "address"],
}
ANY_OF = {
    "type": "object",
    "properties": {
        "value": {"anyOf": [{"type": "number"}, {"type": "string", "maxLength": 8}, {"type": "null"}]},
        "ok": {"type": "boolean"},
    },
    "required": ["value", "ok"],
}
ITEMS = {
    "type": "array",
    "items": {
        "type": "object",
        "properties": {"id": {"type": "integer"}, "kind": {"type": "string", "enum": ["a", "b c", "ü"]}},
        "required": ["id", "kind"],
    },
    "minItems": 1,
    "maxItems": 2,
}
TEXT = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}},
    "required": ["city"],
}
TOOLS = [
    {"name": "get_weather", "parameters": WEATHER},
    {"name": "add", "parameters": {"type": "object", "properties": {"a": {"type": "integer"},
                                                                  "b": {"type": "integer"}},
                                   "required": ["a", "b"]}},
]
EBNF = 'root ::= expr\nexpr ::= term ("+" term)*\nterm ::= [0-9]+ | "(" expr ")"\n'
CHOICES = ["yes", "no", "maybe later", '"quoted" \\ it']
REGEX_PHONE = r"\(\d{3}\) \d{3}-\d{4} [A-Z][a-z]+"
REGEX_MAIL = r"[a-z]+(\.[a-z]+)*@[a-z]+\.(com|org)"


def dumps(obj):
    # xgrammar's compact JSON form (any_whitespace false): ", " and ": ".
    return json.dumps(obj, ensure_ascii=False)


def hermes_tag_doc(tools, choice):
    """The Hermes tool-call structural tag (net/tool_grammar.hpp's shape)."""
    tags = [{"type": "tag", "begin": '<tool_call>\n{"name": "' + t["name"] + '", "arguments": ',
             "content": {"type": "json_schema", "json_schema": t["parameters"]},
             "end": "}\n</tool_call>"} for t in tools]
    if choice == "required":
        fmt = {"type": "tags_with_separator", "tags": tags, "separator": "\n",
               "at_least_one": True, "stop_after_first": False}
    else:
        fmt = {"type": "triggered_tags", "triggers": ["<tool_call>"], "tags": tags,
               "at_least_one": False, "stop_after_first": False}
    return json.dumps({"type": "structural_tag", "format": fmt})


def call(name, args):
    return '<tool_call>\n{"name": "' + name + '", "arguments": ' + dumps(args) + "}\n</tool_call>"


CASES = [
    {"name": "json_object", "kind": "json_object",
     "docs": [dumps({"a": 1, "b": [True, None, "x"]}), dumps({"nested": {"k": "v é"}})]},
    {"name": "person", "kind": "json_schema", "schema": PERSON,
     "docs": [dumps({"name": "Bob", "age": 42, "role": "admin", "tags": ["x", "y"],
                     "address": {"city": "Paris", "zip": "75001"}}),
              dumps({"name": "Ana \"A\"", "role": "guest", "tags": ["q"],
                     "address": {"city": "São Paulo", "zip": "01000"}})]},
    {"name": "any_of", "kind": "json_schema", "schema": ANY_OF,
     "docs": [dumps({"value": -3.25e2, "ok": True}), dumps({"value": "short", "ok": False}),
              dumps({"value": None, "ok": True})]},
    {"name": "items", "kind": "json_schema", "schema": ITEMS,
     "docs": [dumps([{"id": 7, "kind": "b c"}, {"id": -1, "kind": "ü"}]), dumps([{"id": 0, "kind": "a"}])]},
    {"name": "unicode_text", "kind": "json_schema", "schema": TEXT,
     "docs": [dumps({"text": "café 日本語 😀 \\n tab\t"})]},
    {"name": "regex_phone", "kind": "regex", "spec": REGEX_PHONE, "docs": ["(555) 123-4567 Alice"]},
    {"name": "regex_mail", "kind": "regex", "spec": REGEX_MAIL, "docs": ["jo.doe@example.org", "a@b.com"]},
    {"name": "choice", "kind": "choice", "choices": CHOICES, "docs": CHOICES},
    {"name": "ebnf_sum", "kind": "grammar", "spec": EBNF, "docs": ["12+(3+45)+6", "(((7)))"]},
    {"name": "tools_required", "kind": "tools", "tool_choice": "required",
     "docs": [call("get_weather", {"city": "Oslo", "unit": "c"}),
              call("add", {"a": 2, "b": 40}) + "\n" + call("get_weather", {"city": "Rome"})]},
    {"name": "tools_auto", "kind": "tools", "tool_choice": "auto",
     "docs": ["Sure, let me look. " + call("get_weather", {"city": "Lima"}), "No tools needed here."]},
]


def compile_case(compiler, case):
    kind = case["kind"]
    if kind == "json_object":
        return compiler.compile_json_schema('{"type":"object"}', any_whitespace=False, strict_mode=False)
    if kind == "json_schema":
        return compiler.compile_json_schema(json.dumps(case["schema"]), any_whitespace=False, strict_mode=True)
    if kind == "regex":
        return compiler.compile_regex(case["spec"])
    if kind == "choice":
        alts = " | ".join(json.dumps(c) for c in case["choices"])  # JSON string escapes = EBNF's
        return compiler.compile_grammar("root ::= " + alts)
    if kind == "grammar":
        return compiler.compile_grammar(case["spec"])
    return compiler.compile_structural_tag(hermes_tag_doc(TOOLS, case["tool_choice"]))


def tokenizations(tok, text, rng):
    """(how, ids): canonical, random pieces (twice), one character at a time."""
    enc = lambda s: tok.encode(s, add_special_tokens=False)
    out = [("canonical", enc(text))]
    for _ in range(2):
        cuts = sorted(rng.sample(range(1, len(text)), min(len(text) - 1, max(1, len(text) // 5))))
        pieces = [text[a:b] for a, b in zip([0] + cuts, cuts + [len(text)])]
        out.append(("pieces", [i for p in pieces for i in enc(p)]))
    if len(text) <= 40:
        out.append(("chars", [i for c in text for i in enc(c)]))
    seen, uniq = set(), []
    for how, ids in out:
        if tuple(ids) not in seen:
            seen.add(tuple(ids))
            uniq.append((how, ids))
    return uniq


def ranges(ids):
    parts, i = [], 0
    while i < len(ids):
        j = i
        while j + 1 < len(ids) and ids[j + 1] == ids[j] + 1:
            j += 1
        parts.append(str(ids[i]) if i == j else f"{ids[i]}-{ids[j]}")
        i = j + 1
    return ",".join(parts)


def encode_mask(bitmask_row, vocab):
    words = [int(w) & 0xFFFFFFFF for w in bitmask_row.tolist()]
    allowed = [t for t in range(vocab) if (words[t >> 5] >> (t & 31)) & 1]
    allowed_set = set(allowed)
    denied = [t for t in range(vocab) if t not in allowed_set]
    a, d = ranges(allowed), ranges(denied)
    return {"n": len(allowed), "allow": a} if len(a) <= len(d) else {"n": len(allowed), "deny": d}


def replay(compiled, ids, stop_ids, vocab, masks, index):
    matcher = xgr.GrammarMatcher(compiled, override_stop_tokens=stop_ids, terminate_without_stop_token=False)
    bitmask = xgr.allocate_token_bitmask(1, vocab)
    refs = []
    for k in range(len(ids) + 1):
        if k > 0 and not matcher.accept_token(ids[k - 1]):
            raise SystemExit(f"xgrammar rejects token {ids[k - 1]} at {k - 1} of {ids}")
        matcher.fill_next_token_bitmask(bitmask)
        m = json.dumps(encode_mask(bitmask[0], vocab), sort_keys=True)
        if m not in index:
            index[m] = len(masks)
            masks.append(json.loads(m))
        refs.append(index[m])
    return refs, matcher.is_completed()


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else subprocess.check_output(
        [os.path.join(ROOT, "tools", "fetch-model")], text=True).strip().splitlines()[-1]
    reader = gguf.GGUFReader(path)
    eos = int(reader.fields["tokenizer.ggml.eos_token_id"].parts[-1][0])
    tok = AutoTokenizer.from_pretrained(os.path.dirname(path), gguf_file=os.path.basename(path))
    vocab = len(tok)
    info = xgr.TokenizerInfo.from_huggingface(tok, vocab_size=vocab, stop_token_ids=[eos])
    compiler = xgr.GrammarCompiler(info, max_threads=1)
    rng = random.Random(23)
    masks, index, cases = [], {}, []
    for case in CASES:
        compiled = compile_case(compiler, case)
        rec = {k: v for k, v in case.items() if k not in ("docs", "schema")}
        if "schema" in case:
            rec["spec"] = json.dumps(case["schema"], ensure_ascii=False)
        if case["kind"] == "tools":
            rec["tools"] = [{"name": t["name"], "parameters": json.dumps(t["parameters"], separators=(",", ":"))} for t in TOOLS]
        rec["sequences"] = []
        for text in case["docs"]:
            for how, ids in tokenizations(tok, text, rng):
                refs, completed = replay(compiled, ids, [eos], vocab, masks, index)
                rec["sequences"].append({"how": how, "text": text, "ids": ids, "masks": refs,
                                         "completed": completed})
        cases.append(rec)
    special = sorted(i for i, t in tok.added_tokens_decoder.items() if t.special)
    doc = {"generator": "tools/gen-xgrammar-goldens.py", "xgrammar": metadata.version("xgrammar"),
           "transformers": metadata.version("transformers"),
           "tokenizer": "transformers AutoTokenizer from " + os.path.basename(path),
           "vocab": vocab, "stop_ids": [eos], "hf_special_ids": special,
           "info_special_ids": list(info.special_token_ids), "masks": masks, "cases": cases}
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    n = sum(len(s["masks"]) for c in cases for s in c["sequences"])
    print(f"{OUT}: {len(cases)} grammars, {n} prefixes, {len(masks)} distinct masks, "
          f"{os.path.getsize(OUT)} bytes")


if __name__ == "__main__":
    main()
