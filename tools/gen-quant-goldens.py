#!/usr/bin/env python3
"""Makes tests/data/formats/quant_golden.json: reference dequantizations of
the block-quantized GGUF types, computed by the PyPI `gguf` package
(gguf.quants.dequantize, numpy), for tests/dequant_test.cpp to compare with
Pagoda's dequantizers bit for bit.

Two kinds of cases per type:
  - random: blocks of random bytes (numpy Generator, fixed seed) whose fp16
    scale fields are overwritten with finite, moderate values (|x| in
    [2^-12, 4], random sign), so that every output is finite;
  - real: blocks copied out of GGUF files that llama.cpp's llama-quantize
    made (tools/make-quant-variants), and of the default Q4_1 model itself
    (tools/fetch-model): for each type, the first tensor of that type found
    in the files (sorted by file name, then tensor name), blocks at its
    start, middle and end. Each case records the file, tensor and block indices it came from.

Each case stores the input blocks and the expected float32 bit patterns
(little-endian) as hex strings.

Run (deterministic for the same variant files):
  /work/wt/gold/bin/python tools/gen-quant-goldens.py \
      [--variants ~/.cache/pagoda/models/variants]
      [--model ~/.cache/pagoda/models/SmolLM2-135M-Instruct.Q4_1.gguf] [--random-only]
Needs: gguf (0.19.0 was used), numpy.
"""
import argparse
import glob
import importlib.metadata
import json
import os
import sys

import numpy as np
import gguf
from gguf import GGUFReader, GGMLQuantizationType as T
from gguf.quants import dequantize

OUT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "tests", "data", "formats",
                                   "quant_golden.json"))

# type -> byte offsets of the fp16 scale fields in one block (ggml-common.h).
HALF_FIELDS = {
    T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0],
    T.Q2_K: [80, 82], T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208],
    T.IQ4_NL: [0], T.IQ4_XS: [0],
}
RANDOM_BLOCKS = {256: 3, 32: 8}  # blocks per random case, by block size
REAL_BLOCKS = 3                  # start, middle, end of one tensor


def moderate_halves(rng, n):
    mag = np.exp2(rng.uniform(-12.0, 2.0, size=n))
    sign = np.where(rng.integers(0, 2, size=n) == 1, -1.0, 1.0)
    return (mag * sign).astype(np.float16)


def expected(qtype, blocks):
    values = dequantize(blocks.reshape(-1), qtype).astype(np.float32).reshape(-1)
    return values.view("<u4").astype("<u4").tobytes().hex()


def random_case(qtype, rng):
    block_elems, block_bytes = gguf.GGML_QUANT_SIZES[qtype]
    n = RANDOM_BLOCKS[block_elems]
    blocks = rng.integers(0, 256, size=(n, block_bytes), dtype=np.uint8)
    for off in HALF_FIELDS[qtype]:
        blocks[:, off:off + 2] = moderate_halves(rng, n).view(np.uint8).reshape(n, 2)
    return {"type": int(qtype), "type_name": qtype.name, "block_elems": block_elems,
            "block_bytes": block_bytes, "source": f"random bytes, fp16 scales in +-[2^-12, 4], {n} blocks",
            "blocks": blocks.tobytes().hex(), "values": expected(qtype, blocks)}


def real_cases(variants_dir, model):
    files = sorted(glob.glob(os.path.join(variants_dir, "*.gguf"))) + [model]
    if not files:
        sys.exit(f"gen-quant-goldens: no .gguf files in {variants_dir} "
                 "(run tools/make-quant-variants, or pass --random-only)")
    found = {}
    for path in files:
        reader = GGUFReader(path)
        for t in sorted(reader.tensors, key=lambda t: t.name):
            if t.tensor_type in HALF_FIELDS and t.tensor_type not in found:
                found[t.tensor_type] = (path, t)
    cases = []
    for qtype in HALF_FIELDS:
        if qtype not in found:
            print(f"gen-quant-goldens: no {qtype.name} tensor in {variants_dir}", file=sys.stderr)
            continue
        path, t = found[qtype]
        block_elems, block_bytes = gguf.GGML_QUANT_SIZES[qtype]
        raw = np.asarray(t.data).view(np.uint8).reshape(-1, block_bytes)
        picks = sorted({0, raw.shape[0] // 2, raw.shape[0] - 1})
        blocks = raw[picks]
        cases.append({"type": int(qtype), "type_name": qtype.name, "block_elems": block_elems,
                      "block_bytes": block_bytes, "source": f"{os.path.basename(path)} {t.name} blocks {picks}",
                      "blocks": blocks.tobytes().hex(), "values": expected(qtype, blocks)})
    return cases


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--variants", default=os.path.expanduser("~/.cache/pagoda/models/variants"))
    ap.add_argument("--model", default=os.path.expanduser(
        "~/.cache/pagoda/models/SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--random-only", action="store_true")
    args = ap.parse_args()
    rng = np.random.default_rng(20)
    cases = [random_case(q, rng) for q in HALF_FIELDS]
    if not args.random_only:
        cases += real_cases(args.variants, args.model)
    with open(OUT, "w") as f:  # one case per line
        f.write('{"generator": "tools/gen-quant-goldens.py", "gguf": %s,\n"cases": [\n'
                % json.dumps(importlib.metadata.version("gguf")))
        f.write(",\n".join(json.dumps(c) for c in cases))
        f.write("\n]}\n")
    kinds = sorted({c["type_name"] for c in cases})
    print(f"wrote {OUT}: {len(cases)} cases over {len(kinds)} types ({', '.join(kinds)}), "
          f"{os.path.getsize(OUT)} bytes")


if __name__ == "__main__":
    main()
