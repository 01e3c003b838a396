#!/usr/bin/env python3
"""Writes a GGUF file of random weights in a real model's shape.

    tools/gen-dummy-gguf.py OUT.gguf --tokenizer-from MODEL.gguf
        [--shape llama-3.2-1b|smollm2-135m] [--type q4_0|q8_0] [--layers N]
        [--context N] [--seed 1]

For benchmarks that need a big model's memory traffic without downloading
it: Pagoda and llama-server load the same file (general.architecture
"llama", the llama.* hyper-parameters, llama.cpp's tensor names and
shapes). The tokenizer (every tokenizer.* key: a GPT-2 BPE vocabulary,
merges, special ids, chat template) is copied from --tokenizer-from, so both
servers can tokenize; the vocabulary size is that tokenizer's (49152 for
SmolLM2's), which replaces the shape's own (Llama-3.2-1B's is 128256). The
output matrix is tied to the embedding, as in both reference models.

Shapes: llama-3.2-1b: hidden 2048, 16 layers, 32 heads of 64, 8 KV heads,
FFN 8192, RoPE base 500000 (no llama3 frequency scaling); smollm2-135m:
hidden 576, 30 layers, 9 heads, 3 KV heads, FFN 1536, RoPE base 100000.

Weights: every matrix (and the embedding) in --type, norms F32. Quants are
uniform random bytes; block scales are chosen so the weights' standard
deviation is about 1/sqrt(fan_in) (embedding: 0.02), and norms are 1 +- 0.05,
so activations stay finite through the layers (the output is noise).
Deterministic for a given seed. Needs numpy and the PyPI `gguf` package
(tools/requirements-golden.txt). Writes tensor by tensor (memory: one
tensor at a time); ~0.8 GB and a few seconds for llama-3.2-1b in Q4_0.
"""
import argparse
import sys

import numpy as np

try:
    import gguf
except ImportError:  # pragma: no cover - an environment problem, said clearly
    sys.exit("gen-dummy-gguf: needs the PyPI package `gguf` (pip install gguf numpy)")

SHAPES = {
    "llama-3.2-1b": dict(hidden=2048, layers=16, heads=32, kv_heads=8, ffn=8192,
                         rope_base=500000.0, eps=1e-5),
    "smollm2-135m": dict(hidden=576, layers=30, heads=9, kv_heads=3, ffn=1536,
                         rope_base=100000.0, eps=1e-5),
}
TYPES = {
    "q4_0": (gguf.GGMLQuantizationType.Q4_0, gguf.LlamaFileType.MOSTLY_Q4_0),
    "q8_0": (gguf.GGMLQuantizationType.Q8_0, gguf.LlamaFileType.MOSTLY_Q8_0),
}
# Standard deviation of a block's values per unit of its scale d:
# Q4_0: d·(q − 8), q uniform in 0..15; Q8_0: d·q, q uniform in −128..127.
STD_PER_SCALE = {"q4_0": float(np.std(np.arange(16) - 8)), "q8_0": float(np.std(np.arange(-128, 128)))}


def quant_rows(rng, kind, rows, cols, std):
    """Random [rows, cols] weight in Q4_0/Q8_0 blocks: uint8 [rows, row_bytes]."""
    nb = cols // 32
    scale = (std / STD_PER_SCALE[kind]) * rng.uniform(0.8, 1.2, size=(rows, nb))
    d = scale.astype(np.float16).view(np.uint8).reshape(rows, nb, 2)
    qbytes = 16 if kind == "q4_0" else 32
    q = rng.integers(0, 256, size=(rows, nb, qbytes), dtype=np.uint8)
    return np.concatenate([d, q], axis=2).reshape(rows, nb * (2 + qbytes))


def tensor_list(s, vocab):
    """(name, rows, cols, std) of the matrices; cols is the fan-in (GGUF ne0)."""
    H, F = s["hidden"], s["ffn"]
    D = H // s["heads"]
    Q, KV = s["heads"] * D, s["kv_heads"] * D
    out = [("token_embd.weight", vocab, H, 0.02)]
    for i in range(s["layers"]):
        p = "blk.%d." % i
        out += [(p + "attn_q.weight", Q, H, H ** -0.5), (p + "attn_k.weight", KV, H, H ** -0.5),
                (p + "attn_v.weight", KV, H, H ** -0.5), (p + "attn_output.weight", H, Q, Q ** -0.5),
                (p + "ffn_gate.weight", F, H, H ** -0.5), (p + "ffn_up.weight", F, H, H ** -0.5),
                (p + "ffn_down.weight", H, F, F ** -0.5)]
    return out


def norm_list(s):
    names = ["output_norm.weight"]
    for i in range(s["layers"]):
        names += ["blk.%d.attn_norm.weight" % i, "blk.%d.ffn_norm.weight" % i]
    return names


def copy_tokenizer(reader, writer):
    """Copies every tokenizer.* key; returns the vocabulary size."""
    vocab = 0
    for key, field in reader.fields.items():
        if not key.startswith("tokenizer."):
            continue
        vtype = gguf.GGUFValueType(field.types[0])
        sub = gguf.GGUFValueType(field.types[1]) if vtype == gguf.GGUFValueType.ARRAY else None
        value = field.contents()
        if key == "tokenizer.ggml.tokens":
            vocab = len(value)
        writer.add_key_value(key, value, vtype, sub_type=sub)
    if vocab == 0:
        sys.exit("gen-dummy-gguf: %s has no tokenizer.ggml.tokens" % reader.path)
    return vocab


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--tokenizer-from", required=True, help="a GGUF whose tokenizer.* keys to copy")
    ap.add_argument("--shape", choices=sorted(SHAPES), default="llama-3.2-1b")
    ap.add_argument("--type", choices=sorted(TYPES), default="q4_0")
    ap.add_argument("--layers", type=int, default=0, help="override the layer count (0: the shape's)")
    ap.add_argument("--context", type=int, default=8192, help="llama.context_length")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    s = dict(SHAPES[a.shape])
    if a.layers > 0:
        s["layers"] = a.layers
    qtype, ftype = TYPES[a.type]
    reader = gguf.GGUFReader(a.tokenizer_from)
    w = gguf.GGUFWriter(a.out, "llama")
    w.add_name("dummy %s %s (random weights)" % (a.shape, a.type))
    w.add_file_type(ftype)
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    vocab = copy_tokenizer(reader, w)
    H = s["hidden"]
    w.add_context_length(a.context)
    w.add_embedding_length(H)
    w.add_block_count(s["layers"])
    w.add_feed_forward_length(s["ffn"])
    w.add_head_count(s["heads"])
    w.add_head_count_kv(s["kv_heads"])
    w.add_rope_dimension_count(H // s["heads"])
    w.add_rope_freq_base(s["rope_base"])
    w.add_layer_norm_rms_eps(s["eps"])
    w.add_vocab_size(vocab)

    block_size, type_size = gguf.GGML_QUANT_SIZES[qtype]
    mats = tensor_list(s, vocab)
    norms = norm_list(s)
    for name, rows, cols, _ in mats:
        nbytes = rows * (cols // block_size) * type_size
        w.add_tensor_info(name, [rows, cols * type_size // block_size], np.dtype(np.uint8), nbytes,
                          raw_dtype=qtype)
    for name in norms:
        w.add_tensor_info(name, [H], np.dtype(np.float32), 4 * H)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    rng = np.random.default_rng(a.seed)
    total = 0
    for name, rows, cols, std in mats:
        t = quant_rows(rng, a.type, rows, cols, std)
        w.write_tensor_data(t)
        total += t.nbytes
    for name in norms:
        w.write_tensor_data(rng.uniform(0.95, 1.05, size=H).astype(np.float32))
    w.close()
    params = sum(r * c for _, r, c, _ in mats)
    print("gen-dummy-gguf: %s: %s %s, %d layers, vocab %d, %.2fB parameters, %.2f GB of weights"
          % (a.out, a.shape, a.type, s["layers"], vocab, params / 1e9, total / 1e9))


if __name__ == "__main__":
    main()
