#!/usr/bin/env python3
"""Summary of one tools/gpu-check.sh run (the bundle's summary.py).

    gpu-check-summary.py RESULTS_DIR ELAPSED_S HAVE_GPU NO_GPU_REASON

Reads what the phases left in RESULTS_DIR (phases.jsonl, gtest/<phase>.<program>.xml,
libs.json, features.json, cuda.json, generate.json, bench.json, engine.json,
engine_lockstep.json, engine_1k.json,
step_profile.json) and writes RESULTS_DIR/summary.json (everything, machine
readable) and RESULTS_DIR/summary.txt (a compact table: one line per phase
with its status, seconds and the one fact that matters, then the features,
the performance lines and the verdict). Missing or broken inputs are left
out, never fatal: a cut run still gets a summary. Plain python3.
"""
import glob
import json
import os
import sys
import xml.etree.ElementTree as ET


def load(res, name):
    try:
        with open(os.path.join(res, name)) as f:
            return json.load(f)
    except Exception:
        return None


def gtest_results(res):
    """Per phase and program: passed/failed/skipped, and the failed case names."""
    per_phase, programs, failed_cases = {}, {}, []
    for path in sorted(glob.glob(os.path.join(res, "gtest", "*.xml"))):
        phase, _, prog = os.path.basename(path)[:-4].partition(".")
        counts = {"passed": 0, "failed": 0, "skipped": 0}
        try:
            cases = list(ET.parse(path).getroot().iter("testcase"))
        except (ET.ParseError, OSError):
            counts["unreadable"] = 1
            cases = []
        failed_here = []
        for case in cases:
            name = prog + ":" + case.get("classname", "") + "." + case.get("name", "")
            if case.find("failure") is not None:
                counts["failed"] += 1
                failed_here.append(name)
            elif case.get("result") == "skipped" or case.find("skipped") is not None:
                counts["skipped"] += 1
                sk = case.find("skipped")
                if sk is not None and sk.get("message") and "skip_reason" not in counts:
                    counts["skip_reason"] = sk.get("message").strip().splitlines()[-1][:80]
            else:
                counts["passed"] += 1
        programs[prog] = counts
        total = per_phase.setdefault(phase, {"passed": 0, "failed": 0, "skipped": 0, "failed_cases": []})
        for k in ("passed", "failed", "skipped"):
            total[k] += counts[k]
        if "skip_reason" in counts:
            total.setdefault("skip_reason", counts["skip_reason"])
        total["failed_cases"] += failed_here
        failed_cases += failed_here
    return per_phase, programs, failed_cases


def perf_lines(s):
    """The performance numbers: the dict for summary.json and the table lines."""
    perf, lines = {}, []
    bench = s.get("bench_kernels") or {}
    for a in bench.get("attention", []):
        if a.get("backend") == "cuda" and a.get("name") == "llama8b-like":
            key = "decode_attention_64x2k_partition_%d" % a["partition"]
            perf[key] = {"us": a["us"], "gb_per_s": a["gb_per_s"],
                         "fraction_of_4_8_TBps": round(a["gb_per_s"] / 4800.0, 4)}
            lines.append("kernels  decode attn 64x2k part %-5d %8.1f us %7.0f GB/s" %
                         (a["partition"], a["us"], a["gb_per_s"]))
    copy = bench.get("copy_gb_per_s") or 0
    gemv = {}
    for a in bench.get("gemv", []):
        xs = "" if a.get("x", "f32") == "f32" else "_x" + a["x"]
        perf["gemv_%s_%dx%d_m%d%s" % (a["name"], a["N"], a["K"], a["M"], xs)] = {
            "path": a["path"], "us": a["us"], "gb_per_s": a["gb_per_s"],
            "fraction_of_copy": a["fraction_of_copy"], "fraction_of_peak": a["fraction_of_peak"]}
        gemv.setdefault((a["name"] + xs.replace("_x", " x"), a["N"], a["K"]), []).append(a)
    if gemv:
        perf["device_copy_gb_per_s"] = copy
        lines.append("kernels  device copy %.0f GB/s (read + write); GEMV goal >= 0.85 of it" % copy)
    for (name, n, k), rows in gemv.items():
        lines.append("kernels  gemv %-8s %6dx%-5d %s" % (name, n, k, "  ".join(
            "M%d%s %.0f GB/s %.2f" % (a["M"], " (cublas)" if a["path"] == "cublas" else "",
                                      a["gb_per_s"], a["fraction_of_copy"]) for a in rows)))
    for a in bench.get("prefill", []):
        perf["prefill_attention_%s_ctx%d_q%d" % (a["kernel"], a["ctx"], a["q_len"])] = {
            "us": a["us"], "tflop_per_s": a["tflop_per_s"]}
        lines.append("kernels  prefill %-8s ctx %-5d q %-4d %8.1f us %6.1f TFLOP/s" %
                     (a["kernel"], a["ctx"], a["q_len"], a["us"], a["tflop_per_s"]))
    gemm = {}
    for a in bench.get("matmul", []):
        gemm.setdefault((a["N"], a["K"]), []).append(a)
    for (n, k), rows in gemm.items():
        perf["gemm_%dx%d" % (n, k)] = {str(a["M"]): {"us": a["us"], "tflop_per_s": a["tflop_per_s"]}
                                       for a in rows}
        lines.append("kernels  gemm %6dx%-5d TFLOP/s %s" % (n, k, "  ".join(
            "M%d %.1f" % (a["M"], a["tflop_per_s"]) for a in rows)))
    engine = s.get("engine") or {}
    if "streams" in engine:
        perf["engine"] = {"model": engine.get("model"), "backend": engine.get("backend"),
                          "runs": engine["streams"]["runs"]}
        for r in engine["streams"]["runs"]:
            lines.append("engine   %-4s %4d streams %9.1f tok/s  ITL p50 %7.2f ms  TTFT p50 %7.1f ms%s" %
                         (engine.get("backend", "?"), r["streams"], r["output_tokens_per_s"],
                          1e3 * r["itl_p50_s"], 1e3 * r["ttft_p50_s"],
                          "  (%d errors)" % r["errors"] if r.get("errors") else ""))
    default_runs = {r["streams"]: r for r in engine.get("streams", {}).get("runs", [])}
    lock = s.get("engine_lockstep") or {}
    for r in lock.get("streams", {}).get("runs", []):
        d = default_runs.get(r["streams"])
        ratio = d["output_tokens_per_s"] / r["output_tokens_per_s"] if d and r["output_tokens_per_s"] else None
        perf["lockstep_%d_streams" % r["streams"]] = {
            "output_tokens_per_s": r["output_tokens_per_s"], "itl_p50_s": r["itl_p50_s"],
            "default_over_lockstep": round(ratio, 4) if ratio else None}
        lines.append("engine   lockstep %4d streams %9.1f tok/s  ITL p50 %7.2f ms  default/lockstep %s" %
                     (r["streams"], r["output_tokens_per_s"], 1e3 * r["itl_p50_s"],
                      "%.3f (goal >= 1)" % ratio if ratio else "-"))
    ctx = s.get("engine_1k") or {}
    for r in ctx.get("streams", {}).get("runs", []):
        decode = r["streams"] / r["itl_p50_s"] if r.get("itl_p50_s") else 0.0
        perf["context_1k_%d_streams" % r["streams"]] = {
            "output_tokens_per_s": r["output_tokens_per_s"], "itl_p50_s": r["itl_p50_s"],
            "decode_tokens_per_s_from_itl": round(decode, 1)}
        lines.append("engine   1k ctx %4d streams: decode %9.1f tok/s from ITL p50 %.2f ms "
                     "(goal >= 12000); with prefill %.1f tok/s" %
                     (r["streams"], decode, 1e3 * r["itl_p50_s"], r["output_tokens_per_s"]))
    prof = s.get("step_profile") or {}
    if prof.get("windows"):
        w = prof["windows"]
        perf["step_breakdown_per_window_ms"] = dict(
            {k: round(v["ms"] / w, 3) for k, v in prof["ops"].items()},
            gap_inside=round(prof["gap_ms"] / w, 3),
            host_between=round(prof["host_between_ms"] / w, 3), windows=w)
        lines.append("profile  per window (ms): " + ", ".join(
            "%s %s" % (k, v) for k, v in perf["step_breakdown_per_window_ms"].items()))
    return perf, lines


def phase_detail(name, p, s, tests):
    """The one fact of a phase for the table."""
    if p["status"] == "skipped":
        return p.get("reason", "")
    bits = []
    t = tests.get(name)
    if t:
        bits.append("%d passed, %d failed, %d skipped" % (t["passed"], t["failed"], t["skipped"]))
        if t["failed_cases"]:
            bits.append("first: " + t["failed_cases"][0])
        if t["skipped"] and t.get("skip_reason"):
            bits.append("skip: " + t["skip_reason"])
    gen = s.get("generate")
    if name.startswith("cuda_generate") and gen:
        bits.append("tokens %s: %d/%d equal before divergence" % (
            "EQUAL" if gen["equal"] else "DIFFER", gen["equal_prefix"], gen["len_cpu"]))
    if name == "env" and s.get("cuda_libs"):
        bits.append("cuBLAS from " + s["cuda_libs"].get("cublas_from", "?"))
    if p["status"] == "failed" and p.get("last_line"):
        bits.append(p["last_line"])
    return "; ".join(bits)


def main():
    res, secs, have_gpu, reason = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4]
    s = {"elapsed_s": secs, "gpu": have_gpu, "no_gpu_reason": None if have_gpu else reason,
         "phases": {}}
    try:
        with open(os.path.join(res, "phases.jsonl")) as f:
            for line in f:
                if line.strip():
                    p = json.loads(line)
                    s["phases"][p["phase"]] = p
    except OSError:
        pass
    per_phase, s["programs"], s["failed_cases"] = gtest_results(res)
    s["tests"] = {k: sum(t[k] for t in per_phase.values()) for k in ("passed", "failed", "skipped")}
    for key, name in (("libs", "libs.json"), ("features", "features.json"),
                      ("cuda_libs", "cuda.json"), ("generate", "generate.json"),
                      ("bench_kernels", "bench.json"), ("engine", "engine.json"),
                      ("engine_lockstep", "engine_lockstep.json"), ("engine_1k", "engine_1k.json"),
                      ("step_profile", "step_profile.json")):
        s[key] = load(res, name)
    s["perf"], lines = perf_lines(s)
    s["ok"] = all(p["status"] != "failed" for p in s["phases"].values())
    s["cut"] = [n for n, p in s["phases"].items() if "out of time" in p.get("reason", "")]
    with open(os.path.join(res, "summary.json.tmp"), "w") as f:
        json.dump(s, f, indent=2)
    os.replace(os.path.join(res, "summary.json.tmp"), os.path.join(res, "summary.json"))

    out = ["==== pagoda gpu-check summary (%ds, GPU: %s) ====" % (
        secs, "yes" if have_gpu else "no: " + reason)]
    out.append("%-24s %-8s %5s  %s" % ("phase", "status", "secs", "detail"))
    for name, p in s["phases"].items():
        detail = phase_detail(name, p, s, per_phase)
        out.append("%-24s %-8s %5d  %s" % (name, p["status"], p.get("seconds", 0), detail[:160]))
    feats = s.get("features") or {}
    if feats:
        out.append("features: graphs %s, split_k %s, prefill %s, async uploads %s, decode kernels %s%s" % (
            feats.get("graphs"), feats.get("split_k"), feats.get("prefill_kernel"),
            feats.get("async_uploads"), feats.get("decode_kernels"),
            "; OFF: " + " | ".join(feats["turned_off"]) if feats.get("turned_off") else ""))
    out.append("tests: %(passed)d passed, %(failed)d failed, %(skipped)d skipped" % s["tests"])
    out += lines
    failed = [n for n, p in s["phases"].items() if p["status"] == "failed"]
    verdict = "FAILED: " + ", ".join(failed) if failed else "OK"
    if s["cut"]:
        verdict += " (INCOMPLETE: out of time before " + ", ".join(s["cut"]) + ")"
    out.append("verdict: " + verdict)
    with open(os.path.join(res, "summary.txt"), "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
