#!/usr/bin/env python3
"""Generates the chat-template goldens in tests/data/chat/ with jinja2, exactly
as transformers' tokenizer.apply_chat_template(tokenize=False) renders them.

Makes:
  tests/data/chat/smollm2.jinja            SmolLM2's template, read from the GGUF
                                           (tokenizer.chat_template)
  tests/data/chat/<name>.jinja             copies of ../shared/chat-templates/*.jinja
  tests/data/chat/qwen3.jinja              Qwen/Qwen3-0.6B's tokenizer_config.json
                                           chat_template, as llama.cpp vendors it
                                           (models/templates/Qwen-Qwen3-0.6B.jinja;
                                           env PAGODA_LLAMA_CPP: the llama.cpp sources;
                                           when unset the existing copy is reused)
  tests/data/chat/phi-3.5-mini-instruct.jinja  Phi-3.5-mini-instruct's template
                                           (<|user|>..<|end|><|assistant|>), as
                                           llama.cpp vendors it (models/templates/
                                           microsoft-Phi-3.5-mini-instruct.jinja; same env)
  tests/data/chat/gemma-2-it.jinja         google/gemma-2-2b-it's template (<start_of_turn>user ..
                                           <end_of_turn>, assistant as "model"), as llama.cpp
                                           vendors it (models/templates/google-gemma-2-2b-it.jinja;
                                           same env)
  tests/data/chat/llama-3.2.jinja          meta-llama/Llama-3.2-3B-Instruct's template, as
                                           llama.cpp vendors it (models/templates/
                                           meta-llama-Llama-3.2-3B-Instruct.jinja; same env)
  tests/data/chat/mistral-nemo.cases.json  cases of mistral-nemo.jinja (tools/gen-tool-chat-goldens.py
                                           copies the template)
  tests/data/chat/gemma-3-it.jinja         google/gemma-3-*-it's and Mixtral-8x7B-Instruct-v0.1's
  tests/data/chat/mixtral-instruct.jinja   templates, from tools/chat_templates_quoted.py (which
                                           says where each text comes from)
  tests/data/chat/<name>.cases.json        conversations and the rendered prompt
                                           (or the error jinja2 raised) per template
  tests/data/chat/snippets.json            small templates with jinja2's output/error
                                           (unit tests of the interpreter: hand-written
                                           ones and seeded random ones from
                                           tools/chat_golden_fuzz.py), plus constructs
                                           our interpreter must reject

Rendering goes through a real transformers tokenizer (PreTrainedTokenizerFast
whose only special tokens are the family's bos/eos), so message normalization,
reasoning aliasing, tools/documents defaults and the sandboxed environment are
transformers' own. strftime_now is pinned to 2024-07-26 14:05:09.

Run from the repository root:
  /root/gold/bin/python tools/gen-chat-goldens.py
(env PAGODA_MODEL: the SmolLM2 GGUF; default
~/.cache/pagoda/models/SmolLM2-135M-Instruct.Q4_1.gguf; when absent an existing
tests/data/chat/smollm2.jinja is reused.) Deterministic: same inputs, same files.
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
SHARED = ROOT.parent / "shared" / "chat-templates"
MODEL = os.environ.get("PAGODA_MODEL", os.path.expanduser(
    "~/.cache/pagoda/models/SmolLM2-135M-Instruct.Q4_1.gguf"))
FIXED_NOW = (2024, 7, 26, 14, 5, 9)

sys.path.insert(0, str(ROOT / "tools"))
from chat_golden_cases import CONVERSATIONS, SNIPPET_CONTEXT, SNIPPETS, UNSUPPORTED  # noqa: E402
from chat_templates_quoted import QUOTED  # noqa: E402
from chat_golden_fuzz import expression_templates, scope_templates, whitespace_templates  # noqa: E402

from tokenizers import Tokenizer, models  # noqa: E402
from transformers import PreTrainedTokenizerFast  # noqa: E402
from transformers.utils import chat_template_utils as ctu  # noqa: E402


class _FixedDatetime(_dt.datetime):
    @classmethod
    def now(cls, tz=None):
        return cls(*FIXED_NOW)


ctu.datetime = _FixedDatetime  # strftime_now reads chat_template_utils.datetime

# Family special tokens (bos, eos) as each model's tokenizer supplies them.
FAMILIES = {
    "smollm2": ("<|im_start|>", "<|im_end|>"),  # GGUF bos id 1 / eos id 2
    "deepseek-r1-distill-qwen": ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
    "phi-4-mini-instruct": ("<|endoftext|>", "<|endoftext|>"),
    # Qwen3's tokenizer_config.json: bos_token null (the template uses none), eos <|im_end|>.
    "qwen3": ("<|endoftext|>", "<|im_end|>"),
    # Phi-3.5-mini-instruct's tokenizer_config.json: bos <s>, eos <|endoftext|>.
    "phi-3.5-mini-instruct": ("<s>", "<|endoftext|>"),
    # gemma-2-2b-it's tokenizer_config.json: bos <bos>, eos <eos> (turns end with <end_of_turn>).
    "gemma-2-it": ("<bos>", "<eos>"),
    # gemma-3-*-it's tokenizer_config.json: bos <bos>, eos <eos>.
    "gemma-3-it": ("<bos>", "<eos>"),
    # Mixtral-8x7B-Instruct-v0.1's tokenizer_config.json: bos <s>, eos </s>.
    "mixtral-instruct": ("<s>", "</s>"),
    # Llama-3.2-*-Instruct's tokenizer_config.json: bos <|begin_of_text|>, eos <|eot_id|>.
    "llama-3.2": ("<|begin_of_text|>", "<|eot_id|>"),
    # Mistral-Nemo-Instruct-2407's tokenizer_config.json: bos <s>, eos </s>.
    "mistral-nemo": ("<s>", "</s>"),
    "stress": ("<s>", "</s>"),
}


def error_record(e):
    return {"error": str(e), "error_type": type(e).__name__}


def extract_smollm2():
    dst = OUT / "smollm2.jinja"
    if os.path.exists(MODEL):
        import gguf
        reader = gguf.GGUFReader(MODEL)
        dst.write_text(reader.fields["tokenizer.chat_template"].contents(), encoding="utf-8")
    elif not dst.exists():
        sys.exit(f"no model at {MODEL} and no existing {dst}")


# Templates as llama.cpp vendors them (models/templates/), by our file name.
VENDORED = {
    "qwen3.jinja": "Qwen-Qwen3-0.6B.jinja",
    "phi-3.5-mini-instruct.jinja": "microsoft-Phi-3.5-mini-instruct.jinja",
    "gemma-2-it.jinja": "google-gemma-2-2b-it.jinja",
    "llama-3.2.jinja": "meta-llama-Llama-3.2-3B-Instruct.jinja",
}


def copy_vendored():
    """Copies VENDORED from PAGODA_LLAMA_CPP; without it the existing copies stay."""
    src = os.environ.get("PAGODA_LLAMA_CPP")
    for ours, theirs in VENDORED.items():
        if src:
            shutil.copyfile(pathlib.Path(src) / "models" / "templates" / theirs, OUT / ours)
        elif not (OUT / ours).exists():
            sys.exit(f"no PAGODA_LLAMA_CPP and no existing tests/data/chat/{ours}")


def write_quoted():
    for name, text in QUOTED.items():
        (OUT / f"{name}.jinja").write_text(text, encoding="utf-8")


def copy_shared():
    if not SHARED.is_dir():
        print(f"note: {SHARED} absent, keeping the copies in {OUT}")
        return
    for src in sorted(SHARED.glob("*.jinja")):
        shutil.copyfile(src, OUT / src.name)


def render_case(template, bos, eos, case):
    tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.BPE()), bos_token=bos, eos_token=eos)
    tok.chat_template = template
    kwargs = dict(case.get("extra_context", {}))
    try:
        out = tok.apply_chat_template(copy.deepcopy(case["messages"]), tools=copy.deepcopy(case.get("tools")),
                                      add_generation_prompt=case.get("add_generation_prompt", True),
                                      tokenize=False, **kwargs)
        return {"expected": out}
    except Exception as e:  # the golden records jinja2's (or transformers') error
        return error_record(e)


def write_json(path, obj):
    path.write_text(json.dumps(obj, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


def gen_conversations():
    for name, (bos, eos) in FAMILIES.items():
        template = (OUT / f"{name}.jinja").read_text(encoding="utf-8")
        cases = []
        for case in CONVERSATIONS[name]:
            rec = {"name": case["name"], "messages": case["messages"],
                   "tools": case.get("tools"), "add_generation_prompt": case.get("add_generation_prompt", True),
                   "extra_context": case.get("extra_context", {})}
            rec.update(render_case(template, bos, eos, case))
            cases.append(rec)
        n_err = sum("error" in c for c in cases)
        print(f"{name}: {len(cases)} cases ({n_err} errors)")
        write_json(OUT / f"{name}.cases.json", {"template": f"{name}.jinja", "bos_token": bos, "eos_token": eos,
                                                "now": list(FIXED_NOW), "cases": cases})


def gen_snippets():
    records = []
    generated = expression_templates(1, 250) + whitespace_templates(2, 100) + scope_templates(3, 100)
    for src in SNIPPETS + generated:
        rec = {"template": src}
        try:
            compiled = ctu._compile_jinja_template(src)
        except Exception as e:
            rec.update(error_record(e))
            rec["phase"] = "compile"
            records.append(rec)
            continue
        try:
            rec["expected"] = compiled.render(**copy.deepcopy(SNIPPET_CONTEXT))
        except Exception as e:
            rec.update(error_record(e))
            rec["phase"] = "render"
        if " at 0x" in rec.get("expected", ""):
            continue  # jinja2 printed a memory address: not reproducible
        records.append(rec)
    n_err = sum("error" in r for r in records)
    print(f"snippets: {len(records)} ({n_err} errors), unsupported: {len(UNSUPPORTED)}")
    write_json(OUT / "snippets.json", {"context": SNIPPET_CONTEXT, "now": list(FIXED_NOW),
                                       "snippets": records, "unsupported": UNSUPPORTED})


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    extract_smollm2()
    copy_shared()
    copy_vendored()
    write_quoted()
    gen_conversations()
    gen_snippets()


if __name__ == "__main__":
    main()
