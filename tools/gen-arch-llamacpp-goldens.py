#!/usr/bin/env python3
"""llama.cpp's greedy tokens and top log-probabilities on llama-quantize'd
tiny models of every architecture, with every supported tensor type.

For each architecture (Qwen3, Llama 3.2 with llama3 RoPE scaling, Mistral-Nemo
style head_dim, Phi-3 with longrope and fused qkv/gate_up, Gemma 2, Gemma 3,
Mixtral, Qwen3-MoE) this script:
  1. makes a tiny random model with transformers' own config and model classes,
     sized so that llama-quantize can give every matrix a K-quant (rows of 256:
     hidden 256, 4 heads; Mistral-Nemo's head_dim 128 makes q 512 wide);
  2. converts it to an F32 GGUF with llama.cpp's convert_hf_to_gguf.py (the
     tokenizer step skipped, as tools/gen-arch-goldens.py does: the forward
     pass is what is checked, on token ids);
  3. quantizes it with llama-quantize into one "mix" file in which each
     layer's four weight groups (q|k|v or the fused qkv, the attention output,
     gate|up or the fused up / the experts' gate|up, down / the experts' down)
     take different types, so that the file holds every type Pagoda supports:
     Q2_K Q3_K Q4_K Q5_K Q6_K IQ4_XS IQ4_NL Q5_0 Q5_1 Q4_0 Q4_1 Q8_0 F16 BF16
     (the rest, norms and routers, F32). A group's tensors share one type,
     as llama.cpp's presets do, so each runs through its type's own kernel;
     the token embedding and the output matrix take types of their own;
  4. runs llama.cpp's evaluation (tools/llamacpp-golden-driver.cpp, linked
     against an existing libllama build) on 4 random prompts and writes its
     greedy continuation and top-5 log-probabilities.
Because the converter writes no tokenizer, llama.cpp is given a copy of the
file with two more metadata keys (tokenizer.ggml.model = "none" and
<arch>.vocab_size, which make llama.cpp's vocabulary a list of dummy tokens);
the tensors are the committed file's, byte for byte (checked).

Writes (committed):
  tests/data/llamacpp/arch/tiny-<arch>-mix.gguf   the quantized file (0.9-1.8 MB)
  tests/data/llamacpp/arch/tiny-<arch>-mix.json   {"llama_cpp", "system_info",
      "model", "model_sha256", "model_bytes", "steps", "top_k",
      "types": {tensor name: type}, "hf_vs_llamacpp": transformers' distance to
      llama.cpp, "prompts": [{"ids", "greedy", "top", "hf_top"}]}
tests/arch_llamacpp_test.cpp compares Pagoda's forward on the same ids.
CI never runs this.

Run (the venv of tools/requirements-golden.txt plus the PyPI `gguf` package):
    python tools/gen-arch-llamacpp-goldens.py --llama-src DIR --build-dir DIR [--only NAME]
  --llama-src  llama.cpp sources (llama-cpp-python's sdist vendor/llama.cpp):
               convert_hf_to_gguf.py, conversion/, gguf-py/
  --build-dir  a CMake build of it with static libllama/ggml and
               bin/llama-quantize (tools/peers/llama-cpp.sh's build, plus
               `ninja llama-quantize` there)
"""
import argparse
import importlib.util
import json
import math
import pathlib
import subprocess
import sys
import tempfile

import torch
from transformers import (Gemma2Config, Gemma2ForCausalLM, Gemma3ForCausalLM, Gemma3TextConfig,
                          LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM,
                          MixtralConfig, MixtralForCausalLM, Phi3Config, Phi3ForCausalLM,
                          Qwen3Config, Qwen3ForCausalLM, Qwen3MoeConfig, Qwen3MoeForCausalLM)

REPO = pathlib.Path(__file__).resolve().parent.parent
OUT = REPO / "tests" / "data" / "llamacpp" / "arch"
STEPS, TOP_K, THREADS = 24, 5, 2
ATTN = "eager"  # Gemma 2's soft-capping runs only there
PROMPT_LENGTHS = (9, 13, 19, 30)  # all longer than Phi-3's original context (8): see phi3 below


def load_tool(file_name):
    spec = importlib.util.spec_from_file_location(file_name.replace("-", "_"), REPO / "tools" / file_name)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# Types, in the order slots take them; the 32-element ones are the only
# choice for rows that are not a multiple of 256 (the MoE experts' down).
TYPES = ["Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ4_XS", "IQ4_NL", "Q5_0", "Q5_1", "Q4_0",
         "Q4_1", "Q8_0", "F16", "BF16"]
WIDE = {"F16", "BF16"}
FILL = ["Q4_0", "Q5_0"]
BLOCK32 = {"IQ4_NL", "Q5_0", "Q5_1", "Q4_0", "Q4_1", "Q8_0", "F16", "BF16"}
GROUPS = [  # (slot name, llama-quantize pattern for layer {l})
    ("qkv", r"blk\.{l}\.attn_(q|k|v|qkv)\.weight"),
    ("o", r"blk\.{l}\.attn_output\.weight"),
    ("gate_up", r"blk\.{l}\.ffn_(gate|up)(_exps)?\.weight"),
    ("down", r"blk\.{l}\.ffn_down(_exps)?\.weight"),
]

DENSE = dict(hidden_size=256, num_attention_heads=4, num_key_value_heads=1, head_dim=64,
             intermediate_size=256, num_hidden_layers=4, vocab_size=300,
             max_position_embeddings=256, rms_norm_eps=1e-6, dtype="float32")
MOE = dict(DENSE, num_experts_per_tok=2, tie_word_embeddings=True)


def models():
    """name -> (model class, config) of every architecture."""
    no_hd = {k: v for k, v in DENSE.items() if k != "head_dim"}
    g = torch.Generator().manual_seed(7)
    short = (1.0 + torch.rand(24, generator=g)).tolist()  # rotary dims 48 of 64: 24 factors
    long = (1.0 + 8.0 * torch.rand(24, generator=g)).tolist()
    gemma = dict(hidden_activation="gelu_pytorch_tanh", bos_token_id=2, eos_token_id=1, pad_token_id=0,
                 tie_word_embeddings=True)
    return {
        "tiny-qwen3": (Qwen3ForCausalLM, Qwen3Config(**DENSE, rope_theta=1e6, tie_word_embeddings=True)),
        "tiny-llama32": (LlamaForCausalLM, LlamaConfig(
            **DENSE, rope_theta=500000.0, tie_word_embeddings=True,
            rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                          "high_freq_factor": 4.0, "original_max_position_embeddings": 64})),
        "tiny-mistral-hd": (MistralForCausalLM, MistralConfig(
            **dict(DENSE, head_dim=128), rope_theta=1e6, tie_word_embeddings=False, sliding_window=None)),
        # Longrope: transformers picks the factors by the sequence length, llama.cpp by its
        # context (256 here): every prompt is longer than the original context 8, so both
        # use long_factor throughout. Context 64 (the test's): attention factor
        # sqrt(1 + ln 8 / ln 8), the scores scaled by 2 (with 256, 2.67: too sharp for a
        # random model, whose outputs then swing with llama.cpp's own rounding).
        "tiny-phi3": (Phi3ForCausalLM, Phi3Config(
            **dict(no_hd, max_position_embeddings=64), rope_theta=10000.0, tie_word_embeddings=False,
            sliding_window=None,
            bos_token_id=1, eos_token_id=2, pad_token_id=0, original_max_position_embeddings=8,
            rope_scaling={"rope_type": "longrope", "short_factor": short, "long_factor": long,
                          "partial_rotary_factor": 0.75, "rope_theta": 10000.0})),
        "tiny-gemma2": (Gemma2ForCausalLM, Gemma2Config(
            **DENSE, **gemma, rope_theta=10000.0, query_pre_attn_scalar=64, sliding_window=5,
            attn_logit_softcapping=8.0, final_logit_softcapping=20.0)),
        # Six layers: llama.cpp and Pagoda take Gemma 3's pattern (five windowed, one
        # global) when the file names none, as the converter's files do.
        # query_pre_attn_scalar = head_dim here and in Gemma 2: the GGUF has no key for
        # it, and llama.cpp scales by 1/sqrt(head_dim) outside the 27B models (the HF
        # goldens of tiny-gemma2/3 cover a scalar != head_dim).
        "tiny-gemma3": (Gemma3ForCausalLM, Gemma3TextConfig(
            **dict(DENSE, num_hidden_layers=6), **gemma, query_pre_attn_scalar=64, sliding_window=6,
            final_logit_softcapping=20.0, attn_logit_softcapping=None,
            rope_parameters={"full_attention": {"rope_type": "linear", "factor": 4.0, "rope_theta": 1e5},
                             "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}})),
        "tiny-mixtral": (MixtralForCausalLM, MixtralConfig(
            **dict(MOE, intermediate_size=32), num_local_experts=4, rope_theta=10000.0, sliding_window=None,
            bos_token_id=1, eos_token_id=2)),
        "tiny-qwen3moe": (Qwen3MoeForCausalLM, Qwen3MoeConfig(
            **MOE, moe_intermediate_size=32, num_experts=4, norm_topk_prob=True, rope_theta=1e6)),
    }


def init_weights(model):
    """Weights that give greedy continuations with top-1 margins of a few
    nats: projections N(0, 1.96/fan_in) (with 1/fan_in the last token's own
    embedding steers the residual stream and the continuation repeats one
    token; with 4/fan_in the model turns chaotic, its outputs swinging with
    llama.cpp's own rounding), embeddings N(0, 0.5), RMSNorm gains near 1.
    Gemma scales its tied embedding by sqrt(hidden) on the way in, so
    there the last token's own row wins every step (a constant continuation)
    unless its embeddings are smaller (0.3) and its post-attention/post-FFN
    norms larger (stored w near 7: gains near 8); its other (1 + w) norms
    store w near 0."""
    torch.manual_seed(1234)
    gemma = model.config.model_type.startswith("gemma")
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.normal_((7.0 if "post_" in name else 0.0) if gemma else 1.0, 0.1)
            elif "embed" in name or "lm_head" in name:
                p.normal_(0.0, 0.3 if gemma else 0.5)
            else:
                p.normal_(0.0, 1.4 / math.sqrt(p.shape[-1]))
    model.eval()


def plan_types(n_layers, offset, block32_only):
    """--tensor-type arguments and the intended type of each group: every type
    once, starting at TYPES[offset], then the cheap FILL types. F16 and BF16
    go only to the attention output (the smallest group: 2 bytes a weight)."""
    order = TYPES[offset:] + TYPES[:offset]
    unused, args, plan = list(order), [], {}
    for layer in range(n_layers):
        for slot, pattern in GROUPS:
            def fits(t):
                return not (block32_only(slot) and t not in BLOCK32) and (slot == "o" or t not in WIDE)
            fresh = sorted((t for t in unused if fits(t)), key=lambda t: t not in WIDE)  # WIDE first
            t = fresh[0] if fresh else [f for f in FILL if fits(f)][len(plan) % 2]
            if t in unused:
                unused.remove(t)
            plan[(layer, slot)] = t
            args += ["--tensor-type", pattern.format(l=layer) + "=" + t.lower()]
    return args, plan


def quantize(f32, dst, quantizer, n_layers, offset, moe, tied):
    args, plan = plan_types(n_layers, offset, lambda slot: moe and slot == "down")
    embd = ["Q6_K", "Q8_0", "Q4_K", "Q5_0"][offset % 4]
    args += ["--token-embedding-type", embd.lower()]
    if not tied:
        args += ["--output-tensor-type", ["Q8_0", "Q6_K", "F16"][offset % 3].lower()]
    subprocess.run([str(quantizer), *args, str(f32), str(dst), "Q8_0"], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return plan, embd


def with_null_vocab(src, dst, gguf, vocab):
    """A copy of src with tokenizer.ggml.model = "none" and <arch>.vocab_size,
    every tensor's bytes unchanged (so llama.cpp loads it)."""
    r = gguf.GGUFReader(str(src))
    arch = r.fields["general.architecture"].contents()
    w = gguf.GGUFWriter(str(dst), arch)
    for f in r.fields.values():
        if f.name.startswith("GGUF.") or f.name == "general.architecture":
            continue
        value, vtype = f.contents(), f.types[0]
        if vtype == gguf.GGUFValueType.ARRAY:
            w.add_array(f.name, value)
        else:
            w.add_key_value(f.name, value, vtype)
    w.add_tokenizer_model("none")
    w.add_vocab_size(vocab)
    for t in r.tensors:
        w.add_tensor(t.name, t.data, raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    copy = gguf.GGUFReader(str(dst))
    for a, b in zip(r.tensors, copy.tensors, strict=True):
        assert a.name == b.name and a.tensor_type == b.tensor_type and bytes(a.data) == bytes(b.data), a.name


def tensor_types(path, gguf):
    return {t.name: t.tensor_type.name for t in gguf.GGUFReader(str(path)).tensors}


def check_plan(name, types, plan, embd):
    """Every group took the intended type and the file holds every type."""
    for (layer, slot), want in plan.items():
        got = {v for k, v in types.items() if k.startswith(f"blk.{layer}.") and (
            (slot == "qkv" and ".attn_" in k and k.split(".")[2] in ("attn_q", "attn_k", "attn_v", "attn_qkv"))
            or (slot == "o" and ".attn_output." in k)
            or (slot == "gate_up" and (".ffn_gate" in k or ".ffn_up" in k) and "inp" not in k)
            or (slot == "down" and ".ffn_down" in k))}
        assert got == {want}, f"{name}: layer {layer} {slot}: wanted {want}, file has {got}"
    assert types["token_embd.weight"] == embd, (name, types["token_embd.weight"], embd)
    missing = set(TYPES) - set(types.values())
    assert not missing, f"{name}: no tensor of {missing}"


def hf_logprobs(arch, cls, config, hf, gguf_file, seqs):
    """transformers' log-probabilities ([seq] -> [len, vocab], fp32) of the
    weights gguf_file holds, dequantized by the gguf package: through
    transformers' own GGUF loader, or, for the files of llama.cpp's "llama"
    architecture that loader does not map back (Mistral, Mixtral), through
    tools/gen-arch-goldens.py's dequantized_logits."""
    if config.model_type in ("mistral", "mixtral"):
        with tempfile.TemporaryDirectory() as tmp:
            out = pathlib.Path(tmp) / "logits.json"
            arch.dequantized_logits(hf, gguf_file, cls, seqs, out)
            rows = json.loads(out.read_text())["sequences"]
        return [torch.log_softmax(torch.tensor(r["logits"], dtype=torch.float64), -1) for r in rows]
    model = cls.from_pretrained(str(gguf_file.parent), gguf_file=gguf_file.name, config=config,
                                dtype=torch.float32, attn_implementation=ATTN).eval()
    with torch.no_grad():
        return [torch.log_softmax(model(torch.tensor([ids])).logits[0].double(), -1) for ids in seqs]


def add_hf_reference(rows, lp):
    """Adds to each prompt's row transformers' top-5 after every teacher-forced
    prefix ("hf_top"); returns transformers' distance to llama.cpp over
    llama.cpp's top-5."""
    diffs, agree, flip = [], 0, 0.0
    for row, seq_lp in zip(rows, lp, strict=True):
        n = len(row["ids"])
        row["hf_top"] = []
        for t, top in enumerate(row["top"]):
            r = seq_lp[n - 1 + t]
            v, i = torch.topk(r, TOP_K)
            row["hf_top"].append([[int(a), round(float(b), 5)] for a, b in zip(i, v)])
            diffs += [abs(float(r[tid]) - lpv) for tid, lpv in top]
            if int(i[0]) == row["greedy"][t]:
                agree += 1
            else:
                flip = max(flip, top[0][1] - top[1][1])
    diffs.sort()
    return {"agree": agree, "positions": sum(len(r["top"]) for r in rows), "max_flip_margin": round(flip, 4),
            "mean": round(sum(diffs) / len(diffs), 4), "p99": round(diffs[len(diffs) * 99 // 100], 4),
            "max": round(diffs[-1], 4)}


def prompts_for(vocab):
    g = torch.Generator().manual_seed(2024)
    return [torch.randint(0, vocab, (n,), generator=g).tolist() for n in PROMPT_LENGTHS]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llama-src", type=pathlib.Path, required=True)
    ap.add_argument("--build-dir", type=pathlib.Path, required=True)
    ap.add_argument("--version")
    ap.add_argument("--only")
    a = ap.parse_args()
    goldens = load_tool("gen-llamacpp-goldens.py")
    arch = load_tool("gen-arch-goldens.py")
    version = a.version or goldens.sdist_version(a.llama_src.resolve())
    if not version:
        sys.exit("gen-arch-llamacpp-goldens: no PKG-INFO above --llama-src; pass --version")
    sys.path[:0] = [str(a.llama_src / "gguf-py")]
    import gguf  # llama.cpp's own gguf-py, the writer of its files
    quantizer = a.build_dir / "bin" / "llama-quantize"
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        exe = tmp / "driver"
        goldens.build_driver(a.llama_src, a.build_dir, exe)
        for offset, (name, (cls, config)) in enumerate(models().items()):
            if a.only not in (None, name):
                continue
            model = cls(config)
            init_weights(model)
            hf = tmp / name
            model.save_pretrained(hf, safe_serialization=True)
            if "gemma3" in name:  # its converter cuts token_embd to tokenizer.json's size
                (hf / "tokenizer.json").write_text(json.dumps(
                    {"model": {"vocab": {f"t{i}": i for i in range(config.vocab_size)}}, "added_tokens": []}))
            f32 = tmp / f"{name}-f32.gguf"
            subprocess.run([sys.executable, "-c", arch.CONVERT, str(a.llama_src), str(hf), "--outtype", "f32",
                            "--outfile", str(f32)], check=True, stdout=subprocess.DEVNULL)
            dst = OUT / f"{name}-mix.gguf"
            moe = "moe" in name or "mixtral" in name
            plan, embd = quantize(f32, dst, quantizer, config.num_hidden_layers, offset, moe,
                                  config.tie_word_embeddings)
            types = tensor_types(dst, gguf)
            check_plan(name, types, plan, embd)
            for_llama = tmp / f"{name}-vocab.gguf"
            with_null_vocab(dst, for_llama, gguf, config.vocab_size)
            prompts = prompts_for(config.vocab_size)
            rows, info = goldens.run_driver(exe, for_llama, prompts, STEPS, TOP_K, THREADS)
            seqs = [row["ids"] + row["greedy"] for row in rows]
            hf_stats = add_hf_reference(rows, hf_logprobs(arch, cls, config, hf, dst, seqs))
            margins = sorted(p["top"][t][0][1] - p["top"][t][1][1] for p in rows for t in range(STEPS))
            print(f"{name}: {dst.stat().st_size} bytes; llama.cpp top-1 margins: median "
                  f"{margins[len(margins) // 2]:.2f}, {sum(m < 1.0 for m in margins)} of {len(margins)} below 1;"
                  f" distinct greedy tokens per prompt {[len(set(p['greedy'])) for p in rows]};"
                  f" transformers vs llama.cpp {hf_stats}")
            out = {"llama_cpp": version, "system_info": info,
                   "model": dst.name, "model_sha256": goldens.sha256(dst),
                   "model_bytes": dst.stat().st_size, "steps": STEPS, "top_k": TOP_K,
                   "types": types, "hf_vs_llamacpp": hf_stats}
            goldens.write_golden(OUT / f"{name}-mix.json", out, rows)


if __name__ == "__main__":
    main()
