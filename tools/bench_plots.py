"""PNG plots of tools/bench results with matplotlib (Agg backend, no display).

Contract: series is a list of (label, runs) where runs are run_load() dicts;
each function writes one PNG and returns its path. Raises ImportError with a
clear message when matplotlib is missing (pip install -r
tools/requirements-test.txt).
"""
from __future__ import annotations

import os
from typing import List, Tuple


def _plt():
    try:
        import matplotlib
    except ImportError as e:
        raise ImportError("plots need matplotlib: .venv/bin/pip install -r "
                          "tools/requirements-test.txt") from e
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _cdf(values):
    s = sorted(values)
    n = len(s)
    return s, [(i + 1) / n for i in range(n)]


def _series_values(run: dict, key: str) -> List[float]:
    ok = [r for r in run["requests"] if r["success"]]
    if key == "ttft":
        return [r["ttft"] * 1000 for r in ok]
    if key == "e2el":
        return [r["latency"] * 1000 for r in ok]
    if key == "itl":
        return [g * 1000 for r in ok for g in r["itl"]]
    if key == "tpot":
        return [(r["latency"] - r["ttft"]) * 1000 / (r["output_len"] - 1)
                for r in ok if r["output_len"] > 1]
    raise ValueError(key)


def latency_cdfs(series: List[Tuple[str, List[dict]]], path: str, title: str = "") -> str:
    """A 2x2 figure: the CDFs of TTFT, TPOT, ITL and E2E latency, one line per
    (label, run)."""
    plt = _plt()
    fig, axes = plt.subplots(2, 2, figsize=(11, 8))
    names = (("ttft", "TTFT (ms)"), ("tpot", "TPOT (ms)"), ("itl", "ITL (ms)"),
             ("e2el", "E2E latency (ms)"))
    for ax, (key, xlabel) in zip(axes.flat, names):
        lo, hi = float("inf"), 0.0
        for label, runs in series:
            for run in runs:
                vals = _series_values(run, key)
                if not vals:
                    continue
                xs, ys = _cdf(vals)
                lo, hi = min(lo, xs[0]), max(hi, xs[-1])
                ax.step(xs, ys, where="post", label=f"{label} c={run['max_concurrency']}")
        if 0 < lo and hi / lo > 50:  # values over decades: a log axis keeps both ends readable
            ax.set_xscale("log")
            xlabel += ", log scale"
        ax.set_xlabel(xlabel)
        ax.set_ylabel("fraction of samples")
        ax.grid(True, alpha=0.3)
    axes.flat[0].legend(fontsize=7)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def throughput_vs_concurrency(series: List[Tuple[str, List[dict]]], path: str,
                              title: str = "") -> str:
    """Output token throughput and request throughput against max concurrency."""
    plt = _plt()
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.5))
    for label, runs in series:
        pts = sorted((r["max_concurrency"] or r["peak_concurrency"], r["metrics"]) for r in runs)
        xs = [c for c, _ in pts]
        a1.plot(xs, [m["output_throughput"] for _, m in pts], marker="o", label=label)
        a2.plot(xs, [m["request_throughput"] for _, m in pts], marker="o", label=label)
    a1.set_ylabel("output tokens / s")
    a2.set_ylabel("requests / s")
    for ax in (a1, a2):
        ax.set_xlabel("max concurrency")
        ax.set_xscale("log", base=2)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
