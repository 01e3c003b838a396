"""tools/bench --compare-llama-cpp: Pagoda and llama.cpp's llama-server side
by side, one after the other in one run, with the same GGUF, the same thread
count, greedy sampling and ignore_eos, on the four loads of issue 10, plus
each server's greedy agreement with transformers on the golden prompts
(tests/data/logits/smollm2.json). Prints a ratio table (markdown) and writes
compare.json, compare.md and PNG plots into --out-dir.

  .venv/bin/python tools/bench --compare-llama-cpp [--pagoda-bin build/pagoda]
      [--llama-bin DIR] [--model GGUF] [--threads 2] [--rounds 1] [--quick]
      [--loads decode1,decode4k,streams16,streams32,ttft512,mixed] [--goals 10|21]
      [--output-len N] [--out-dir /tmp/pagoda-compare]

With --goals 21 (a model of realistic size, e.g. from tools/gen-dummy-gguf.py)
the table checks issue 21's goals, and the report adds the roofline figures
(tools/bench_roofline.py: bytes a decode step reads against the measured
bandwidth, prefill GOP/s against the int8 peak) and each server's resident
memory after every load against the file's size.

The two servers' runs of each load are back to back (see compare_round), so
both see about the same background load. Every load goes through streaming
/v1/completions with token-id prompts (exact prompt lengths; both servers
get identical requests, seeded).
Contract: stops every server it started, also on errors and Ctrl-C.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys

import bench_clients
import bench_run
import bench_servers
import bench_workload
from bench_servers import ROOT

GOLDEN = ROOT / "tests" / "data" / "logits" / "smollm2.json"
SAMPLING = {"temperature": 0.0, "ignore_eos": True}

# name, what, num requests, max concurrency, input len, output len, metric, goal
LOADS = (
    ("decode1", "batch-1 decode, 128 new tokens (tok/s = 1000 / mean TPOT)",
     3, 1, "16", "128", "decode_tok_s", (">=", 1.3)),
    ("streams16", "16 concurrent streams, prompts 16-32, 128 new each (aggregate output tok/s)",
     16, 16, "16-32", "128", "output_throughput", (">=", 2.5)),
    ("streams32", "32 concurrent streams, prompts 16-32, 128 new each (aggregate output tok/s)",
     32, 32, "16-32", "128", "output_throughput", (">=", 2.5)),
    ("decode4k", "batch-1 decode after a 4000-token prompt, 48 new tokens (tok/s = 1000 / mean TPOT)",
     2, 1, "4000", "48", "decode_tok_s", (">=", 1.2)),
    ("ttft512", "time to first token, 512-token prompt (median TTFT ms)",
     3, 1, "512", "1", "ttft_median_ms", ("<=", 0.6)),
    ("mixed", "64 requests, 32 concurrent, prompts 64-256, 128 new (output tok/s)",
     64, 32, "64-256", "128", "output_throughput", (">=", 2.0)),
)
# Issue 21's goals at realistic sizes (--goals 21), where they differ.
GOALS_21 = {"decode1": (">=", 1.2), "streams16": (">=", 2.5), "streams32": (">=", 2.5),
            "ttft512": ("<=", 0.5)}
QUICK = {"decode1": (1, 1, "16", "16"), "decode4k": (1, 1, "4000", "4"), "streams16": (2, 2, "16-32", "16"), "streams32": (4, 4, "16-32", "16"),
         "ttft512": (1, 1, "512", "1"), "mixed": (4, 2, "64-256", "16")}


def parse_args(argv):
    p = argparse.ArgumentParser(prog="tools/bench --compare-llama-cpp", description=__doc__)
    p.add_argument("--pagoda-bin", default="", help="default: build/pagoda")
    p.add_argument("--llama-bin", default="", help="folder with llama-server (default: tools/peers/llama-cpp.sh)")
    p.add_argument("--model", default="", help="the GGUF (default: tools/fetch-model)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--port", type=int, default=18150, help="first of two ports")
    p.add_argument("--llama-ctx", type=int, default=32768, help="llama-server -c for -np 32 (1024 per slot)")
    p.add_argument("--pagoda-arg", action="append", default=[],
                   help="extra `pagoda serve` argument (repeatable), e.g. --pagoda-arg=--kv-cache-memory=805306368")
    p.add_argument("--llama-env", action="append", default=[],
                   help="KEY=VALUE for llama-server's environment (repeatable), e.g. OMP_WAIT_POLICY=passive")
    p.add_argument("--rounds", type=int, default=1, help="Pagoda then llama-server, this many times (median)")
    p.add_argument("--loads", default="decode1,streams32,ttft512,mixed")
    p.add_argument("--wait-load", type=float, default=0.0,
                   help="first wait (up to --wait-max s) until the 1-minute load average is below this")
    p.add_argument("--wait-max", type=float, default=0.0)
    p.add_argument("--no-golden", action="store_true")
    p.add_argument("--load-timeout", type=float, default=600.0,
                   help="seconds per load; then unfinished requests are cancelled (marked in the table)")
    p.add_argument("--quick", action="store_true", help="tiny loads (to test this script)")
    p.add_argument("--goals", default="10", choices=["10", "21"],
                   help="whose goals the table checks: issue 10's (default model) or issue 21's (real sizes)")
    p.add_argument("--output-len", type=int, default=0,
                   help="new tokens per request of the decoding loads (0: each load's own; big models need fewer)")
    p.add_argument("--num-scale", type=float, default=1.0,
                   help="scales the request count of loads with more requests than streams (mixed)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out-dir", default="/tmp/pagoda-compare")
    return p.parse_args(argv)


def selected_loads(args):
    names = args.loads.split(",")
    out = []
    for name, what, n, c, il, ol, metric, goal in LOADS:
        if name in names:
            if args.quick:
                n, c, il, ol = QUICK[name]
            if args.output_len > 0 and ol != "1" and name != "decode4k":
                ol = str(args.output_len)
            if n > c:
                n = max(c, int(round(n * args.num_scale)))
            if args.goals == "21":
                goal = GOALS_21.get(name, goal)
            out.append({"name": name, "what": what, "num": n, "concurrency": c,
                        "input_len": il, "output_len": ol, "metric": metric, "goal": goal})
    return out


def metric_value(load, run) -> float:
    m = run["metrics"]
    if load["metric"] == "decode_tok_s":
        return 1000.0 / m["tpot_ms"]["mean"] if m["tpot_ms"]["mean"] else 0.0
    if load["metric"] == "ttft_median_ms":
        return m["ttft_ms"]["median"]
    return m[load["metric"]]


async def run_loads(srv, loads, seed, vocab_hi, load_timeout=None, idle=None) -> dict:
    """Every load on one server: one warm-up request, then the load. Records
    the server's CPU seconds during each load (server_cpu_s) beside the wall
    time, and those of the idle other server (idle_peer_cpu_s), if given."""
    base_url = srv.base_url
    model = _served_model(base_url)
    client = bench_clients.OpenAIClient(base_url, "completions", model, extra=SAMPLING)
    out = {}
    try:
        for load in loads:
            reqs = bench_workload.make_requests(load["num"], load["input_len"], load["output_len"],
                                                "random", "ids", (256, vocab_hi), seed)
            warm = await client.send(bench_workload.Request(-1, reqs[0].prompt[:16], 16, 4))
            if not warm.success:
                raise RuntimeError(f"warm-up failed on {base_url}: {warm.error}")
            before, cpu0 = bench_servers.loadavg(), srv.cpu_seconds()
            idle0 = idle.cpu_seconds() if idle else float("nan")
            run = await bench_run.run_load(client, reqs, load["concurrency"], timeout=load_timeout)
            run["loadavg_before"], run["loadavg_after"] = before, bench_servers.loadavg()
            run["server_cpu_s"] = srv.cpu_seconds() - cpu0
            run["idle_peer_cpu_s"] = (idle.cpu_seconds() - idle0) if idle else None
            run["value"] = metric_value(load, run)
            run["memory_mb"] = srv.memory_mb()
            print(bench_run.format_run(f"{base_url} {load['name']}", run), flush=True)
            out[load["name"]] = run
    finally:
        await client.close()
    return out


def _served_model(base_url) -> str:
    import httpx
    return httpx.get(base_url + "/v1/models", timeout=30).json()["data"][0]["id"]


def golden_prompts():
    with open(GOLDEN) as f:
        return json.load(f)["prompts"]


def matching_prefix(a, b) -> int:
    n = 0
    while n < len(a) and n < len(b) and a[n] == b[n]:
        n += 1
    return n


async def pagoda_golden(server) -> dict:
    """Greedy continuations over /v1/ws (it streams token ids): each golden
    prompt's text, checked to tokenize to the golden ids with /tokenize."""
    import httpx
    ws = bench_clients.WsClient(server.base_url, extra={"temperature": 0.0, "ignore_eos": True})
    per, total, notes = [], 0, []
    try:
        async with httpx.AsyncClient(timeout=60) as http:
            for i, p in enumerate(golden_prompts()):
                tok = (await http.post(server.base_url + "/tokenize", json={"prompt": p["prompt"]})).json()
                if tok.get("tokens") != p["ids"]:
                    notes.append(f"prompt {i}: /tokenize gave {tok.get('tokens')} != golden ids")
                r = await ws.send(bench_workload.Request(i, p["prompt"], len(p["ids"]), len(p["greedy"])))
                if not r.success:
                    raise RuntimeError(f"golden prompt {i}: {r.error}")
                m = matching_prefix(r.token_ids, p["greedy"])
                per.append(m)
                total += m
    finally:
        await ws.close()
    return {"matching": total, "of": sum(len(p["greedy"]) for p in golden_prompts()),
            "per_prompt": per, "notes": notes, "route": "/v1/ws, text prompt (ids checked by /tokenize)"}


async def llama_golden(server) -> dict:
    """Greedy continuations from llama-server's /completion with the golden ids."""
    import httpx
    per, total = [], 0
    async with httpx.AsyncClient(timeout=120) as http:
        for i, p in enumerate(golden_prompts()):
            body = {"prompt": p["ids"], "n_predict": len(p["greedy"]), "temperature": 0.0,
                    "top_k": 1, "ignore_eos": True, "cache_prompt": False, "return_tokens": True}
            r = (await http.post(server.base_url + "/completion", json=body)).json()
            if "tokens" not in r:
                raise RuntimeError(f"llama-server /completion returned no tokens: {str(r)[:300]}")
            m = matching_prefix(r["tokens"], p["greedy"])
            per.append(m)
            total += m
    return {"matching": total, "of": sum(len(p["greedy"]) for p in golden_prompts()),
            "per_prompt": per, "notes": [], "route": "/completion, golden token ids, top_k 1"}


def fidelity_test_line(pagoda_bin: str) -> str:
    """The quantized fidelity test's own count, when its binary is beside pagoda."""
    exe = os.path.join(os.path.dirname(pagoda_bin), "tests", "llama_fidelity_test")
    if not os.path.exists(exe):
        return ""
    p = subprocess.run([exe, "--gtest_filter=SmolLM2Fidelity.QuantizedPathLastLogitsAndGreedy"],
                       capture_output=True, timeout=600)
    for line in p.stdout.decode(errors="replace").splitlines():
        if "greedy tokens matching HF" in line:
            return line.strip()
    return ""


def compare_round(args, pagoda_bin, llama_server, model, loads, vocab_hi, rnd, golden) -> dict:
    """One round, interleaved so both servers see the same background load:
    `pagoda serve` stays up (idle while llama-server runs); llama-server runs
    with -np 1 for the batch-1 loads (decode1, ttft512), then -np 32 for the
    others; each load runs on one server, then at once on the other (Pagoda
    first in even rounds, llama-server first in odd ones). Only one server
    is ever under load."""
    p_out = {"loads": {}}
    l_out, commands = {"loads": {}}, []
    single = [x for x in loads if x["concurrency"] == 1]
    multi = [x for x in loads if x["concurrency"] > 1]
    extra = next(([f] for f in ("--no-ui", "--no-webui") if bench_servers.llama_help_has(llama_server, f)), [])
    with bench_servers.start_pagoda(pagoda_bin, model, args.port, args.threads,
                                    os.path.join(args.out_dir, f"pagoda-{rnd}.log"), args.pagoda_arg) as ps:
        p_out["command"] = " ".join(ps.args)
        p_out["startup"] = [ln for ln in ps.tail(20000).splitlines() if ln.startswith("pagoda")][:8]
        if golden:
            p_out["golden"] = asyncio.run(pagoda_golden(ps))
        for group, np_, ctx in ((single, 1, 4096), (multi, 32, args.llama_ctx)):
            if not group and not (golden and np_ == 1):
                continue
            log_path = os.path.join(args.out_dir, f"llama-np{np_}-{rnd}.log")
            with bench_servers.start_llama(llama_server, model, args.port + 1, args.threads, np_, ctx,
                                           log_path, extra, dict(kv.split("=", 1) for kv in args.llama_env)) as ls:
                commands.append(" ".join(ls.args))
                if golden and np_ == 1:
                    l_out["golden"] = asyncio.run(llama_golden(ls))
                for load in group:
                    order = ((ps, p_out), (ls, l_out))
                    for srv, out in (order if rnd % 2 == 0 else order[::-1]):
                        other = ls if srv is ps else ps
                        out["loads"].update(asyncio.run(
                            run_loads(srv, [load], args.seed, vocab_hi, args.load_timeout, other)))
    env = " ".join(args.llama_env)
    l_out["command"] = " ; ".join((env + " " if env else "") + c for c in commands)
    return {"pagoda": p_out, "llama": l_out}


def main(argv) -> int:
    import bench_report
    import bench_roofline
    args = parse_args(argv)
    # SIGTERM unwinds like Ctrl-C, so the `with` blocks stop the servers.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    os.makedirs(args.out_dir, exist_ok=True)
    waited = bench_servers.wait_for_load(args.wait_load, args.wait_max) if args.wait_load > 0 else 0.0
    pagoda_bin = os.path.abspath(args.pagoda_bin or bench_servers.newest_pagoda())
    model = args.model or bench_servers.fetch_model()
    llama_dir = args.llama_bin or bench_servers.build_llama_cpp()
    llama_server = os.path.join(llama_dir, "llama-server")
    loads = selected_loads(args)
    vocab_hi = 8192
    info = {"machine": bench_servers.machine(), "pagoda_bin": pagoda_bin,
            "pagoda_bin_mtime": os.path.getmtime(pagoda_bin), "llama_server": llama_server,
            "llama_build": _read(os.path.join(os.path.dirname(llama_dir), "BUILD_OK")),
            "model": model, "threads": args.threads, "sampling": SAMPLING,
            "loads": loads, "rounds": [], "waited_s": waited}
    print(f"compare: pagoda {pagoda_bin}\ncompare: llama-server {llama_server}\n"
          f"compare: model {model}; threads {args.threads}; machine {info['machine']}", flush=True)
    info["costs"] = bench_roofline.model_costs(model)
    info["ceilings"] = bench_roofline.ceilings(os.path.join(os.path.dirname(pagoda_bin), "tools", "bench_kernels"))
    for r in range(args.rounds):
        golden = (r == 0) and not args.no_golden
        info["rounds"].append(compare_round(args, pagoda_bin, llama_server, model, loads,
                                            vocab_hi, r, golden))
    if not args.no_golden:
        info["fidelity_test"] = fidelity_test_line(pagoda_bin)
    info["machine"]["loadavg_end"] = bench_servers.loadavg()
    table = bench_report.ratio_table(info)
    info["table_md"] = table
    info["plots"] = bench_report.plots(info, args.out_dir)
    with open(os.path.join(args.out_dir, "compare.json"), "w") as f:
        json.dump(info, f, indent=1)
    with open(os.path.join(args.out_dir, "compare.md"), "w") as f:
        f.write(bench_report.markdown(info))
    print(bench_report.markdown(info))
    return 0


def _read(path) -> str:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return ""


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
