#!/usr/bin/env python3
"""Writes a Q8_0 copy of a GGUF model: the same metadata, every quantized
matrix re-quantized to Q8_0 from its dequantized values, F32/F16 tensors as
they are.

    tools/make-q8-variant.py IN.gguf OUT.gguf

For the draft-model tests (issue 24): the default model's Q4_1 file drafts
for a Q8_0 target made from it, so the two differ only by precision. The
quantizer is the PyPI `gguf` package's (gguf.quants: ggml's reference
Q8_0 rounding, the same arithmetic as llama-quantize's Q8_0); tools/dev
runs this once into the model cache ($PAGODA_MODEL_DIR/variants), where
tests/draft_engine_test.cpp looks for it. A Q4_1 block's values are
exactly representable in f32, so the Q8_0 file is a deterministic function
of the input. Writes OUT atomically (a temporary name, then rename).
"""
import os
import sys

import numpy as np
from gguf import GGMLQuantizationType as Q
from gguf import GGUFReader, GGUFValueType, GGUFWriter, LlamaFileType, quants

KEEP = {Q.F32, Q.F16, Q.BF16, Q.Q8_0}


def copy_metadata(reader: GGUFReader, writer: GGUFWriter) -> None:
    """Every key but the header's own (GGUF.*) and the architecture, which
    the writer's constructor already wrote; general.file_type says Q8_0."""
    for field in reader.fields.values():
        if field.name.startswith("GGUF.") or field.name == "general.architecture":
            continue
        if field.name == "general.file_type":  # what the tensors now are
            writer.add_file_type(LlamaFileType.MOSTLY_Q8_0)
            continue
        vtype = field.types[0]
        sub = field.types[1] if vtype == GGUFValueType.ARRAY and len(field.types) > 1 else None
        writer.add_key_value(field.name, field.contents(), vtype, sub_type=sub)


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    src, out = sys.argv[1], sys.argv[2]
    reader = GGUFReader(src)
    arch = reader.get_field("general.architecture").contents()
    tmp = out + ".partial"
    writer = GGUFWriter(tmp, arch)
    copy_metadata(reader, writer)
    for t in reader.tensors:
        # t.data: numpy order (rows, ...); for a quantized type its last
        # axis is bytes, which is what add_tensor takes with raw_dtype.
        if t.tensor_type in KEEP:
            writer.add_tensor(t.name, np.asarray(t.data), raw_dtype=t.tensor_type)
            continue
        values = quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        writer.add_tensor(t.name, quants.quantize(values, Q.Q8_0), raw_dtype=Q.Q8_0)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    os.replace(tmp, out)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
