#!/usr/bin/env python3
"""Tiny random models of the architectures beyond Llama/Qwen2, made with
transformers' own config and model classes, their HF fp32 logits, and their
GGUF conversions by llama.cpp's convert_hf_to_gguf.py (the references for the
architecture descriptions of model/architecture.hpp).

Makes, under tests/data/logits/:
  tiny-qwen3/          Qwen3 (per-head q/k RMSNorm, explicit head_dim 32 with
                       hidden 96 / 6 heads, GQA 6:2, tied embeddings, no bias):
                       config.json + model.safetensors (fp32)
  tiny-mistral-hd/     Mistral-Nemo style: head_dim 32 != hidden 96 / 6 heads,
                       untied, rope_theta 1e6
  tiny-llama32/        Llama-3.2 style: llama3 rope scaling (factor 32, original
                       context 64, so that positions of the 19-token sequence
                       cross the smoothing band), tied embeddings, theta 5e5
  tiny-phi3/           Phi-3 / Phi-4-mini style: fused qkv_proj and
                       gate_up_proj, partial_rotary_factor 0.75 (12 of 16 head
                       dims rotated), longrope with short/long factors and
                       original context 16 of 256: the 1- and 7-token
                       sequences use short_factor, the 19-token one (longer than
                       16) long_factor; attention factor sqrt(1 + ln 16 / ln 16)
  tiny-gemma2/         Gemma 2: GeGLU (gelu_pytorch_tanh), (1 + w) RMSNorms with
                       post-attention and post-FFN norms, embedding x sqrt(96),
                       attention soft-cap 4 and final soft-cap 2.5 (small enough
                       to bite on these random weights), query_pre_attn_scalar
                       24 != head_dim 32, sliding window 5 on layers 0 and 2
                       (layer 1 global), tied embeddings
  tiny-gemma3/         Gemma 3 text (Gemma3ForCausalLM): as Gemma 2 without the
                       attention soft-cap, plus per-head q/k (1 + w) norms; six
                       layers, five windowed (window 6) and layer 5 global;
                       global RoPE base 1e5 with linear scaling 4, local base
                       1e4 unscaled; query_pre_attn_scalar 20 != head_dim 32;
                       final soft-cap 3
  tiny-mixtral/        Mixtral (MixtralForCausalLM): 4 experts, top 2 (softmax
                       over all experts, the top 2 renormalised), expert
                       intermediate 32, hidden 256 (so that llama-quantize can
                       give the expert gate/up and attention rows K-quants),
                       two layers, vocabulary 300, tied embeddings
  tiny-qwen3moe/       Qwen3-MoE (Qwen3MoeForCausalLM): the same sizes with
                       per-head q/k norms and norm_topk_prob = true;
                       tiny-qwen3moe-nonorm.json holds the logits of the same
                       weights with norm_topk_prob = false (the top-k
                       probabilities used as they are)
  moe-gguf/<name>-{f32,q8_0,q4_k_m}.gguf  the two MoE models as llama.cpp's
                       converter writes them (F32; experts merged into 3-D
                       ffn_{gate,up,down}_exps, Mixtral as arch "llama") and as
                       llama-quantize (--llama-quantize) makes Q8_0 and Q4_K_M
                       of that F32 file (committed: a few hundred KB to 1.5 MB);
  moe-gguf/tiny-qwen3moe-mix{a,b,c}.gguf  Q8_0 files whose expert tensors
                       take, layer by layer, Q2_K, Q3_K, Q4_0, Q4_1 / Q5_K,
                       Q6_K, Q5_1, IQ4_NL / IQ4_XS, BF16, F16, Q5_0 (MIXES)
  tiny-<moe>-<variant>-dequant.json  HF's logits of the weights those
                       quantized files hold (dequantized by the gguf package,
                       llama's Q/K un-permuted, experts split), the reference
                       that isolates Pagoda's reading of the files from the
                       quantization's own error
                       For both, the script checks that the router spreads
                       the tokens over every expert of every layer and prints
                       the counts.
  tiny-mistral-swa/    sliding windows of the families other than Gemma, as
  tiny-qwen3-swa/      transformers applies them (HF directories only: llama.cpp
  tiny-phi3-swa/       applies no window for these GGUF architectures, so there
                       is no GGUF reference): Mistral with window 5 on every
                       layer; Qwen3 with use_sliding_window, window 4 and
                       max_window_layers 1 (layers 1 and 2 windowed, layer 0
                       global); Phi-3 (default rope) with window 6; hidden 64,
                       4 heads (2 kv) of 16, MLP 96, vocabulary 160. The script
                       checks that each window changes the 19-token sequence's
                       logits (the same weights without the window)
  tiny-<name>.json     input ids and the HF logits of every position
                       (float32 values in JSON lists, [seq][pos][vocab])
  tiny-<name>.gguf.json  what llama.cpp's converter writes for the model, as F32
                       and as F16: every tensor's name, GGUF dims and type (and
                       the values of rope_freqs.weight, llama3 scaling), and
                       the metadata keys with their values (token lists left
                       out). The GGUF files themselves are not committed
                       (*.gguf is git-ignored); tests/tiny_gguf_writer.hpp makes
                       them at test time from the committed safetensors and the
                       test checks its output against this listing.

The converter needs a tokenizer; these models have none (the forward pass is
what is checked), so the converter's set_vocab is replaced by a no-op: the
GGUF holds no tokenizer.ggml.* keys and its vocabulary size comes from
token_embd.weight.

Run (the venv of tools/requirements-golden.txt plus the PyPI `gguf` package):
    /work/wt/gold/bin/python tools/gen-arch-goldens.py \
        --llama-cpp /path/to/llama.cpp \  # the sources: convert_hf_to_gguf.py, conversion/, gguf-py/
        --llama-quantize /path/to/llama-quantize  # the MoE models' quantized variants
"""
import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

import torch
from transformers import (Gemma2Config, Gemma2ForCausalLM, Gemma3ForCausalLM, Gemma3TextConfig,
                          LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM,
                          MixtralConfig, MixtralForCausalLM, Phi3Config, Phi3ForCausalLM,
                          Qwen3Config, Qwen3ForCausalLM, Qwen3MoeConfig, Qwen3MoeForCausalLM)

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "logits"

COMMON = dict(hidden_size=96, num_attention_heads=6, num_key_value_heads=2, head_dim=32,
              intermediate_size=200, num_hidden_layers=3, vocab_size=517,
              max_position_embeddings=256, rms_norm_eps=1e-6, dtype="float32")

# Runs llama.cpp's converter with set_vocab replaced by a no-op.
CONVERT = r"""
import sys
sys.path[:0] = [sys.argv[1], sys.argv[1] + "/gguf-py"]
import conversion.base as base
base.TextModel.set_vocab = lambda self: None
import conversion.qwen as qwen, conversion.llama as llama, conversion.phi as phi
import conversion.gemma as gemma
for cls in (qwen.Qwen2Model, qwen.Qwen3Model, llama.LlamaModel, phi.Phi3MiniModel,
            gemma.Gemma2Model, gemma.Gemma3Model, qwen.Qwen2MoeModel, qwen.Qwen3MoeModel):
    cls.set_vocab = lambda self: None
import convert_hf_to_gguf
sys.argv = ["convert_hf_to_gguf.py"] + sys.argv[2:]
convert_hf_to_gguf.main()
"""


MOE = dict(hidden_size=256, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
           num_hidden_layers=2, vocab_size=300, max_position_embeddings=256, rms_norm_eps=1e-6,
           dtype="float32", num_experts_per_tok=2, tie_word_embeddings=True)


def logits_of(model, seqs):
    out = []
    for ids in seqs:
        with torch.no_grad():
            logits = model(torch.tensor([ids])).logits[0].float().numpy()
        out.append({"ids": ids, "logits": [[float(v) for v in row] for row in logits]})
    return out


def check_routing(name, model, seqs):
    """Every expert of every layer gets some of the tokens (top-k of HF's router)."""
    ids = torch.tensor([sum(seqs, [])])
    with torch.no_grad():
        router = model(ids, output_router_logits=True).router_logits  # per layer [T, E]
    k = model.config.num_experts_per_tok
    for layer, logits in enumerate(router):
        chosen = torch.topk(torch.softmax(logits.float(), -1), k, -1).indices
        counts = torch.bincount(chosen.flatten(), minlength=logits.shape[-1]).tolist()
        print(f"{name} layer {layer}: tokens per expert {counts}")
        assert min(counts) > 0, f"{name}: layer {layer} leaves an expert unused"


# Files whose expert tensors, layer by layer, take every other supported type
# (the rest Q8_0): with q8_0 and q4_k_m (Q4_K, Q5_0, Q8_0) and the F32 file,
# every type the loader supports appears in an expert tensor.
MIXES = {
    "mixa": {"blk.0.ffn_(gate|up)_exps": "q2_k", "blk.1.ffn_(gate|up)_exps": "q3_k",
             "blk.0.ffn_down_exps": "q4_0", "blk.1.ffn_down_exps": "q4_1"},
    "mixb": {"blk.0.ffn_(gate|up)_exps": "q5_k", "blk.1.ffn_(gate|up)_exps": "q6_k",
             "blk.0.ffn_down_exps": "q5_1", "blk.1.ffn_down_exps": "iq4_nl"},
    "mixc": {"blk.0.ffn_(gate|up)_exps": "iq4_xs", "blk.1.ffn_(gate|up)_exps": "bf16",
             "blk.0.ffn_down_exps": "f16", "blk.1.ffn_down_exps": "q5_0"},
}


def quantize(f32, quantizer, name, out_dir, mixes):
    """The variants' names: q8_0, q4_k_m and (mixes) the MIXES."""
    made = []
    for qtype in ("Q8_0", "Q4_K_M"):
        dst = out_dir / f"{name}-{qtype.lower()}.gguf"
        subprocess.run([str(quantizer), str(f32), str(dst), qtype], check=True,
                       stdout=subprocess.DEVNULL)
        made.append(qtype.lower())
    for mix, types in (MIXES.items() if mixes else []):
        args = sum((["--tensor-type", pattern.replace(".", r"\.") + "=" + t] for pattern, t in types.items()), [])
        subprocess.run([str(quantizer), *args, str(f32), str(out_dir / f"{name}-{mix}.gguf"), "Q8_0"],
                       check=True, stdout=subprocess.DEVNULL)
        made.append(mix)
    return made


def hf_name_of(gguf_name, mixtral):
    """The HF (per-expert) name of a GGUF tensor: a name, or for the 3-D
    expert tensors a format string of the expert index."""
    fixed = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
             "output.weight": "lm_head.weight"}
    if gguf_name in fixed:
        return fixed[gguf_name]
    _, layer, rest = gguf_name.split(".", 2)
    moe = "block_sparse_moe" if mixtral else "mlp"
    exps = {"ffn_gate_exps": "w1" if mixtral else "gate_proj", "ffn_up_exps": "w3" if mixtral else "up_proj",
            "ffn_down_exps": "w2" if mixtral else "down_proj"}
    parts = {"attn_norm": "input_layernorm", "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
             "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj", "attn_q_norm": "self_attn.q_norm",
             "attn_k_norm": "self_attn.k_norm", "ffn_norm": "post_attention_layernorm",
             "ffn_gate_inp": f"{moe}.gate", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
             "ffn_down": "mlp.down_proj"}
    base = rest[: -len(".weight")]
    if base in exps:
        return f"model.layers.{layer}.{moe}.experts.{{}}.{exps[base]}.weight"
    return f"model.layers.{layer}.{parts[base]}.weight"


def dequantized_logits(d, gguf_file, model_cls, seqs, out_json):
    """HF's logits of the weights a (quantized) GGUF holds: every tensor
    dequantized by the gguf package (gguf.quants.dequantize), llama's Q/K rows
    un-permuted, the 3-D expert tensors split per expert, loaded into the HF
    model of directory d (Mixtral, Qwen3-MoE, and the dense Mistral of
    tools/gen-arch-llamacpp-goldens.py)."""
    import gguf
    import numpy as np
    from safetensors.torch import save_file
    cfg = json.loads((d / "config.json").read_text())
    mixtral = cfg["model_type"] == "mixtral"
    llama_arch = mixtral or cfg["model_type"] == "mistral"  # files of arch "llama": Q/K permuted
    heads, kv_heads = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    r = gguf.GGUFReader(str(gguf_file))
    state = {}
    for t in r.tensors:
        w = np.asarray(gguf.quants.dequantize(t.data, t.tensor_type), dtype=np.float32)
        w = w.reshape([int(x) for x in reversed(t.shape)])
        name = hf_name_of(t.name, mixtral)
        if llama_arch and (".attn_q." in t.name or ".attn_k." in t.name):  # undo LlamaModel.permute
            n = heads if ".attn_q." in t.name else kv_heads
            w = w.reshape(n, w.shape[0] // n // 2, 2, w.shape[1]).swapaxes(1, 2).reshape(w.shape)
        if "{}" in name:
            for e in range(w.shape[0]):
                state[name.format(e)] = torch.from_numpy(np.ascontiguousarray(w[e]))
        else:
            state[name] = torch.from_numpy(np.ascontiguousarray(w))
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copy(d / "config.json", tmp)
        save_file(state, str(pathlib.Path(tmp) / "model.safetensors"))
        model, info = model_cls.from_pretrained(tmp, dtype=torch.float32, output_loading_info=True)
        model.eval()
        assert not info["missing_keys"] and not info["unexpected_keys"], info
    out_json.write_text(json.dumps({"sequences": logits_of(model, seqs)}) + "\n")


def tiny_moe(name, model, llama_cpp, quantizer, extra=None, mixes=False):
    """An MoE model: HF dir + logits, the F32 GGUF and its quantized variants."""
    if quantizer is None:
        sys.exit(f"{name}: --llama-quantize is needed for the MoE models' variants")
    d = tiny(name, model)
    seqs = [s["ids"] for s in json.loads((OUT / f"{name}.json").read_text())["sequences"]]
    check_routing(name, model, seqs)
    if extra is not None:  # the same weights under another config value
        key, value = extra
        setattr(model.config, key, value)
        for layer in model.model.layers:
            setattr(layer.mlp.gate, key, value)
        out = logits_of(model, seqs)
        (OUT / f"{name}-nonorm.json").write_text(json.dumps({"sequences": out}) + "\n")
    convert(d, name, llama_cpp)
    gdir = OUT / "moe-gguf"
    gdir.mkdir(exist_ok=True)
    f32 = gdir / f"{name}-f32.gguf"
    subprocess.run([sys.executable, "-c", CONVERT, str(llama_cpp), str(d), "--outtype", "f32",
                    "--outfile", str(f32)], check=True)
    for variant in quantize(f32, quantizer, name, gdir, mixes):
        dequantized_logits(d, gdir / f"{name}-{variant}.gguf", type(model), seqs,
                           OUT / f"{name}-{variant}-dequant.json")


def tiny(name, model):
    torch.manual_seed(1234)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.2)
    model.eval()
    d = OUT / name
    model.save_pretrained(d, safe_serialization=True)
    if (d / "generation_config.json").exists():
        os.remove(d / "generation_config.json")
    g = torch.Generator().manual_seed(99)
    vocab = model.config.vocab_size
    seqs = [torch.randint(0, vocab, (n,), generator=g).tolist() for n in (1, 7, 19)]
    out = []
    for ids in seqs:
        with torch.no_grad():
            logits = model(torch.tensor([ids])).logits[0].float().numpy()
        out.append({"ids": ids, "logits": [[float(v) for v in row] for row in logits]})
    (OUT / f"{name}.json").write_text(json.dumps({"sequences": out}) + "\n")
    return d


def listing(path, llama_cpp):
    sys.path[:0] = [str(llama_cpp / "gguf-py")]
    import gguf  # noqa: E402  (llama.cpp's own gguf-py: the reader of its writer)
    r = gguf.GGUFReader(str(path))
    meta = {}
    for f in r.fields.values():
        if f.name.startswith("GGUF.") or f.name.startswith("tokenizer.ggml."):
            continue
        v = f.contents()
        meta[f.name] = v if not isinstance(v, float) else float("%.9g" % v)
    tensors = []
    for t in r.tensors:
        rec = {"name": t.name, "dims": [int(x) for x in t.shape], "type": t.tensor_type.name}
        if t.name in ("rope_freqs.weight", "rope_factors_long.weight", "rope_factors_short.weight"):
            rec["values"] = [float(x) for x in t.data]
        tensors.append(rec)
    return {"metadata": meta, "tensors": tensors}


def convert(d, name, llama_cpp):
    result = {}
    with tempfile.TemporaryDirectory() as tmp:
        # Gemma 3's converter cuts token_embd to the tokenizer's size, read from
        # tokenizer.json: a copy of the model with a tokenizer.json of exactly
        # the model's vocabulary (nothing cut).
        if "gemma3" in name:
            copy = pathlib.Path(tmp) / "model"
            shutil.copytree(d, copy)
            vocab = json.loads((d / "config.json").read_text())["vocab_size"]
            (copy / "tokenizer.json").write_text(json.dumps(
                {"model": {"vocab": {f"t{i}": i for i in range(vocab)}}, "added_tokens": []}))
            d = copy
        for outtype in ("f32", "f16"):
            path = pathlib.Path(tmp) / f"{name}-{outtype}.gguf"
            subprocess.run([sys.executable, "-c", CONVERT, str(llama_cpp), str(d), "--outtype",
                            outtype, "--outfile", str(path)], check=True)
            result[outtype] = listing(path, llama_cpp)
    (OUT / f"{name}.gguf.json").write_text(json.dumps(result, indent=1, default=str) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llama-cpp", type=pathlib.Path, required=True)
    ap.add_argument("--llama-quantize", type=pathlib.Path, help="llama-quantize (the MoE models' variants)")
    ap.add_argument("--only", help="make just this model (e.g. tiny-phi3)")
    a = ap.parse_args()
    want = lambda name: a.only in (None, name)  # noqa: E731
    OUT.mkdir(parents=True, exist_ok=True)
    qwen3 = Qwen3Config(**COMMON, rope_theta=1000000.0, tie_word_embeddings=True)
    if want("tiny-qwen3"):
        convert(tiny("tiny-qwen3", Qwen3ForCausalLM(qwen3)), "tiny-qwen3", a.llama_cpp)
    mistral = MistralConfig(**COMMON, rope_theta=1000000.0, tie_word_embeddings=False,
                            sliding_window=None)
    if want("tiny-mistral-hd"):
        convert(tiny("tiny-mistral-hd", MistralForCausalLM(mistral)), "tiny-mistral-hd", a.llama_cpp)
    llama32 = LlamaConfig(**dict(COMMON, head_dim=16), rope_theta=500000.0, tie_word_embeddings=True,
                          rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                                        "high_freq_factor": 4.0, "original_max_position_embeddings": 64})
    if want("tiny-llama32"):
        convert(tiny("tiny-llama32", LlamaForCausalLM(llama32)), "tiny-llama32", a.llama_cpp)
    g = torch.Generator().manual_seed(7)
    short = (1.0 + torch.rand(6, generator=g)).tolist()
    long = (1.0 + 8.0 * torch.rand(6, generator=g)).tolist()
    phi3 = Phi3Config(**{k: v for k, v in COMMON.items() if k != "head_dim"}, rope_theta=10000.0,
                      tie_word_embeddings=False, sliding_window=None, bos_token_id=1, eos_token_id=2,
                      pad_token_id=0, original_max_position_embeddings=16,
                      rope_scaling={"rope_type": "longrope", "short_factor": short, "long_factor": long,
                                    "partial_rotary_factor": 0.75, "rope_theta": 10000.0})
    if want("tiny-phi3"):
        convert(tiny("tiny-phi3", Phi3ForCausalLM(phi3)), "tiny-phi3", a.llama_cpp)
    gemma2 = Gemma2Config(**COMMON, rope_theta=10000.0, tie_word_embeddings=True,
                          hidden_activation="gelu_pytorch_tanh", query_pre_attn_scalar=24,
                          sliding_window=5, attn_logit_softcapping=4.0, final_logit_softcapping=2.5,
                          bos_token_id=2, eos_token_id=1, pad_token_id=0)
    if want("tiny-gemma2"):
        convert(tiny("tiny-gemma2", Gemma2ForCausalLM(gemma2)), "tiny-gemma2", a.llama_cpp)
    gemma3 = Gemma3TextConfig(**dict(COMMON, hidden_size=64, num_attention_heads=4, intermediate_size=128,
                                     num_hidden_layers=6),
                              tie_word_embeddings=True, hidden_activation="gelu_pytorch_tanh",
                              query_pre_attn_scalar=20, sliding_window=6, final_logit_softcapping=3.0,
                              attn_logit_softcapping=None, bos_token_id=2, eos_token_id=1, pad_token_id=0,
                              rope_parameters={"full_attention": {"rope_type": "linear", "factor": 4.0,
                                                                  "rope_theta": 100000.0},
                                               "sliding_attention": {"rope_type": "default",
                                                                     "rope_theta": 10000.0}})
    if want("tiny-gemma3"):
        convert(tiny("tiny-gemma3", Gemma3ForCausalLM(gemma3)), "tiny-gemma3", a.llama_cpp)
    mixtral = MixtralConfig(**MOE, intermediate_size=32, num_local_experts=4, rope_theta=10000.0,
                            sliding_window=None, bos_token_id=1, eos_token_id=2)
    if want("tiny-mixtral"):
        tiny_moe("tiny-mixtral", MixtralForCausalLM(mixtral), a.llama_cpp, a.llama_quantize)
    qwen3moe = Qwen3MoeConfig(**MOE, intermediate_size=64, moe_intermediate_size=32, num_experts=4,
                              norm_topk_prob=True, rope_theta=1000000.0)
    if want("tiny-qwen3moe"):
        tiny_moe("tiny-qwen3moe", Qwen3MoeForCausalLM(qwen3moe), a.llama_cpp, a.llama_quantize,
                 extra=("norm_topk_prob", False), mixes=True)
    windowed(want)


def windowed(want):
    """The tiny-*-swa models (see the module docstring)."""
    small = dict(COMMON, hidden_size=64, num_attention_heads=4, head_dim=16, intermediate_size=96,
                 vocab_size=160)  # a quarter of COMMON's bytes: 3 more models in the tree
    no_head_dim = {k: v for k, v in small.items() if k != "head_dim"}
    cases = {
        "tiny-mistral-swa": (MistralForCausalLM, MistralConfig, dict(
            small, rope_theta=10000.0, tie_word_embeddings=False, sliding_window=5)),
        "tiny-qwen3-swa": (Qwen3ForCausalLM, Qwen3Config, dict(
            small, rope_theta=1000000.0, tie_word_embeddings=True, use_sliding_window=True,
            sliding_window=4, max_window_layers=1)),
        "tiny-phi3-swa": (Phi3ForCausalLM, Phi3Config, dict(
            no_head_dim, rope_theta=10000.0, tie_word_embeddings=False, sliding_window=6,
            bos_token_id=1, eos_token_id=2, pad_token_id=0)),
    }
    for name, (model_cls, config_cls, kw) in cases.items():
        if not want(name):
            continue
        d = tiny(name, model_cls(config_cls(**kw)))
        ids = json.loads((OUT / f"{name}.json").read_text())["sequences"][-1]["ids"]
        full = {"layer_types": ["full_attention"] * COMMON["num_hidden_layers"]} if "qwen" in name else {}
        plain = model_cls.from_pretrained(d, sliding_window=None, **full).eval()
        windowed_model = model_cls.from_pretrained(d).eval()
        with torch.no_grad():
            a = windowed_model(torch.tensor([ids])).logits
            b = plain(torch.tensor([ids])).logits
        diff = float((a - b).abs().max())
        print(f"{name}: the window moves the 19-token logits by up to {diff:.3f}")
        assert diff > 1e-2, f"{name}: the window does not bite"


if __name__ == "__main__":
    main()
