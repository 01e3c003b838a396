"""The fairness scenario of tools/bench-fairness: two clients on one server,
told apart by the request's `user` (both come from one address, as behind a
gateway).

Phases, per server (one per --policies entry, started in turn):
  unloaded  the light client alone, Poisson at --light-rate;
  flood     the light client again, with the heavy client at 10x its rate
            (same lengths): the light client's TTFT p50 against the
            unloaded one, and the total token throughput;
  backlog   two clients, A and B, each sending --backlog-requests at once
            (both backlogged): the weighted service each received while both
            still had requests waiting for their first token, and the gap
            against the VTC bound 2 * (w_p * L_in + w_q * M), L_in the
            longest prompt and M the KV cache in tokens.

The heavy client of the flood runs in a process of its own (as a second
user would: another program, usually on another machine), so that parsing
its streams never delays the light client's event loop, which times the
light client's TTFT.

Service, client side: a request's prompt counts (w_p * prompt tokens) at its
first token, each streamed token w_q; a client is backlogged while one of its
requests has not had its first token. Pure functions below; the I/O is in
run_policy().
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import multiprocessing
import os
from typing import Dict, List, Sequence, Tuple

import bench_clients
import bench_run
import bench_workload


def service_events(results: Sequence[bench_clients.RequestResult], t0: float, w_p: float,
                   w_q: float) -> List[Tuple[float, float]]:
    """(time since t0, weighted service) of every first token and later token."""
    out = []
    for r in results:
        if not r.success:
            continue
        t = r.start - t0 + r.ttft
        out.append((t, w_p * r.prompt_len + w_q))
        for gap in r.itl:
            t += gap
            out.append((t, w_q))
    return sorted(out)


def backlogged_until(results: Sequence[bench_clients.RequestResult], t0: float) -> float:
    """When the client's last request got its first token (requests sent at
    t0 all at once: until then one of them was waiting)."""
    ok = [r.start - t0 + r.ttft for r in results if r.success]
    return max(ok) if ok else 0.0


def service_in(events: Sequence[Tuple[float, float]], t1: float, t2: float) -> float:
    return sum(v for t, v in events if t1 <= t <= t2)


def backlog_gap(a: Sequence[bench_clients.RequestResult], b: Sequence[bench_clients.RequestResult],
                t0: float, w_p: float, w_q: float) -> Dict[str, float]:
    """The service of A and B over the window in which both were backlogged."""
    end = min(backlogged_until(a, t0), backlogged_until(b, t0))
    sa = service_in(service_events(a, t0, w_p, w_q), 0.0, end)
    sb = service_in(service_events(b, t0, w_p, w_q), 0.0, end)
    return {"window_s": end, "service_a": sa, "service_b": sb, "gap": abs(sa - sb)}


def vtc_bound(max_prompt: int, kv_tokens: int, w_p: float, w_q: float) -> float:
    """The paper's bound on the service gap of two backlogged clients."""
    return 2.0 * (w_p * max_prompt + w_q * kv_tokens)


def client(base_url: str, model: str, user: str, extra: dict):
    return bench_clients.make_client("openai-completions", base_url, model, "", dict(extra, user=user))


async def _gather_runs(pairs):
    """Runs (client, requests, rate) loads at once; returns (runs, duration)."""
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    runs = await asyncio.gather(*(bench_run.run_load(c, reqs, None, rate, 1.0, seed)
                                  for c, reqs, rate, seed in pairs))
    return runs, loop.time() - t0


def _flood_process(base_url: str, model: str, extra: dict, n: int, input_len: str, output_len: str,
                   rate: float, seed: int) -> dict:
    """The heavy client's load, run in a process of its own (spawned); the
    run's dict gets that process's id as `pid`."""
    async def go():
        heavy = client(base_url, model, "heavy", extra)
        try:
            return await bench_run.run_load(heavy, bench_workload.make_requests(n, input_len, output_len, seed=seed),
                                            None, rate, 1.0, seed)
        finally:
            await heavy.close()
    return dict(asyncio.run(go()), pid=os.getpid())


async def _flood(light, base_url: str, model: str, extra: dict, args):
    """The light client here and the heavy one (10x) in its own process, at
    once; returns (light run, heavy run, duration)."""
    loop = asyncio.get_running_loop()
    n = args.light_requests
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=ctx) as pool:
        # The pool's process starts (imports) before the clock does.
        await loop.run_in_executor(pool, abs, 0)
        t0 = loop.time()
        lr, hr = await asyncio.gather(
            bench_run.run_load(light, bench_workload.make_requests(n, args.input_len, args.output_len, seed=2),
                               None, args.light_rate, 1.0, 2),
            loop.run_in_executor(pool, _flood_process, base_url, model, extra, 10 * n, args.input_len,
                                 args.output_len, 10 * args.light_rate, 3))
    return lr, hr, loop.time() - t0


async def run_policy(base_url: str, model: str, args) -> dict:
    extra = {"temperature": 0.0, "ignore_eos": True}
    light = client(base_url, model, "light", extra)
    ca, cb = client(base_url, model, "a", extra), client(base_url, model, "b", extra)
    n = args.light_requests
    mk = bench_workload.make_requests
    try:
        warm = mk(1, "8", "4", seed=99)[0]
        if not (await light.send(warm)).success:
            raise SystemExit("tools/bench-fairness: the warm-up request failed")
        unloaded = await bench_run.run_load(light, mk(n, args.input_len, args.output_len, seed=1),
                                            None, args.light_rate, 1.0, 1)
        lr, hr, flood_s = await _flood(light, base_url, model, extra, args)
        m = args.backlog_requests
        reqs_a = mk(m, args.backlog_a_input, args.backlog_a_output, seed=4)
        reqs_b = mk(m, args.backlog_b_input, args.backlog_b_output, seed=5)
        (ra, rb), _ = await _gather_runs([(ca, reqs_a, float("inf"), 4), (cb, reqs_b, float("inf"), 5)])
    finally:
        for c in (light, ca, cb):
            await c.close()
    tokens = sum(r["metrics"]["total_input_tokens"] + r["metrics"]["total_output_tokens"] for r in (lr, hr))
    return {"unloaded": unloaded, "flood_light": lr, "flood_heavy": hr, "flood_duration_s": flood_s,
            "flood_total_token_throughput": tokens / flood_s if flood_s > 0 else 0.0,
            "backlog_a": ra, "backlog_b": rb,
            "backlog_prompts": max(r.prompt_len for r in reqs_a + reqs_b)}


def gap_of(run: dict, w_p: float, w_q: float) -> Dict[str, float]:
    """backlog_gap from the JSON records of the backlog phase (starts are
    relative to each run's first send; both runs began together)."""
    def results(recs):
        out = []
        for d in recs:
            r = bench_clients.RequestResult(d["index"])
            r.success, r.start, r.ttft, r.itl, r.prompt_len = d["success"], d["start"], d["ttft"], d["itl"], d["prompt_len"]
            out.append(r)
        return out
    return backlog_gap(results(run["backlog_a"]["requests"]), results(run["backlog_b"]["requests"]), 0.0, w_p, w_q)


def summary(policy: str, run: dict, kv_tokens: int, w_p: float, w_q: float) -> dict:
    un = run["unloaded"]["metrics"]["ttft_ms"]["median"]
    fl = run["flood_light"]["metrics"]["ttft_ms"]["median"]
    gap = gap_of(run, w_p, w_q)
    failed = sum(run[k]["metrics"]["failed"] for k in ("unloaded", "flood_light", "flood_heavy", "backlog_a", "backlog_b"))
    return {"policy": policy, "light_ttft_p50_unloaded_ms": un, "light_ttft_p50_flood_ms": fl,
            "light_ttft_ratio": fl / un if un > 0 else float("nan"),
            "heavy_ttft_p50_flood_ms": run["flood_heavy"]["metrics"]["ttft_ms"]["median"],
            "flood_total_token_throughput": run["flood_total_token_throughput"],
            "backlog": gap, "vtc_bound": vtc_bound(run["backlog_prompts"], kv_tokens, w_p, w_q),
            "failed": failed}


def format_summary(s: dict) -> str:
    b = s["backlog"]
    return (f"[{s['policy']}] light TTFT p50 {s['light_ttft_p50_unloaded_ms']:.1f} ms alone, "
            f"{s['light_ttft_p50_flood_ms']:.1f} ms under the 10x flood (x{s['light_ttft_ratio']:.2f}); "
            f"heavy TTFT p50 {s['heavy_ttft_p50_flood_ms']:.1f} ms; "
            f"flood throughput {s['flood_total_token_throughput']:.1f} tok/s; "
            f"backlog window {b['window_s']:.2f} s: service A {b['service_a']:.0f}, B {b['service_b']:.0f}, "
            f"gap {b['gap']:.0f} (VTC bound {s['vtc_bound']:.0f}); failed {s['failed']}")

