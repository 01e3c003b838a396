#!/usr/bin/env python3
"""Writes a GGUF file of random weights in a real model's shape.

    tools/gen-dummy-gguf.py OUT.gguf --tokenizer-from MODEL.gguf
        [--shape llama-3.2-1b|smollm2-135m|qwen3-4b|qwen3-30b-a3b]
        [--type q4_0|q8_0|q4_k|q6_k|q4_k_m] [--layers N] [--context N] [--seed 1]

For benchmarks that need a big model's memory traffic without downloading
it: Pagoda and llama-server load the same file (the architecture's
general.architecture and hyper-parameter keys, llama.cpp's tensor names and
shapes). The tokenizer (every tokenizer.* key: vocabulary, merges, special
ids, chat template) is copied from --tokenizer-from, so both servers can
tokenize; the vocabulary size is that tokenizer's (49152 for SmolLM2's),
which replaces the shape's own (Llama-3.2-1B's is 128256, Qwen3's 151936).

Shapes (each as its published config.json has it):
  llama-3.2-1b   llama: hidden 2048, 16 layers, 32 heads of 64, 8 KV heads,
                 FFN 8192, RoPE base 500000 (no llama3 frequency scaling), tied output
  smollm2-135m   llama: hidden 576, 30 layers, 9 heads, 3 KV heads, FFN 1536, tied
  qwen3-4b       qwen3: hidden 2560, 36 layers, 32 heads of 128, 8 KV heads, FFN 9728,
                 q/k RMSNorm per head, RoPE base 1e6, tied output
  qwen3-30b-a3b  qwen3moe: hidden 2048, 48 layers, 32 heads of 128, 4 KV heads,
                 128 experts of FFN 768, 8 routed per token, q/k norms, own output
                 matrix (use --layers to cut it to what memory allows)

Types: q4_0, q8_0, q4_k and q6_k put every matrix in that type. q4_k_m mixes
them as llama.cpp's Q4_K_M preset does for these tensors: the output matrix
(the embedding when tied) in Q6_K; attn_v and ffn_down (ffn_down_exps) in
Q6_K on the "more bits" layers (the first and last eighth, and every third
layer between), Q4_K elsewhere; every other matrix Q4_K. The MoE router
(ffn_gate_inp) and every norm are F32, as in converted files.

Weights: quant bytes are uniform random; each block's f16 scale (and min
scale) is set so the weights' standard deviation is about 1/sqrt(fan_in)
(embedding: 0.02) with a mean near zero; the std per unit of scale is
measured once per type with the `gguf` package's own dequantizer. Norms are
1 +- 0.05, so activations stay finite through the layers (the output is
noise). Deterministic for a given seed. Needs numpy and the PyPI `gguf`
package (tools/requirements-golden.txt). Writes tensor by tensor (memory:
one tensor at a time); ~0.8 GB and a few seconds for llama-3.2-1b in Q4_0.
"""
import argparse
import sys

import numpy as np

try:
    import gguf
    import gguf.quants
except ImportError:  # pragma: no cover - an environment problem, said clearly
    sys.exit("gen-dummy-gguf: needs the PyPI package `gguf` (pip install gguf numpy)")

Q = gguf.GGMLQuantizationType
SHAPES = {
    "llama-3.2-1b": dict(arch="llama", hidden=2048, layers=16, heads=32, kv_heads=8, head_dim=64,
                         ffn=8192, rope_base=500000.0, eps=1e-5, tied=True),
    "smollm2-135m": dict(arch="llama", hidden=576, layers=30, heads=9, kv_heads=3, head_dim=64,
                         ffn=1536, rope_base=100000.0, eps=1e-5, tied=True),
    "qwen3-4b": dict(arch="qwen3", hidden=2560, layers=36, heads=32, kv_heads=8, head_dim=128,
                     ffn=9728, rope_base=1000000.0, eps=1e-6, tied=True, qk_norm=True),
    "qwen3-30b-a3b": dict(arch="qwen3moe", hidden=2048, layers=48, heads=32, kv_heads=4,
                          head_dim=128, ffn=6144, rope_base=1000000.0, eps=1e-6, tied=False,
                          qk_norm=True, experts=128, experts_used=8, expert_ffn=768),
}
PRESETS = {"q4_0": (Q.Q4_0, gguf.LlamaFileType.MOSTLY_Q4_0),
           "q8_0": (Q.Q8_0, gguf.LlamaFileType.MOSTLY_Q8_0),
           "q4_k": (Q.Q4_K, gguf.LlamaFileType.MOSTLY_Q4_K_S),
           "q6_k": (Q.Q6_K, gguf.LlamaFileType.MOSTLY_Q6_K),
           "q4_k_m": (None, gguf.LlamaFileType.MOSTLY_Q4_K_M)}
# Byte offsets of a block's f16 scale d and (for the K-quants with minimums)
# of its min scale dmin, and dmin/d so a block's values average near zero:
# Q4_K: d*sc*q - dmin*m with q in 0..15, sc and m in 0..63 -> dmin = 7.5 d.
BLOCK_SCALES = {Q.Q4_0: (0, None, 0.0), Q.Q8_0: (0, None, 0.0),
                Q.Q4_K: (0, 2, 7.5), Q.Q6_K: (208, None, 0.0)}


def per_unit_std(qtype):
    """Std of the dequantized values of random blocks whose d is 1."""
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    rng = np.random.default_rng(0)
    raw = rng.integers(0, 256, size=(256, size), dtype=np.uint8)
    set_scales(raw, qtype, np.ones((256, 1)))
    return float(np.std(gguf.quants.dequantize(raw, qtype)))


def set_scales(raw, qtype, d):
    """Writes scale d ([blocks, 1] floats) into each block of raw ([blocks, size] uint8)."""
    d_at, dmin_at, dmin_ratio = BLOCK_SCALES[qtype]
    raw[:, d_at:d_at + 2] = d.astype(np.float16).view(np.uint8).reshape(-1, 2)
    if dmin_at is not None:
        raw[:, dmin_at:dmin_at + 2] = (d * dmin_ratio).astype(np.float16).view(np.uint8).reshape(-1, 2)


UNIT_STD = {}


def quant_rows(rng, qtype, rows, cols, std):
    """Random [rows, cols] weight in qtype blocks: uint8 [rows, row_bytes]."""
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    if qtype not in UNIT_STD:
        UNIT_STD[qtype] = per_unit_std(qtype)
    nb = rows * (cols // block)
    raw = rng.integers(0, 256, size=(nb, size), dtype=np.uint8)
    set_scales(raw, qtype, (std / UNIT_STD[qtype]) * rng.uniform(0.8, 1.2, size=(nb, 1)))
    return raw.reshape(rows, (cols // block) * size)


def more_bits(layer, layers):
    """The layers llama.cpp's K-quant mixes give more bits (first and last eighth, every third between)."""
    return layer < layers // 8 or layer >= 7 * layers // 8 or (layer - layers // 8) % 3 == 2


def type_of(preset, name, layer, layers):
    """The quant type of matrix `name` of `layer` (-1: not in a layer) under a preset."""
    fixed = PRESETS[preset][0]
    if fixed is not None:
        return fixed
    if name in ("output.weight",) or (name == "token_embd.weight" and layer == -2):
        return Q.Q6_K
    if name.endswith(("attn_v.weight", "ffn_down.weight", "ffn_down_exps.weight")):
        return Q.Q6_K if more_bits(layer, layers) else Q.Q4_K
    return Q.Q4_K


def tensor_list(s, vocab):
    """(name, layer, experts, rows, cols, std) of the matrices; cols is the fan-in (GGUF ne0).

    layer -2 marks the embedding when it doubles as the output matrix."""
    H, D = s["hidden"], s["head_dim"]
    Qd, KV = s["heads"] * D, s["kv_heads"] * D
    out = [("token_embd.weight", -2 if s["tied"] else -1, 0, vocab, H, 0.02)]
    for i in range(s["layers"]):
        p = "blk.%d." % i
        out += [(p + "attn_q.weight", i, 0, Qd, H, H ** -0.5), (p + "attn_k.weight", i, 0, KV, H, H ** -0.5),
                (p + "attn_v.weight", i, 0, KV, H, H ** -0.5), (p + "attn_output.weight", i, 0, H, Qd, Qd ** -0.5)]
        if "experts" in s:
            E, F = s["experts"], s["expert_ffn"]
            out += [(p + "ffn_gate_exps.weight", i, E, F, H, H ** -0.5),
                    (p + "ffn_up_exps.weight", i, E, F, H, H ** -0.5),
                    (p + "ffn_down_exps.weight", i, E, H, F, F ** -0.5)]
        else:
            F = s["ffn"]
            out += [(p + "ffn_gate.weight", i, 0, F, H, H ** -0.5), (p + "ffn_up.weight", i, 0, F, H, H ** -0.5),
                    (p + "ffn_down.weight", i, 0, H, F, F ** -0.5)]
    if not s["tied"]:
        out.append(("output.weight", -1, 0, vocab, H, H ** -0.5))
    return out


def f32_list(s):
    """(name, shape, kind) of the F32 tensors: norms ("norm") and MoE routers ("router")."""
    H, D = s["hidden"], s["head_dim"]
    out = [("output_norm.weight", [H], "norm")]
    for i in range(s["layers"]):
        p = "blk.%d." % i
        out += [(p + "attn_norm.weight", [H], "norm"), (p + "ffn_norm.weight", [H], "norm")]
        if s.get("qk_norm"):
            out += [(p + "attn_q_norm.weight", [D], "norm"), (p + "attn_k_norm.weight", [D], "norm")]
        if "experts" in s:
            out.append((p + "ffn_gate_inp.weight", [s["experts"], H], "router"))
    return out


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


def add_hparams(w, s, vocab, context):
    w.add_context_length(context)
    w.add_embedding_length(s["hidden"])
    w.add_block_count(s["layers"])
    w.add_feed_forward_length(s["ffn"])
    w.add_head_count(s["heads"])
    w.add_head_count_kv(s["kv_heads"])
    w.add_key_length(s["head_dim"])
    w.add_value_length(s["head_dim"])
    w.add_rope_dimension_count(s["head_dim"])
    w.add_rope_freq_base(s["rope_base"])
    w.add_layer_norm_rms_eps(s["eps"])
    w.add_vocab_size(vocab)
    if "experts" in s:
        w.add_expert_count(s["experts"])
        w.add_expert_used_count(s["experts_used"])
        w.add_expert_feed_forward_length(s["expert_ffn"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--tokenizer-from", required=True, help="a GGUF whose tokenizer.* keys to copy")
    ap.add_argument("--shape", choices=sorted(SHAPES), default="llama-3.2-1b")
    ap.add_argument("--type", choices=sorted(PRESETS), default="q4_0")
    ap.add_argument("--layers", type=int, default=0, help="override the layer count (0: the shape's)")
    ap.add_argument("--context", type=int, default=8192, help="context_length key")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    s = dict(SHAPES[a.shape])
    if a.layers > 0:
        s["layers"] = a.layers
    reader = gguf.GGUFReader(a.tokenizer_from)
    w = gguf.GGUFWriter(a.out, s["arch"])
    w.add_name("dummy %s %s (random weights)" % (a.shape, a.type))
    w.add_file_type(PRESETS[a.type][1])
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    vocab = copy_tokenizer(reader, w)
    add_hparams(w, s, vocab, a.context)

    mats = [(m, type_of(a.type, m[0], m[1], s["layers"])) for m in tensor_list(s, vocab)]
    f32s = f32_list(s)
    for (name, _, experts, rows, cols, _), qt in mats:
        block, size = gguf.GGML_QUANT_SIZES[qt]
        shape = ([experts] if experts else []) + [rows, cols // block * size]
        w.add_tensor_info(name, shape, np.dtype(np.uint8), int(np.prod(shape)), raw_dtype=qt)
    for name, shape, _ in f32s:
        w.add_tensor_info(name, shape, np.dtype(np.float32), 4 * int(np.prod(shape)))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    rng = np.random.default_rng(a.seed)
    total, by_type = 0, {}
    for (name, _, experts, rows, cols, std), qt in mats:
        t = np.stack([quant_rows(rng, qt, rows, cols, std) for _ in range(experts)]) if experts \
            else quant_rows(rng, qt, rows, cols, std)
        w.write_tensor_data(t)
        total += t.nbytes
        by_type[qt.name] = by_type.get(qt.name, 0) + t.nbytes
    for name, shape, kind in f32s:
        if kind == "norm":
            w.write_tensor_data(rng.uniform(0.95, 1.05, size=shape).astype(np.float32))
        else:
            w.write_tensor_data(rng.normal(0.0, shape[1] ** -0.5, size=shape).astype(np.float32))
    w.close()
    params = sum(r * c * max(e, 1) for (_, _, e, r, c, _), _ in mats)
    mix = ", ".join("%s %.2f GB" % (k, v / 1e9) for k, v in sorted(by_type.items()))
    print("gen-dummy-gguf: %s: %s %s, %d layers, vocab %d, %.2fB parameters, %.2f GB of weights (%s)"
          % (a.out, a.shape, a.type, s["layers"], vocab, params / 1e9, total / 1e9, mix))


if __name__ == "__main__":
    main()
