"""One benchmark run of tools/bench: sends the requests with a concurrency
cap and/or a request rate, gathers the results, computes the metrics.

Contract: run_load() runs on the caller's asyncio loop and returns a dict
{max_concurrency, request_rate, metrics, peak_concurrency, errors, requests}
(JSON-ready). A failed request is counted, never raised.
"""
from __future__ import annotations

import asyncio
import time
from typing import List, Optional

import bench_metrics
from bench_clients import RequestResult
from bench_workload import Request, arrival_delays


async def run_load(client, requests: List[Request], max_concurrency: Optional[int],
                   request_rate: float = float("inf"), burstiness: float = 1.0,
                   seed: int = 0, timeout: Optional[float] = None) -> dict:
    """timeout: seconds after which unfinished requests are cancelled and
    counted as failed ("timeout"); the run then has timed_out true."""
    sem = asyncio.Semaphore(max_concurrency) if max_concurrency else None
    in_flight, peak = 0, 0

    async def one(req: Request):
        nonlocal in_flight, peak
        if sem is None:
            return await counted(req)
        async with sem:
            return await counted(req)

    async def counted(req: Request):
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        try:
            return await client.send(req)
        finally:
            in_flight -= 1

    t0 = time.perf_counter()
    tasks = []
    for req, delay in zip(requests, arrival_delays(len(requests), request_rate, burstiness, seed)):
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.get_running_loop().create_task(one(req)))
    left = None if timeout is None else max(0.0, timeout - (time.perf_counter() - t0))
    _, pending = await asyncio.wait(tasks, timeout=left) if tasks else (set(), set())
    for t in pending:
        t.cancel()
    if pending:
        await asyncio.wait(pending)
    duration = time.perf_counter() - t0
    results = [t.result() if not t.cancelled() else RequestResult(req.index, req.output_len, error="timeout")
               for t, req in zip(tasks, requests)]
    errors = sorted({r.error for r in results if not r.success})[:5]
    return {
        "max_concurrency": max_concurrency,
        "request_rate": None if request_rate == float("inf") else request_rate,
        "peak_concurrency": peak,
        "timed_out": bool(pending),
        "metrics": bench_metrics.compute(list(results), duration),
        "errors": errors,
        "requests": bench_metrics.per_request(list(results), t0),
    }


def format_run(label: str, run: dict) -> str:
    """A vLLM-style text block of one run's metrics."""
    m = run["metrics"]
    lines = [f"============ {label} (max concurrency {run['max_concurrency']}, "
             f"rate {run['request_rate'] or 'inf'}) ============",
             f"{'Successful requests:':<36}{m['completed']}",
             f"{'Failed requests:':<36}{m['failed']}",
             f"{'Benchmark duration (s):':<36}{m['duration_s']:.2f}",
             f"{'Total input tokens:':<36}{m['total_input_tokens']}",
             f"{'Total generated tokens:':<36}{m['total_output_tokens']}",
             f"{'Request throughput (req/s):':<36}{m['request_throughput']:.3f}",
             f"{'Output token throughput (tok/s):':<36}{m['output_throughput']:.2f}",
             f"{'Total token throughput (tok/s):':<36}{m['total_token_throughput']:.2f}"]
    for key, name in (("ttft_ms", "TTFT"), ("tpot_ms", "TPOT"), ("itl_ms", "ITL"),
                      ("e2el_ms", "E2E latency")):
        s = m[key]
        lines.append(f"{name + ' (ms)':<16} mean {s['mean']:9.2f}  median {s['median']:9.2f}  "
                     f"p90 {s['p90']:9.2f}  p99 {s['p99']:9.2f}")
    for e in run["errors"]:
        lines.append(f"error: {e}")
    return "\n".join(lines)
