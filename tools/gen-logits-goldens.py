#!/usr/bin/env python3
"""Golden logits and greedy continuations from HF transformers (the independent
reference for Pagoda's forward pass).

Makes, under tests/data/logits/:
  smollm2.json          prompts, their token ids (HF tokenizer loaded from the GGUF),
                        the argmax of the last-position logits and the 32-token greedy
                        continuation of each prompt
  smollm2_last.f32      last-position logits, float32 little-endian [num_prompts, vocab]
  tiny-llama/, tiny-qwen2/   tiny random-weight models (config.json + model.safetensors,
                        fp32) with odd sizes, made here with a fixed seed
  tiny-llama.json, tiny-qwen2.json   input ids and the logits of every position
                        (float32 values in JSON lists, [seq][pos][vocab])

transformers loads the GGUF with gguf_file=..., dequantising every tensor to fp32
and undoing llama.cpp's Q/K permutation, so its logits are the exact-fp32 reference.

Run: python3 -m venv /tmp/gold && /tmp/gold/bin/pip install -r tools/requirements-golden.txt
     /tmp/gold/bin/python tools/gen-logits-goldens.py [--model PATH.gguf]
"""
import argparse
import json
import os
import pathlib

import numpy as np
import torch
from transformers import (AutoModelForCausalLM, AutoTokenizer, LlamaConfig,
                          LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM)

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "logits"
DEFAULT_MODEL = pathlib.Path.home() / ".cache/pagoda/models/SmolLM2-135M-Instruct.Q4_1.gguf"

PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):\n    ",
    "Once upon a time, in a small village by the sea,",
    "1, 2, 3, 4, 5,",
    "<|im_start|>user\nWhat is the boiling point of water?<|im_end|>\n<|im_start|>assistant\n",
    "Le chat est sur la",
    "Paged attention splits the KV cache into fixed-size blocks so that",
    "Q: Why is the sky blue?\nA:",
]


def smollm2(model_path: pathlib.Path) -> None:
    tok = AutoTokenizer.from_pretrained(model_path.parent, gguf_file=model_path.name)
    model = AutoModelForCausalLM.from_pretrained(
        model_path.parent, gguf_file=model_path.name, dtype=torch.float32)
    model.eval()
    records, last = [], []
    for prompt in PROMPTS:
        ids = tok(prompt, add_special_tokens=False)["input_ids"]
        x = torch.tensor([ids])
        with torch.no_grad():
            logits = model(x).logits[0, -1].float().numpy()
            gen = model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=32,
                                 do_sample=False, num_beams=1, eos_token_id=None,
                                 pad_token_id=tok.eos_token_id)
        cont = gen[0, len(ids):].tolist()
        last.append(logits.astype("<f4"))
        records.append({"prompt": prompt, "ids": ids, "argmax": int(logits.argmax()),
                        "greedy": cont, "greedy_text": tok.decode(cont)})
    np.stack(last).tofile(OUT / "smollm2_last.f32")
    meta = {"model_sha256_prefix": "b179c9523d0e", "vocab": int(last[0].shape[0]),
            "prompts": records}
    (OUT / "smollm2.json").write_text(json.dumps(meta, ensure_ascii=False, indent=1) + "\n")


def tiny(name: str, model) -> None:
    torch.manual_seed(1234)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.2)
    model.eval()
    d = OUT / name
    model.save_pretrained(d, safe_serialization=True)
    for extra in ("generation_config.json",):
        if (d / extra).exists():
            os.remove(d / extra)
    g = torch.Generator().manual_seed(99)
    vocab = model.config.vocab_size
    seqs = [torch.randint(0, vocab, (n,), generator=g).tolist() for n in (1, 7, 19)]
    out = []
    for ids in seqs:
        with torch.no_grad():
            logits = model(torch.tensor([ids])).logits[0].float().numpy()
        out.append({"ids": ids, "logits": [[float(v) for v in row] for row in logits]})
    (OUT / f"{name}.json").write_text(json.dumps({"sequences": out}) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", type=pathlib.Path, default=DEFAULT_MODEL)
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    smollm2(args.model)
    common = dict(hidden_size=96, num_attention_heads=6, num_key_value_heads=2,
                  intermediate_size=200, num_hidden_layers=3, vocab_size=517,
                  max_position_embeddings=256, rms_norm_eps=1e-6, dtype="float32")
    llama = LlamaConfig(**common, rope_theta=10000.0, tie_word_embeddings=False,
                        rope_scaling={"rope_type": "llama3", "factor": 4.0,
                                      "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                      "original_max_position_embeddings": 64})
    tiny("tiny-llama", LlamaForCausalLM(llama))
    qwen = Qwen2Config(**common, rope_theta=1000000.0, tie_word_embeddings=True)
    tiny("tiny-qwen2", Qwen2ForCausalLM(qwen))


if __name__ == "__main__":
    main()
