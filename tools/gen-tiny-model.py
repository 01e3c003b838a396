#!/usr/bin/env python3
"""Writes a tiny random Llama model with a real tokenizer, as an HF directory.

    tools/gen-tiny-model.py OUT_DIR [--tokenizer PATH/tokenizer.model] [--seed 1]

OUT_DIR gets config.json (model/configs/tiny/config.json: 2 layers, hidden
128, 2 query heads of 64, 1 KV head, tied embeddings, vocab 32000),
tokenizer.model (the Llama-2 SentencePiece model, default
/work/shared/tokenizers/llama2-spm/tokenizer.model; its vocabulary size must
equal the config's) and model.safetensors (every tensor BF16, HF names,
values uniform in +-sqrt(3/fan_in), norms 1 +- 0.1, embedding +-1; a fixed
seed, so the same command gives the same bytes). About 8.5 MiB.

Plain python3 (no numpy): it runs on the build machine and on a bare GPU box.
The GPU bundle (tools/gpu-bundle) uses it; pagoda loads the result through
the ordinary safetensors path (not --load-format dummy).
"""
import argparse
import json
import math
import os
import random
import shutil
import struct
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_TOKENIZER = "/work/shared/tokenizers/llama2-spm/tokenizer.model"


def bf16_bytes(values):
    """Round-to-nearest-even fp32 -> bf16, little-endian bytes."""
    packed = struct.pack("<%df" % len(values), *values)
    words = struct.unpack("<%dI" % len(values), packed)
    out = bytearray(2 * len(words))
    for i, u in enumerate(words):
        r = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
        out[2 * i] = r & 0xFF
        out[2 * i + 1] = (r >> 8) & 0xFF
    return bytes(out)


def uniform(rng, n, amp, centre=0.0):
    return [centre + amp * (2.0 * rng.random() - 1.0) for _ in range(n)]


def tensors(cfg, rng):
    """(name, shape, values) in a fixed order."""
    H, I, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    D = cfg.get("head_dim", H // cfg["num_attention_heads"])
    q, kv = cfg["num_attention_heads"] * D, cfg["num_key_value_heads"] * D
    yield "model.embed_tokens.weight", [V, H], uniform(rng, V * H, 1.0)
    for l in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % l
        yield p + "input_layernorm.weight", [H], uniform(rng, H, 0.1, 1.0)
        for name, rows in (("q_proj", q), ("k_proj", kv), ("v_proj", kv)):
            yield p + "self_attn." + name + ".weight", [rows, H], uniform(rng, rows * H, math.sqrt(3.0 / H))
        yield p + "self_attn.o_proj.weight", [H, q], uniform(rng, H * q, math.sqrt(3.0 / q))
        yield p + "post_attention_layernorm.weight", [H], uniform(rng, H, 0.1, 1.0)
        for name in ("gate_proj", "up_proj"):
            yield p + "mlp." + name + ".weight", [I, H], uniform(rng, I * H, math.sqrt(3.0 / H))
        yield p + "mlp.down_proj.weight", [H, I], uniform(rng, H * I, math.sqrt(3.0 / I))
    yield "model.norm.weight", [H], uniform(rng, H, 0.1, 1.0)
    if not cfg.get("tie_word_embeddings", False):
        yield "lm_head.weight", [V, H], uniform(rng, V * H, 4.0 * math.sqrt(3.0 / H))


def write_safetensors(path, cfg, seed):
    rng = random.Random(seed)
    header, blobs, offset = {"__metadata__": {"format": "pt", "generator": "pagoda gen-tiny-model"}}, [], 0
    for name, shape, values in tensors(cfg, rng):
        blob = bf16_bytes(values)
        header[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)  # the data starts 8-byte aligned
    with open(path + ".tmp", "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)
    os.replace(path + ".tmp", path)


def spm_vocab_size(path):
    """Number of pieces of a SentencePiece ModelProto (field 1, repeated)."""
    data = open(path, "rb").read()
    i, n = 0, 0

    def varint(i):
        v, shift = 0, 0
        while True:
            b = data[i]
            i += 1
            v |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                return v, i

    while i < len(data):
        key, i = varint(i)
        field, wire = key >> 3, key & 7
        if wire == 2:
            ln, i = varint(i)
            i += ln
            n += field == 1
        elif wire == 0:
            _, i = varint(i)
        elif wire == 5:
            i += 4
        elif wire == 1:
            i += 8
        else:
            raise ValueError("%s: unexpected protobuf wire type %d" % (path, wire))
    return n


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out_dir")
    ap.add_argument("--tokenizer", default=DEFAULT_TOKENIZER)
    ap.add_argument("--config", default=os.path.join(ROOT, "model", "configs", "tiny", "config.json"))
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    cfg = json.load(open(a.config))
    if not os.path.isfile(a.tokenizer):
        sys.exit("gen-tiny-model: no tokenizer at %s (pass --tokenizer)" % a.tokenizer)
    n = spm_vocab_size(a.tokenizer)
    if n != cfg["vocab_size"]:
        sys.exit("gen-tiny-model: %s has %d pieces, the config says vocab_size %d" % (a.tokenizer, n, cfg["vocab_size"]))
    os.makedirs(a.out_dir, exist_ok=True)
    shutil.copyfile(a.config, os.path.join(a.out_dir, "config.json"))
    shutil.copyfile(a.tokenizer, os.path.join(a.out_dir, "tokenizer.model"))
    write_safetensors(os.path.join(a.out_dir, "model.safetensors"), cfg, a.seed)
    size = sum(os.path.getsize(os.path.join(a.out_dir, f)) for f in os.listdir(a.out_dir))
    print("gen-tiny-model: %s (%.1f MiB)" % (a.out_dir, size / 2**20))


if __name__ == "__main__":
    main()
