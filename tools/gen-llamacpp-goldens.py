#!/usr/bin/env python3
"""llama.cpp's own greedy tokens and top log-probabilities on quantized GGUFs.

For each GGUF given (the default model SmolLM2-135M Q4_1 from tools/fetch-model
and the variants tools/make-quant-variants makes from it), runs llama.cpp's
evaluation (libllama on the CPU, through tools/llamacpp-golden-driver.cpp
compiled against an existing llama.cpp build) on the prompts of
tests/data/logits/smollm2.json (token ids: tokenization plays no part) and
writes tests/data/llamacpp/smollm2-<TYPE>.json:
  {"llama_cpp": version, "system_info": ..., "model": file name,
   "model_sha256": ..., "model_bytes": ..., "steps": N, "top_k": K,
   "prompts": [{"ids": [...], "greedy": [N ids],
                "top": [N x [[id, logprob] x K]]}]}
top[t] is llama.cpp's distribution after the prompt plus greedy[0..t-1]
(the prompt decoded as one batch, then one token per decode call).
tests/llamacpp_fidelity_test.cpp compares Pagoda's forward on the same ids.

CI never runs this (it needs a llama.cpp source tree and build).

Usage:
  tools/gen-llamacpp-goldens.py --llama-src DIR --build-dir DIR \
      [--version V] [--steps 32] [--top-k 5] [--threads 1] GGUF...
  --llama-src  llama.cpp sources (e.g. llama-cpp-python's sdist
               vendor/llama.cpp); the sdist's PKG-INFO version is recorded
               (or --version)
  --build-dir  a CMake build of it with static libllama/ggml (the one
               tools/make-quant-variants makes for llama-quantize will do)
"""
import argparse
import hashlib
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parent.parent
PROMPTS = REPO / "tests/data/logits/smollm2.json"
OUT_DIR = REPO / "tests/data/llamacpp"
DRIVER = REPO / "tools/llamacpp-golden-driver.cpp"


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def sdist_version(src):
    for parent in [src, *src.parents][:4]:
        info = parent / "PKG-INFO"
        if info.is_file():
            m = re.search(r"^Version:\s*(\S+)", info.read_text(), re.M)
            if m:
                return f"llama-cpp-python {m.group(1)} (vendored llama.cpp)"
    return None


def build_driver(src, build, exe):
    libs = ["src/libllama.a", "ggml/src/libggml.a", "ggml/src/libggml-cpu.a",
            "ggml/src/libggml-base.a"]
    missing = [l for l in libs if not (build / l).is_file()]
    if missing:
        sys.exit(f"gen-llamacpp-goldens: {build} lacks {missing} (build target llama there)")
    cmd = ["g++", "-O2", "-std=c++17", f"-I{src}/include", f"-I{src}/ggml/include",
           str(DRIVER), *[str(build / l) for l in libs], "-fopenmp", "-lpthread", "-ldl", "-o", str(exe)]  # -fopenmp: builds with GGML_OPENMP
    subprocess.run(cmd, check=True)


def run_driver(exe, model, prompts, steps, top_k, threads):
    """llama.cpp's rows for the prompts (one {"ids", "greedy", "top"} each)
    and its system_info line."""
    stdin = "".join(" ".join(map(str, ids)) + "\n" for ids in prompts)
    r = subprocess.run([str(exe), str(model), str(steps), str(top_k), str(threads)],
                       input=stdin, capture_output=True, text=True, check=True)
    info = re.search(r"^system_info: (.*)$", r.stderr, re.M)
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    assert [row["ids"] for row in rows] == prompts
    return rows, info.group(1).strip() if info else ""


def write_golden(dest, header, rows):
    """header's keys, then "prompts": rows, one row per line."""
    with open(dest, "w") as f:
        f.write(json.dumps(header, indent=1)[:-2] + ',\n "prompts": [\n')
        f.write(",\n".join(json.dumps(row, separators=(",", ":")) for row in rows))
        f.write("\n ]\n}\n")
    json.loads(dest.read_text())


def quant_type(path):
    m = re.search(r"\.([A-Za-z0-9_]+)\.gguf$", path.name)
    return m.group(1) if m else path.stem


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llama-src", required=True, type=pathlib.Path)
    ap.add_argument("--build-dir", required=True, type=pathlib.Path)
    ap.add_argument("--version")
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--top-k", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("models", nargs="+", type=pathlib.Path)
    a = ap.parse_args()
    version = a.version or sdist_version(a.llama_src.resolve())
    if not version:
        sys.exit("gen-llamacpp-goldens: no PKG-INFO above --llama-src; pass --version")
    prompts = [p["ids"] for p in json.loads(PROMPTS.read_text())["prompts"]]
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        exe = pathlib.Path(tmp) / "driver"
        build_driver(a.llama_src, a.build_dir, exe)
        for model in a.models:
            rows, info = run_driver(exe, model, prompts, a.steps, a.top_k, a.threads)
            out = {"llama_cpp": version, "system_info": info,
                   "model": model.name, "model_sha256": sha256(model),
                   "model_bytes": model.stat().st_size, "steps": a.steps,
                   "top_k": a.top_k}
            dest = OUT_DIR / f"smollm2-{quant_type(model)}.json"
            write_golden(dest, out, rows)
            print(f"{dest.relative_to(REPO)}: {os.path.getsize(dest)} bytes")

if __name__ == "__main__":
    main()
