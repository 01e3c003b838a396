"""Smoke test of tools/bench against `pagoda serve` on the real model (the
session's `server` fixture): a few short requests per route, then checks of
the result JSON's structure and internal consistency (counts, non-negative
latencies, vLLM's TPOT definition, percentile order), never of speed."""
import json
import math
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BENCH = ROOT / "tools" / "bench"
sys.path.insert(0, str(ROOT / "tools"))

import bench_metrics  # noqa: E402
import bench_workload  # noqa: E402

NUM, OUT = 4, 6


def run_bench(server, tmp_path, name, *args):
    out = tmp_path / f"{name}.json"
    cmd = [sys.executable, str(BENCH), "--base-url", server.base_url, "--num-prompts", str(NUM),
           "--output-len", str(OUT), "--ignore-eos", "--quiet", "--result-json", str(out), *args]
    proc = subprocess.run(cmd, capture_output=True, timeout=600)
    assert proc.returncode == 0, (proc.stdout.decode() + proc.stderr.decode())[-3000:] + server.log()
    return json.loads(out.read_text())


def check_summary(s, n):
    assert s["n"] == n
    assert 0 <= s["min"] <= s["median"] <= s["p90"] <= s["p99"] <= s["max"] + 1e-9
    assert s["min"] - 1e-9 <= s["mean"] <= s["max"] + 1e-9


def check_run(run, prompt_lens=None):
    m, reqs = run["metrics"], run["requests"]
    assert m["num_requests"] == NUM == len(reqs)
    assert m["completed"] == NUM and m["failed"] == 0, run["errors"]
    assert 1 <= run["peak_concurrency"] <= (run["max_concurrency"] or NUM)
    for r in reqs:
        assert r["success"] and r["usage_reported"]
        assert r["output_len"] == r["max_tokens"]  # ignore_eos: exactly max_tokens
        assert r["token_events"] >= 1 and len(r["itl"]) == r["token_events"] - 1
        assert r["start"] >= 0 and 0 <= r["ttft"] <= r["latency"]
        assert all(g >= 0 for g in r["itl"])
        assert sum(r["itl"]) <= r["latency"] - r["ttft"] + 1e-6
        assert r["start"] + r["latency"] <= m["duration_s"] + 1e-3
    if prompt_lens is not None:
        assert [r["prompt_len"] for r in reqs] == prompt_lens
    assert m["total_output_tokens"] == sum(r["output_len"] for r in reqs)
    assert m["total_input_tokens"] == sum(r["prompt_len"] for r in reqs)
    d = m["duration_s"]
    assert d > 0
    assert math.isclose(m["request_throughput"], NUM / d, rel_tol=1e-9)
    assert math.isclose(m["output_throughput"], m["total_output_tokens"] / d, rel_tol=1e-9)
    assert math.isclose(m["total_token_throughput"],
                        (m["total_input_tokens"] + m["total_output_tokens"]) / d, rel_tol=1e-9)
    # vLLM's TPOT: (E2E - TTFT) / (output_len - 1) per request, excluding the first token.
    tpots = [(r["latency"] - r["ttft"]) / (r["output_len"] - 1) * 1000 for r in reqs]
    assert math.isclose(m["tpot_ms"]["mean"], sum(tpots) / len(tpots), rel_tol=1e-9)
    assert math.isclose(m["ttft_ms"]["mean"], sum(r["ttft"] for r in reqs) * 1000 / NUM, rel_tol=1e-9)
    assert math.isclose(m["e2el_ms"]["median"],
                        bench_metrics.percentile([r["latency"] * 1000 for r in reqs], 50), rel_tol=1e-9)
    check_summary(m["ttft_ms"], NUM)
    check_summary(m["tpot_ms"], NUM)
    check_summary(m["e2el_ms"], NUM)
    check_summary(m["itl_ms"], sum(len(r["itl"]) for r in reqs))


def test_completions_token_ids_sweep_and_plots(server, tmp_path):
    pytest.importorskip("matplotlib", reason="plots need matplotlib (tools/requirements-test.txt)")
    plots = tmp_path / "plots"
    res = run_bench(server, tmp_path, "completions", "--backend", "openai-completions",
                    "--prompt-format", "ids", "--input-len", "8-24", "--max-concurrency", "1,4",
                    "--seed", "3", "--plot-dir", str(plots))
    assert res["backend"] == "openai-completions" and res["prompt_format"] == "ids"
    assert [r["max_concurrency"] for r in res["runs"]] == [1, 4]
    assert res["runs"][0]["peak_concurrency"] == 1
    want = [r.prompt_len for r in bench_workload.make_requests(NUM, "8-24", str(OUT), seed=3)]
    for run in res["runs"]:
        check_run(run, prompt_lens=want)
        assert all(r["max_tokens"] == OUT for r in run["requests"])  # token-id prompts: exact lengths
    for name in ("latency_cdf.png", "throughput.png"):
        assert (plots / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(res["plots"]) == 2


def test_chat_poisson(server, tmp_path):
    res = run_bench(server, tmp_path, "chat", "--backend", "openai-chat", "--input-len", "12",
                    "--request-rate", "50")
    assert res["request_rate"] == 50 and res["prompt_format"] == "text"
    check_run(res["runs"][0])


def test_ws_chat_mix(server, tmp_path):
    res = run_bench(server, tmp_path, "ws", "--backend", "ws", "--dataset", "chat",
                    "--max-model-len", "48", "--max-concurrency", "2")
    check_run(res["runs"][0])
    want = [r.output_len for r in bench_workload.make_requests(NUM, "1", "1", "chat", "text", max_total=48)]
    assert [r["max_tokens"] for r in res["runs"][0]["requests"]] == want


def test_percentile_matches_numpy_definition():
    # numpy.percentile([1, 2, 3, 4], q) with linear interpolation.
    assert bench_metrics.percentile([4, 1, 3, 2], 50) == 2.5
    assert math.isclose(bench_metrics.percentile([1, 2, 3, 4], 90), 3.7)
    assert math.isclose(bench_metrics.percentile([1, 2, 3, 4], 99), 3.97)
    assert bench_metrics.percentile([5.0], 99) == 5.0


def test_workload_is_deterministic_and_in_range():
    a = bench_workload.make_requests(16, "64-256", "8-16", "random", "ids", (256, 8192), seed=7)
    b = bench_workload.make_requests(16, "64-256", "8-16", "random", "ids", (256, 8192), seed=7)
    assert [r.prompt for r in a] == [r.prompt for r in b]
    for r in a:
        assert 64 <= r.prompt_len <= 256 and len(r.prompt) == r.prompt_len
        assert 8 <= r.output_len <= 16 and all(256 <= t < 8192 for t in r.prompt)
    chat = bench_workload.make_requests(200, "1", "1", "chat", "text", seed=1, max_total=1024)
    assert all(r.prompt_len + r.output_len <= 1024 for r in chat)
    gaps = list(bench_workload.arrival_delays(2000, 10.0, seed=2))
    assert 0.08 < sum(gaps) / len(gaps) < 0.12  # mean gap 1 / rate


def test_fairness_scenario_runs_its_heavy_client_in_another_process(server):
    """tools/bench-fairness's scenario at a tiny size on the session's server:
    the flood's heavy client runs in a spawned process and its results come
    back whole (every request answered, 10x the light client's)."""
    import argparse
    import asyncio
    import bench_fairness
    args = argparse.Namespace(light_requests=2, light_rate=50.0, input_len="8", output_len="4",
                              backlog_requests=2, backlog_a_input="8", backlog_a_output="2",
                              backlog_b_input="4", backlog_b_output="3")
    run = asyncio.run(bench_fairness.run_policy(server.base_url, "", args))
    assert run["flood_light"]["metrics"]["completed"] == 2
    assert run["flood_heavy"]["metrics"]["completed"] == 20
    assert len(run["flood_heavy"]["requests"]) == 20
    assert run["flood_heavy"]["pid"] != os.getpid()
    assert run["flood_total_token_throughput"] > 0
    s = bench_fairness.summary("fair", run, 1024, 1.0, 2.0)
    assert s["failed"] == 0 and s["light_ttft_p50_flood_ms"] > 0


def test_fairness_checks_cover_every_run_of_a_repeated_policy():
    """tools/bench-fairness --policies fair,fcfs,fcfs,fair: the light-client
    check must hold in every fair run, and the throughput ratio is that of
    the policies' medians (so one drifting run does not decide it)."""
    import importlib.machinery
    import importlib.util
    loader = importlib.machinery.SourceFileLoader("bench_fairness_cli", str(ROOT / "tools" / "bench-fairness"))
    spec = importlib.util.spec_from_loader("bench_fairness_cli", loader)
    cli = importlib.util.module_from_spec(spec)
    loader.exec_module(cli)

    def run(policy, ratio, throughput):
        return {"policy": policy, "light_ttft_ratio": ratio, "backlog": {"gap": 10.0}, "vtc_bound": 100.0,
                "flood_total_token_throughput": throughput}

    checks = cli.policy_checks([run("fair", 1.1, 100.0), run("fcfs", 3.0, 101.0),
                                run("fcfs", 3.2, 99.0), run("fair", 1.2, 140.0), run("fair", 1.0, 99.5)])
    assert checks["light_ttft_ratios"] == [1.1, 1.2, 1.0]
    assert checks["light_ttft_within_1.3x"] is True
    assert checks["throughput_fair_over_fcfs"] == 1.0  # medians 100 / 100, not the 140 outlier
    assert checks["throughput_within_3pct"] is True
    checks = cli.policy_checks([run("fair", 1.1, 100.0), run("fair", 1.4, 100.0)])
    assert checks["light_ttft_within_1.3x"] is False  # one fair run over 1.3x fails the check
    assert "throughput_fair_over_fcfs" not in checks
