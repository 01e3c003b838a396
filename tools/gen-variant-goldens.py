#!/usr/bin/env python3
"""transformers' greedy continuations on llama-quantize variants of the default
model (issue 20's check: a Q4_K_M and an IQ4_XS file agree with transformers,
which dequantizes GGUF itself, as closely as the Q4_1 file does).

For each file (the Q4_1 model and its Q4_K_M / IQ4_XS variants made by
tools/make-quant-variants or llama-quantize --allow-requantize) transformers
loads the GGUF (AutoModelForCausalLM.from_pretrained(dir, gguf_file=...),
fp32: every tensor dequantized by the gguf package) and continues the prompts
of tests/data/logits/smollm2.json (their token ids, as the Q4_1 goldens use
them) greedily for 32 tokens. Written to tests/data/logits/smollm2-variants.json:
  {"files": {"Q4_1": {"file": name, "greedy": [[32 ids] per prompt]}, ...}}
The Q4_1 entry must equal smollm2.json's greedy tokens (checked here).

Run (from the repo root):
    /work/wt/gold/bin/python tools/gen-variant-goldens.py \
        [--dir ~/.cache/pagoda/models/variants] [--q4_1 ~/.cache/pagoda/models/SmolLM2-135M-Instruct.Q4_1.gguf]
"""
import argparse
import json
import pathlib

import torch
from transformers import AutoModelForCausalLM

ROOT = pathlib.Path(__file__).resolve().parent.parent
LOGITS = ROOT / "tests" / "data" / "logits"
HOME_MODELS = pathlib.Path.home() / ".cache" / "pagoda" / "models"
STEPS = 32


def greedy(path, prompts):
    model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32)
    model.eval()
    out = []
    for ids in prompts:
        x = torch.tensor([ids])
        with torch.no_grad():
            gen = model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=STEPS, do_sample=False,
                                 num_beams=1, eos_token_id=None, pad_token_id=0)
        out.append([int(t) for t in gen[0, len(ids):]])
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", type=pathlib.Path, default=HOME_MODELS / "variants")
    ap.add_argument("--q4_1", type=pathlib.Path, default=HOME_MODELS / "SmolLM2-135M-Instruct.Q4_1.gguf")
    args = ap.parse_args()
    base = json.loads((LOGITS / "smollm2.json").read_text())
    prompts = [p["ids"] for p in base["prompts"]]
    files = {"Q4_1": args.q4_1}
    for t in ["Q4_K_M", "IQ4_XS"]:
        files[t] = args.dir / f"SmolLM2-135M-Instruct.{t}.gguf"
    result = {}
    for name, path in files.items():
        g = greedy(path, prompts)
        result[name] = {"file": path.name, "size": path.stat().st_size, "greedy": g}
        same = sum(a == b for p, q in zip(g, (p["greedy"] for p in base["prompts"])) for a, b in zip(p, q))
        print(f"{name}: {path.name}, tokens equal to the Q4_1 goldens: {same}/{STEPS * len(prompts)}")
    q41 = [p["greedy"] for p in base["prompts"]]
    assert result["Q4_1"]["greedy"] == q41, "transformers' Q4_1 continuation differs from smollm2.json"
    doc = {"source": "transformers AutoModelForCausalLM gguf_file, fp32, greedy", "steps": STEPS,
           "prompts": "tests/data/logits/smollm2.json", "files": result}
    (LOGITS / "smollm2-variants.json").write_text(json.dumps(doc, separators=(",", ":")) + "\n")


if __name__ == "__main__":
    main()
