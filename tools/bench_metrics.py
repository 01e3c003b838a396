"""Metrics of tools/bench with vLLM's `bench serve` definitions.

Over the successful requests of one run of duration D seconds (from the first
send to the last end):
  request_throughput     = completed / D
  output_throughput      = sum(output_len) / D
  total_token_throughput = (sum(prompt_len) + sum(output_len)) / D
  TTFT  per request: first token event - send
  TPOT  per request with output_len > 1: (E2E - TTFT) / (output_len - 1)
        (the time per output token excluding the first)
  ITL   every gap between consecutive token events, of all requests pooled
  E2E   per request: end of stream - send
Each of TTFT/TPOT/ITL/E2E gets mean, median, std, p90, p99 (and min/max) in
milliseconds; percentiles interpolate linearly between order statistics
(numpy.percentile's default). Pure functions; no I/O.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Dict, List, Sequence

from bench_clients import RequestResult

PERCENTILES = (50, 90, 99)


def percentile(values: Sequence[float], q: float) -> float:
    """Linear interpolation between the order statistics (numpy default)."""
    if not values:
        return 0.0
    s = sorted(values)
    pos = (len(s) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def summary_ms(values_s: Sequence[float]) -> Dict[str, float]:
    """{mean, median, std, p90, p99, min, max, n} of seconds, in ms."""
    ms = [v * 1000.0 for v in values_s]
    n = len(ms)
    mean = sum(ms) / n if n else 0.0
    std = math.sqrt(sum((v - mean) ** 2 for v in ms) / n) if n else 0.0
    out = {"n": n, "mean": mean, "median": percentile(ms, 50), "std": std,
           "min": min(ms) if ms else 0.0, "max": max(ms) if ms else 0.0}
    for q in PERCENTILES[1:]:
        out[f"p{q}"] = percentile(ms, q)
    return out


def tpot(r: RequestResult) -> float:
    """vLLM's TPOT of one request (seconds); requires r.output_len > 1."""
    return (r.latency - r.ttft) / (r.output_len - 1)


def compute(results: List[RequestResult], duration_s: float) -> dict:
    ok = [r for r in results if r.success]
    total_in = sum(r.prompt_len for r in ok)
    total_out = sum(r.output_len for r in ok)
    d = duration_s if duration_s > 0 else float("nan")
    return {
        "duration_s": duration_s,
        "num_requests": len(results),
        "completed": len(ok),
        "failed": len(results) - len(ok),
        "total_input_tokens": total_in,
        "total_output_tokens": total_out,
        "request_throughput": len(ok) / d,
        "output_throughput": total_out / d,
        "total_token_throughput": (total_in + total_out) / d,
        "ttft_ms": summary_ms([r.ttft for r in ok]),
        "tpot_ms": summary_ms([tpot(r) for r in ok if r.output_len > 1]),
        "itl_ms": summary_ms([g for r in ok for g in r.itl]),
        "e2el_ms": summary_ms([r.latency for r in ok]),
    }


def per_request(results: List[RequestResult], t0: float) -> List[dict]:
    """The raw per-request records for the JSON (times in seconds; start is
    relative to the run's first send)."""
    out = []
    for r in results:
        d = dataclasses.asdict(r)
        d.pop("text", None)
        d.pop("token_ids", None)
        d["start"] = r.start - t0 if r.start else 0.0
        out.append(d)
    return out
