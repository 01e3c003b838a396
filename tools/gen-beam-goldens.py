#!/usr/bin/env python3
"""Golden beam-search results from HF transformers (the independent reference for
Pagoda's beam search, actors/beam_search.hpp).

Makes tests/data/beam/beam_goldens.json: for each case a prompt (its token ids from
the GGUF's tokenizer as transformers loads it, so no tokenizer mismatch), the beam
settings (num_beams, length_penalty, early_stopping, max_new_tokens), and the
num_beams returned hypotheses of
  model.generate(num_beams=k, do_sample=False, length_penalty=lp,
                 early_stopping=es, num_return_sequences=k, max_new_tokens=m)
best first: generated ids (prompt excluded, EOS kept, padding cut using the
returned beam_indices) and sequences_scores (cumulative logprob / len^lp).
The model runs in fp32 (transformers dequantises every GGUF tensor), EOS = the
GGUF's eos id; `min_gap` records the smallest score gap between consecutive
returned beams so a reader can tell near ties apart.

Run: /root/gold/bin/python tools/gen-beam-goldens.py [--model PATH.gguf]
     (the venv: python3 -m venv /tmp/gold && pip install -r tools/requirements-golden.txt)
"""
import argparse
import json
import pathlib

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "beam"
DEFAULT_MODEL = pathlib.Path.home() / ".cache/pagoda/models/SmolLM2-135M-Instruct.Q4_1.gguf"

# (prompt text or chat question, chat?, num_beams, length_penalty, early_stopping, max_new_tokens)
CASES = [
    ("The capital of France is", False, 2, 1.0, True, 16),
    ("Once upon a time, in a small village by the sea,", False, 3, 0.5, True, 20),
    ("What is the capital of Japan? Answer in one word.", True, 4, 1.0, True, 24),
    ("def fibonacci(n):\n    ", False, 4, 2.0, True, 16),
    ("Name a primary color.", True, 3, 2.0, True, 20),
    ("Q: Why is the sky blue?\nA:", False, 3, 1.0, False, 20),
    ("Say hello.", True, 2, 0.5, False, 16),
]


def prompt_ids(tok, text: str, chat: bool) -> list:
    if chat:
        rendered = tok.apply_chat_template([{"role": "user", "content": text}],
                                           add_generation_prompt=True, tokenize=False)
        return tok(rendered, add_special_tokens=False)["input_ids"]
    return tok(text, add_special_tokens=False)["input_ids"]


def run_case(model, tok, case) -> dict:
    text, chat, k, lp, es, max_new = case
    ids = prompt_ids(tok, text, chat)
    x = torch.tensor([ids])
    with torch.no_grad():
        out = model.generate(x, attention_mask=torch.ones_like(x), num_beams=k, do_sample=False,
                             length_penalty=lp, early_stopping=es, num_return_sequences=k,
                             max_new_tokens=max_new, return_dict_in_generate=True,
                             output_scores=True, pad_token_id=tok.eos_token_id)
    beams = []
    for i in range(k):
        n = int((out.beam_indices[i] >= 0).sum())
        gen = out.sequences[i, len(ids):len(ids) + n].tolist()
        beams.append({"ids": gen, "score": float(out.sequences_scores[i]),
                      "text": tok.decode(gen)})
    scores = [b["score"] for b in beams]
    gaps = [scores[i] - scores[i + 1] for i in range(len(scores) - 1)]
    return {"prompt": text, "chat": chat, "prompt_ids": ids, "num_beams": k,
            "length_penalty": lp, "early_stopping": es, "max_new_tokens": max_new,
            "min_gap": min(gaps) if gaps else None, "beams": beams}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", type=pathlib.Path, default=DEFAULT_MODEL)
    args = ap.parse_args()
    torch.manual_seed(0)
    tok = AutoTokenizer.from_pretrained(args.model.parent, gguf_file=args.model.name)
    model = AutoModelForCausalLM.from_pretrained(args.model.parent, gguf_file=args.model.name,
                                                 dtype=torch.float32)
    model.eval()
    eos = model.generation_config.eos_token_id
    cases = [run_case(model, tok, c) for c in CASES]
    OUT.mkdir(parents=True, exist_ok=True)
    meta = {"model": args.model.name, "eos_token_id": eos, "cases": cases}
    (OUT / "beam_goldens.json").write_text(json.dumps(meta, ensure_ascii=False, indent=1) + "\n")


if __name__ == "__main__":
    main()
