#!/usr/bin/env python3
"""Makes tests/data/formats/dequant_golden.json: an independent reference for
the GGUF parser and the dequantizers, produced by the `gguf` Python package
(gguf.GGUFReader + gguf.quants.dequantize) from the real SmolLM2 model.

It records:
  - every tensor's name, ggml type id, dims (ggml order), absolute data offset
    and byte size, as GGUFReader sees them;
  - for one tensor of each type present (Q8_0, Q4_1, F32): the dequantized
    values at the start, middle and end of the flattened tensor (64 each).

Run (deterministic; no arguments needed when the model is at the default path):
  /root/gold/bin/python tools/gen-dequant-goldens.py \
      [~/.cache/pagoda/models/SmolLM2-135M-Instruct.Q4_1.gguf]
"""
import json
import os
import sys

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize

DEFAULT_MODEL = os.path.expanduser("~/.cache/pagoda/models/SmolLM2-135M-Instruct.Q4_1.gguf")
OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "data", "formats", "dequant_golden.json")
SAMPLED = ["token_embd.weight", "blk.0.attn_q.weight", "blk.29.ffn_down.weight",
           "blk.0.attn_norm.weight", "output_norm.weight"]
RUN = 64


def main() -> None:
    path = sys.argv[1] if len(sys.argv) > 1 else DEFAULT_MODEL
    reader = GGUFReader(path)
    tensors = []
    by_name = {}
    for t in reader.tensors:
        by_name[t.name] = t
        tensors.append({
            "name": t.name,
            "type": int(t.tensor_type),
            "dims": [int(d) for d in t.shape],  # ggml order: dims[0] fastest
            "offset": int(t.data_offset),
            "nbytes": int(t.n_bytes),
        })
    samples = []
    for name in SAMPLED:
        t = by_name[name]
        values = dequantize(t.data, t.tensor_type).astype(np.float32).reshape(-1)
        n = values.size
        starts = [0, n // 2, n - RUN]
        samples.append({
            "name": name,
            "type_name": t.tensor_type.name,
            "num_elements": int(n),
            "runs": [{"start": s, "values": [float(v) for v in values[s:s + RUN]]} for s in starts],
        })
    golden = {"model": os.path.basename(path), "tensor_count": len(tensors),
              "tensors": tensors, "samples": samples}
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:  # one tensor / one run per line keeps diffs readable
        f.write("{\"model\": %s, \"tensor_count\": %d,\n\"tensors\": [\n" %
                (json.dumps(golden["model"]), len(tensors)))
        f.write(",\n".join(json.dumps(t) for t in tensors))
        f.write("\n],\n\"samples\": [\n")
        f.write(",\n".join(json.dumps(s) for s in samples))
        f.write("\n]}\n")
    print(f"wrote {OUT}: {len(tensors)} tensors, {len(samples)} sampled")


if __name__ == "__main__":
    main()
