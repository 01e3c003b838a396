"""The ratio table, markdown and plots of tools/bench --compare-llama-cpp.

Contract: takes the `info` dict bench_compare.main() builds (rounds of
{pagoda, llama} load results) and returns text / writes PNGs; no servers.
A ratio is Pagoda / llama-server of the load's metric (throughputs: higher
is better for Pagoda; TTFT: lower is better). With several rounds each
server's value is the median over the rounds.
"""
from __future__ import annotations

import os
import statistics


def _values(info, side, name):
    return [r[side]["loads"][name]["value"] for r in info["rounds"] if name in r[side]["loads"]]


def rows(info):
    out = []
    for load in info["loads"]:
        pv, lv = _values(info, "pagoda", load["name"]), _values(info, "llama", load["name"])
        if not pv or not lv:
            continue
        p, ll = statistics.median(pv), statistics.median(lv)
        ratio = p / ll if ll else float("nan")
        op, target = load["goal"]
        met = ratio >= target if op == ">=" else ratio <= target
        timed_out = [side for side in ("pagoda", "llama") for r in info["rounds"]
                     if r[side]["loads"].get(load["name"], {}).get("timed_out")]
        out.append({"load": load, "pagoda": p, "llama": ll, "ratio": ratio, "met": met,
                    "pagoda_all": pv, "llama_all": lv, "timed_out": sorted(set(timed_out))})
    return out


def _cpu_share(info, side, name) -> str:
    """The server's CPU seconds over the load's wall seconds, first round (of
    2.0 possible with 2 threads on an idle 2-core machine)."""
    run = info["rounds"][0][side]["loads"].get(name)
    if not run or "server_cpu_s" not in run:
        return "?"
    return f"{run['server_cpu_s']:.1f}/{run['metrics']['duration_s']:.1f}"


def _fmt(v, metric):
    return f"{v:.0f} ms" if metric.endswith("_ms") else f"{v:.1f} tok/s"


def ratio_table(info) -> str:
    lines = ["| load | Pagoda | llama-server | ratio (Pagoda / llama) | goal | met | server CPU s / wall s (Pagoda; llama) |",
             "|---|---|---|---|---|---|---|"]
    for r in rows(info):
        ld = r["load"]
        lines.append(f"| {ld['what']} | {_fmt(r['pagoda'], ld['metric'])} | "
                     f"{_fmt(r['llama'], ld['metric'])} | {r['ratio']:.2f}x | "
                     f"{ld['goal'][0]} {ld['goal'][1]}x | {'yes' if r['met'] else 'no'}"
                     + (f" (timed out: {', '.join(r['timed_out'])})" if r["timed_out"] else "")
                     + f" | {_cpu_share(info, 'pagoda', ld['name'])}; {_cpu_share(info, 'llama', ld['name'])} |")
    return "\n".join(lines)


def golden_lines(info) -> list:
    first = info["rounds"][0] if info["rounds"] else {}
    out = []
    for side, name in (("pagoda", "Pagoda"), ("llama", "llama-server")):
        g = first.get(side, {}).get("golden")
        if g:
            out.append(f"- {name}: {g['matching']}/{g['of']} greedy tokens equal to transformers' "
                       f"(per prompt {g['per_prompt']}; {g['route']})"
                       + (f"; notes: {g['notes']}" if g["notes"] else ""))
    if info.get("fidelity_test"):
        out.append(f"- Pagoda's tests/llama_fidelity_test (batched, engine-free): {info['fidelity_test']}")
    return out


def roofline_lines(info) -> list:
    """Decode bandwidth and prefill int8 fractions (tools/bench_roofline.py)."""
    import bench_roofline
    if not info.get("costs"):
        return []
    by = {r["load"]["name"]: r for r in rows(info)}
    decode = {n: by["decode1"][k] for n, k in (("Pagoda", "pagoda"), ("llama-server", "llama"))} \
        if "decode1" in by else {}
    ttft = {n: by["ttft512"][k] for n, k in (("Pagoda", "pagoda"), ("llama-server", "llama"))} \
        if "ttft512" in by else {}
    out = bench_roofline.lines(info["costs"], info.get("ceilings", {}), decode, ttft, 512)
    return ["", "Roofline (medians of the rounds):"] + out if out else []


def memory_lines(info) -> list:
    """Each server's resident memory (peak) after its last load, first round, against the file."""
    if not info.get("costs") or not info["rounds"]:
        return []
    out = ["", f"Resident memory after each load, first round (file {info['costs']['file_bytes'] / 1e6:.0f} MB):"]
    for side, name in (("pagoda", "Pagoda"), ("llama", "llama-server")):
        parts = [f"{load} {run['memory_mb'].get('rss_mb', 0):.0f} MB (peak {run['memory_mb'].get('hwm_mb', 0):.0f})"
                 for load, run in info["rounds"][0][side]["loads"].items() if run.get("memory_mb")]
        if parts:
            out.append(f"- {name}: " + "; ".join(parts))
    return out


def markdown(info) -> str:
    m = info["machine"]
    lines = [f"Machine: {m['cpu']}, ISA {' '.join(m['isa'])}, nproc {m['nproc']}; "
             f"date {m['date']}; commit {m['commit']}; load average at start {m['loadavg']}, "
             f"at end {m.get('loadavg_end')}"
             + (f" (waited {info['waited_s']:.0f} s for a lower load first)" if info.get("waited_s") else "") + ".",
             f"Pagoda binary: {info['pagoda_bin']}; llama-server: {info['llama_server']} "
             f"({info['llama_build'].splitlines()[0] if info['llama_build'] else '?'}); "
             f"threads {info['threads']}; greedy, ignore_eos; rounds {len(info['rounds'])}.",
             "", info["table_md"], "", "Greedy agreement with transformers on the 8 golden prompts "
             "(tests/data/logits/smollm2.json, 32 tokens each, matching prefix):"]
    lines += golden_lines(info)
    lines += roofline_lines(info) + memory_lines(info)
    lines += ["", "Commands:"]
    r0 = info["rounds"][0]
    lines += [f"    {r0['pagoda']['command']}", f"    {r0['llama']['command']}"]
    if r0["pagoda"].get("startup"):
        lines += ["", "Pagoda's start-up lines:"] + [f"    {ln}" for ln in r0["pagoda"]["startup"]]
    for r in rows(info):
        if len(r["pagoda_all"]) > 1:
            lines.append(f"- {r['load']['name']}: Pagoda {r['pagoda_all']}, llama {r['llama_all']}")
    for i, rd in enumerate(info["rounds"]):
        for side in ("pagoda", "llama"):
            for name, run in rd[side]["loads"].items():
                if run["metrics"]["failed"]:
                    lines.append(f"- round {i} {side} {name}: {run['metrics']['failed']} failed: {run['errors']}")
    lines += ["", "Per load (round, server: 1-min load average before, idle other server's CPU s):"]
    for i, rd in enumerate(info["rounds"]):
        for name in [ld["name"] for ld in info["loads"]]:
            parts = []
            for side in ("pagoda", "llama"):
                run = rd[side]["loads"].get(name)
                if run:
                    idle = run.get("idle_peer_cpu_s")
                    parts.append(f"{side} {run['loadavg_before'][0]}, idle peer "
                                 + (f"{idle:.2f}" if idle is not None else "-"))
            lines.append(f"- round {i} {name}: " + "; ".join(parts))
    if info.get("plots"):
        lines += ["", "Plots: " + ", ".join(info["plots"])]
    return "\n".join(lines) + "\n"


def plots(info, out_dir) -> list:
    try:
        import bench_plots
    except ImportError:
        return []
    r0 = info["rounds"][0]
    paths = []
    for load in info["loads"]:
        name = load["name"]
        series = [(side, [r0[key]["loads"][name]]) for side, key in (("pagoda", "pagoda"), ("llama-server", "llama"))
                  if name in r0[key]["loads"]]
        if series:
            paths.append(bench_plots.latency_cdfs(series, os.path.join(out_dir, f"{name}_latency_cdf.png"),
                                                  load["what"]))
    conc = [(side, [r0[key]["loads"][n] for n in ("decode1", "streams32") if n in r0[key]["loads"]])
            for side, key in (("pagoda", "pagoda"), ("llama-server", "llama"))]
    if all(runs for _, runs in conc):
        paths.append(bench_plots.throughput_vs_concurrency(
            conc, os.path.join(out_dir, "throughput_vs_concurrency.png"),
            "128 new tokens, short prompts: concurrency 1 and 32"))
    return paths
