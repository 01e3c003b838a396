"""Roofline figures for tools/bench --compare-llama-cpp: what a decode step and
a prefill token of the benchmarked GGUF cost in bytes and int8 operations, and
the machine's measured ceilings, so the report can say what fraction of the
memory bandwidth batch-1 decode reaches and what fraction of the int8 peak
prefill reaches.

Contract: `model_costs(path)` reads only the GGUF's header (the PyPI `gguf`
package); `ceilings(bench_kernels)` runs `bench_kernels --ceilings-only` (a
few seconds, both threads of the pool) and returns its JSON, or {} when the
binary is missing or fails. No servers.

Counting rules (a dense decode step reads every matrix once; the embedding
is read once per step only where it is also the output matrix, otherwise one
row is gathered; MoE expert matrices count the routed share, experts used /
experts, which is what one token reads; a batch of tokens reads more). The
operations of a prefill token are 2 per weight element of the same matrices
(attention's own products are left out: at 512 tokens they are a few % of a
1B model's).
"""
from __future__ import annotations

import json
import os
import subprocess


def model_costs(path: str) -> dict:
    """{"step_bytes", "token_ops", "file_bytes", "expert_share"} of a GGUF file."""
    import gguf  # the venv's PyPI package (tools/requirements-test.txt)
    reader = gguf.GGUFReader(path)
    arch = str(reader.fields["general.architecture"].contents())
    used = reader.fields.get(f"{arch}.expert_used_count")
    count = reader.fields.get(f"{arch}.expert_count")
    share = (used.contents() / count.contents()) if used and count and count.contents() else 1.0
    names = {t.name for t in reader.tensors}
    tied = "output.weight" not in names
    step_bytes = token_ops = 0.0
    for t in reader.tensors:
        if len(t.shape) < 2:
            continue  # norms, biases
        if t.name == "token_embd.weight" and not tied:
            continue  # a gather of one row
        part = share if "_exps." in t.name else 1.0
        step_bytes += part * int(t.n_bytes)
        token_ops += part * 2.0 * int(t.n_elements)
    return {"step_bytes": step_bytes, "token_ops": token_ops,
            "file_bytes": os.path.getsize(path), "expert_share": share}


def ceilings(bench_kernels: str) -> dict:
    """The machine's measured read bandwidth and int8 peaks (bench_kernels' JSON)."""
    if not os.path.exists(bench_kernels):
        return {}
    try:
        p = subprocess.run([bench_kernels, "--ceilings-only"], capture_output=True, timeout=300)
        return json.loads(p.stdout.decode().strip().splitlines()[-1]) if p.returncode == 0 else {}
    except (OSError, ValueError, IndexError, subprocess.TimeoutExpired):
        return {}


def best_int8_peak(ceil: dict) -> tuple:
    """(ISA name, GOP/s) of the int8 kernels Pagoda runs: those PAGODA_CPU_ISA
    forces when it names a measured one (a smaller ISA's side-by-side), else
    the highest all-threads peak measured."""
    forced = os.environ.get("PAGODA_CPU_ISA", "")
    if f"int8_gop_per_s_{forced}" in ceil:
        return forced, ceil[f"int8_gop_per_s_{forced}"]
    peaks = [(k[len("int8_gop_per_s_"):], v) for k, v in ceil.items() if k.startswith("int8_gop_per_s_")]
    return max(peaks, key=lambda kv: kv[1]) if peaks else ("", 0.0)


def lines(costs: dict, ceil: dict, decode_tok_s: dict, ttft_ms: dict, prompt_len: int) -> list:
    """Markdown bullet lines: decode bandwidth and prefill int8 fractions per
    server (decode_tok_s / ttft_ms: {"Pagoda": value, "llama-server": value})."""
    if not costs:
        return []
    bw = ceil.get("read_gb_per_s", 0.0)
    isa, peak = best_int8_peak(ceil)
    out = [f"- Weights a decode step reads: {costs['step_bytes'] / 1e9:.3f} GB (file {costs['file_bytes'] / 1e9:.3f} GB"
           + (f"; experts counted at the routed share {costs['expert_share']:.4f}" if costs["expert_share"] < 1 else "")
           + f"); int8 work of a prompt token: {costs['token_ops'] / 1e9:.2f} GOP.",
           f"- Measured ceilings (tools/bench_kernels --ceilings-only, 2 threads): read bandwidth "
           f"{bw:.1f} GB/s; int8 peak {peak:.0f} GOP/s ({isa})."]
    for name, tok_s in decode_tok_s.items():
        gbs = tok_s * costs["step_bytes"] / 1e9
        out.append(f"- {name} batch-1 decode: {tok_s:.2f} tok/s x {costs['step_bytes'] / 1e9:.3f} GB = {gbs:.1f} GB/s"
                   + (f", {gbs / bw:.0%} of the measured bandwidth" if bw else ""))
    for name, ms in ttft_ms.items():
        if ms > 0:
            gops = prompt_len * costs["token_ops"] / (ms / 1e3) / 1e9
            out.append(f"- {name} prefill of {prompt_len} tokens in {ms:.0f} ms: {gops:.0f} GOP/s"
                       + (f", {gops / peak:.0%} of the int8 peak" if peak else ""))
    return out
