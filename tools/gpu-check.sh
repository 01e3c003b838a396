#!/usr/bin/env bash
# gpu-check.sh: one command that verifies and measures Pagoda on a CUDA
# machine from the self-contained bundle that tools/gpu-bundle makes (this
# script is the bundle's check.sh). Nothing is built there; nothing outside
# the bundle is needed but the C runtime, the CUDA driver and toolkit, bash,
# tar/xz (or python3) and python3 for the summary.
#
#   bash check.sh [OUT_DIR]           (OUT_DIR defaults to $OUT, else /tmp/pagoda-gpu-out)
#   env: PAGODA_BUNDLE (default: this script's folder; from the repo,
#        <repo>/build-gpu-bundle), PAGODA_RUN (unpack folder, default
#        /tmp/pagoda-bundle-run), PAGODA_SKIP="phase ..." (phases to skip),
#        PAGODA_STREAMS (default 1,16,64,256), PAGODA_BUDGET_S (default
#        460: every phase's limit is cut to what is left of it; a phase with
#        under 20 s left is skipped as out of time).
#
# Phases, each under `timeout` and each recorded (status, rc, seconds, log)
# in OUT_DIR/phases.jsonl; OUT_DIR/summary.json is rewritten after every
# phase, so a cut run still returns what it did; a failed phase never stops
# the next one:
#   unpack        payload.tar.xz -> PAGODA_RUN (bin/, lib/)
#   env           GPU, driver, glibc; every library each binary loads, with
#                 those found outside the bundle, the C runtime and CUDA
#                 flagged (libs.json)
#   cpu_smoke     pagoda generate on the tiny model (CPU backend), twice: equal
#   op_tests      every CUDA kernel against its CPU twin (cuda_*_gpu_test
#                 but the tiled prefill's, device_gpu_test; gtest XML); a
#                 failed split-K case turns split-K off, a failed
#                 cuda_async_upload_gpu_test the asynchronous uploads
#   feat_prefill  cuda_prefill_attention_gpu_test: the tensor-core tiled
#                 prefill kernel (failed: --cuda-prefill-kernel rowwise)
#   feat_graphs   model_graph_gpu_test: CUDA graphs of decode steps against
#                 eager launches (failed: --cuda-graphs off)
#   e2e           model_cuda_gpu_test (CUDA vs CPU logits: prefill, chunked
#                 prefill, decode, shuffled block tables) and
#                 engine_cuda_gpu_test (mixed batch, n > 1, beams, prefix
#                 hits, greedy agreement, blocks back), on the tiny model;
#                 failed with a step feature on: again as e2e_fallback with
#                 every feature off, and when that passes they stay off
#   cuda_generate pagoda generate --backend cuda vs --backend cpu, greedy
#                 (failed: cuda_generate_fallback, features off, likewise)
#   perf_kernels  bench_kernels --quick (paged-decode bandwidth at 64 x 2k,
#                 Llama-3-8B heads; prefill attention, tiled vs row kernel;
#                 sampling; cuBLAS GEMMs) -> bench.json
#   perf_engine   bench_engine --rows streams, Llama-3-8B shape, dummy BF16
#                 weights, 1/16/64/256 concurrent streams -> engine.json
#                 (without a GPU: the tiny shape on the CPU, 1 and 4 streams,
#                 to exercise the harness); failed on the GPU with a feature
#                 on: perf_engine_fallback with every feature off
#   step_profile  the same engine at 64 streams, 32 new tokens, with
#                 PAGODA_CUDA_PROFILE (gpu/cuda/op_profile.cuh): GPU ms per op
#                 category (GEMMs, attention, sampling, KV writes, other) and
#                 the host gaps, per synchronisation window -> step_profile.json
#                 (a separate run: the events slow the step a little)
# CUDA step features (graphs, split-K, tiled prefill, async uploads): each
# phase that shows one broken turns it off for every later phase, as flags
# for pagoda and bench_engine (--cuda-graphs off, --cuda-split-k 0,
# --cuda-prefill-kernel rowwise, --no-async-uploads) and as environment for
# the GPU tests (PAGODA_CUDA_GRAPHS=off, PAGODA_CUDA_SPLIT_K=0,
# PAGODA_CUDA_PREFILL_KERNEL=rowwise, PAGODA_CUDA_ASYNC_UPLOADS=off; see
# gpu::step_feature_env); OUT_DIR/features.json (also in summary.json) says
# which are on and why any went off.
# Without a GPU the CUDA phases print why they skip and the GPU tests skip
# themselves. Exit status: 0 when no phase failed.
set -u -o pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
if [[ -n ${PAGODA_BUNDLE:-} ]]; then BUNDLE=$PAGODA_BUNDLE
elif [[ -f $HERE/payload.tar.xz ]]; then BUNDLE=$HERE
else BUNDLE=$(cd "$HERE/.." && pwd)/build-gpu-bundle
fi
OUT_DIR=${1:-${OUT:-/tmp/pagoda-gpu-out}}
RUN=${PAGODA_RUN:-/tmp/pagoda-bundle-run}
STREAMS=${PAGODA_STREAMS:-1,16,64,256}
BUDGET=${PAGODA_BUDGET_S:-460}
mkdir -p "$OUT_DIR/gtest"
: > "$OUT_DIR/phases.jsonl"
T0=$(date +%s)
elapsed() { echo $(( $(date +%s) - T0 )); }
say() { echo "[gpu-check +$(elapsed)s] $*"; }

CUDA_LIBS=""
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib; do
  [[ -d $d ]] && CUDA_LIBS="$CUDA_LIBS:$d"
done
# cuBLAS outside the toolkit (torch's pip wheels): untested fallback.
if ! ls /usr/local/cuda/lib*/libcublas.so.13* /usr/local/cuda/targets/*/lib/libcublas.so.13* > /dev/null 2>&1; then
  WHEEL=$(python3 -c 'import glob, os, site
for d in site.getsitepackages():
    for lib in glob.glob(os.path.join(d, "nvidia", "**", "libcublas.so.13*"), recursive=True):
        print(os.path.dirname(lib)); raise SystemExit' 2> /dev/null)
  [[ -n $WHEEL ]] && CUDA_LIBS="$CUDA_LIBS:$WHEEL"
fi
# Only the bundle's programs get the bundle's libraries (python3, tar keep the system's).
pg() { LD_LIBRARY_PATH="$RUN/lib$CUDA_LIBS" "$@"; }

HAVE_GPU=0
NO_GPU_REASON="nvidia-smi lists no GPU"
if command -v nvidia-smi > /dev/null && nvidia-smi -L 2> /dev/null | grep -q '^GPU'; then HAVE_GPU=1
elif ! command -v nvidia-smi > /dev/null; then NO_GPU_REASON="no nvidia-smi (no CUDA driver)"
fi

summarize() {
  python3 - "$OUT_DIR" "$(elapsed)" "$HAVE_GPU" "$NO_GPU_REASON" <<'PY' > "$OUT_DIR/summary.json.tmp" && mv "$OUT_DIR/summary.json.tmp" "$OUT_DIR/summary.json"
import glob, json, os, sys
import xml.etree.ElementTree as ET
out, secs, have_gpu, reason = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4]
s = {"elapsed_s": secs, "gpu": have_gpu, "no_gpu_reason": None if have_gpu else reason,
     "phases": {}, "tests": {"passed": 0, "failed": 0, "skipped": 0}, "failed_cases": [],
     "programs": {}}
for line in open(os.path.join(out, "phases.jsonl")):
    if line.strip():
        p = json.loads(line)
        s["phases"][p["phase"]] = p
for path in sorted(glob.glob(os.path.join(out, "gtest", "*.xml"))):
    prog = {"passed": 0, "failed": 0, "skipped": 0}
    try:
        cases = list(ET.parse(path).getroot().iter("testcase"))
    except ET.ParseError:
        continue
    for case in cases:
        name = case.get("classname", "") + "." + case.get("name", "")
        if case.find("failure") is not None:
            prog["failed"] += 1
            s["failed_cases"].append(name)
        elif case.get("result") == "skipped" or case.find("skipped") is not None:
            prog["skipped"] += 1
        else:
            prog["passed"] += 1
    s["programs"][os.path.basename(path)[:-4]] = prog
    for k in prog:
        s["tests"][k] += prog[k]
def load(name):
    try:
        return json.load(open(os.path.join(out, name)))
    except Exception:
        return None
s["libs"] = load("libs.json")
s["features"] = load("features.json")
bench = load("bench.json")
s["bench_kernels"] = bench
perf = {}
if bench:
    for a in bench.get("attention", []):
        if a.get("backend") == "cuda" and a.get("name") == "llama8b-like":
            perf["decode_attention_64x2k_partition_%d" % a["partition"]] = {
                "us": a["us"], "gb_per_s": a["gb_per_s"],
                "fraction_of_4_8_TBps": round(a["gb_per_s"] / 4800.0, 4)}
for a in (bench or {}).get("prefill", []):
    perf["prefill_attention_%s_ctx%d_q%d" % (a["kernel"], a["ctx"], a["q_len"])] = {
        "us": a["us"], "tflop_per_s": a["tflop_per_s"]}
engine = load("engine.json")
if engine and "streams" in engine:
    perf["engine"] = {"model": engine.get("model"), "backend": engine.get("backend"),
                      "dummy_dtype": engine.get("dummy_dtype"), "runs": engine["streams"]["runs"]}
prof = load("step_profile.json")
if prof and prof.get("windows"):
    w = prof["windows"]
    perf["step_breakdown_per_window_ms"] = dict(
        {k: round(v["ms"] / w, 3) for k, v in prof["ops"].items()},
        gap_inside=round(prof["gap_ms"] / w, 3), host_between=round(prof["host_between_ms"] / w, 3),
        windows=w)
s["perf"] = perf
s["ok"] = all(p["status"] != "failed" for p in s["phases"].values())
print(json.dumps(s, indent=2))
PY
}

# phase NAME TIMEOUT_S CMD...: runs CMD (with the bundle's libraries) into NAME.log.
phase() {
  local name=$1 limit=$2; shift 2
  if [[ " ${PAGODA_SKIP:-} " == *" $name "* ]]; then skip "$name" "PAGODA_SKIP"; return; fi
  local left=$(( BUDGET - $(elapsed) ))
  if (( left < 20 )); then skip "$name" "out of time (budget ${BUDGET}s)"; return; fi
  (( limit > left )) && limit=$left
  say "$name (limit ${limit}s) -> $name.log"
  local t=$(date +%s) rc status
  timeout -k 10 "$limit" bash -c '"$@"' bash "$@" > "$OUT_DIR/$name.log" 2>&1
  rc=$?
  status=ok
  [[ $rc != 0 ]] && status=failed
  [[ $rc == 124 || $rc == 137 ]] && status=failed && echo "TIMED OUT after ${limit}s" >> "$OUT_DIR/$name.log"
  printf '{"phase": "%s", "status": "%s", "rc": %d, "seconds": %d, "log": "%s.log"}\n' \
    "$name" "$status" "$rc" $(( $(date +%s) - t )) "$name" >> "$OUT_DIR/phases.jsonl"
  tail -4 "$OUT_DIR/$name.log" | sed 's/^/    /'
  say "$name: $status (rc $rc)"
  LAST_STATUS=$status
  summarize
}
skip() {
  LAST_STATUS=skipped
  say "$1: skipped: $2"
  printf '{"phase": "%s", "status": "skipped", "rc": 0, "seconds": 0, "reason": "%s"}\n' \
    "$1" "$2" >> "$OUT_DIR/phases.jsonl"
  summarize
}
needs_gpu() {  # NAME: true when the phase may run
  [[ $HAVE_GPU == 1 ]] && return 0
  skip "$1" "no GPU: $NO_GPU_REASON"
  return 1
}

# ---- CUDA step features -------------------------------------------------------------
FEAT_GRAPHS=on FEAT_SPLIT_K=512 FEAT_PREFILL=fa2 FEAT_ASYNC=on
FEAT_WHY=""
write_features() {
  python3 - "$OUT_DIR/features.json" "$FEAT_GRAPHS" "$FEAT_SPLIT_K" "$FEAT_PREFILL" "$FEAT_ASYNC" "$FEAT_WHY" <<'PY'
import json, sys
path, graphs, split_k, prefill, asyn, why = sys.argv[1:7]
json.dump({"graphs": graphs, "split_k": int(split_k), "prefill_kernel": prefill,
           "async_uploads": asyn, "turned_off": [w for w in why.split("|") if w]},
          open(path, "w"), indent=2)
PY
}
feature_off() {  # NAME REASON: off for every later phase
  case $1 in
    graphs) [[ $FEAT_GRAPHS == off ]] && return; FEAT_GRAPHS=off; export PAGODA_CUDA_GRAPHS=off ;;
    split_k) [[ $FEAT_SPLIT_K == 0 ]] && return; FEAT_SPLIT_K=0; export PAGODA_CUDA_SPLIT_K=0 ;;
    prefill) [[ $FEAT_PREFILL == rowwise ]] && return; FEAT_PREFILL=rowwise; export PAGODA_CUDA_PREFILL_KERNEL=rowwise ;;
    async) [[ $FEAT_ASYNC == off ]] && return; FEAT_ASYNC=off; export PAGODA_CUDA_ASYNC_UPLOADS=off ;;
  esac
  say "CUDA step feature $1 OFF from now on: $2"
  FEAT_WHY="$FEAT_WHY|$1: $2"
  export FEAT_GRAPHS FEAT_SPLIT_K FEAT_PREFILL FEAT_ASYNC
  write_features
}
all_features_off() { local f; for f in graphs split_k prefill async; do feature_off "$f" "$1"; done; }
any_feature_on() { [[ $FEAT_GRAPHS == on || $FEAT_SPLIT_K != 0 || $FEAT_PREFILL == fa2 || $FEAT_ASYNC == on ]]; }
feature_flags() {  # the flags for pagoda and bench_engine
  echo "--cuda-graphs $FEAT_GRAPHS --cuda-split-k $FEAT_SPLIT_K --cuda-prefill-kernel $FEAT_PREFILL"
  [[ $FEAT_ASYNC == off ]] && echo "--no-async-uploads"
  return 0
}
# CMD... with every feature off (environment; flags come from feature_flags).
features_off_env() {
  PAGODA_CUDA_GRAPHS=off PAGODA_CUDA_SPLIT_K=0 PAGODA_CUDA_PREFILL_KERNEL=rowwise \
    PAGODA_CUDA_ASYNC_UPLOADS=off FEAT_GRAPHS=off FEAT_SPLIT_K=0 FEAT_PREFILL=rowwise \
    FEAT_ASYNC=off "$@"
}
# Which features failed cases of op_tests implicate (split-K cases, async uploads).
op_test_suspects() {
  python3 - "$OUT_DIR/gtest" <<'PY'
import glob, os, sys
import xml.etree.ElementTree as ET
out = set()
for path in glob.glob(os.path.join(sys.argv[1], "*.xml")):
    prog = os.path.basename(path)[:-4]
    try:
        cases = list(ET.parse(path).getroot().iter("testcase"))
    except ET.ParseError:
        continue
    for c in cases:
        if c.find("failure") is None:
            continue
        name = c.get("name", "")
        if prog == "cuda_async_upload_gpu_test":
            out.add("async")
        if "Split" in name or "Partition" in name:
            out.add("split_k")
print(" ".join(sorted(out)))
PY
}
export FEAT_GRAPHS FEAT_SPLIT_K FEAT_PREFILL FEAT_ASYNC
write_features

# ---- phases ---------------------------------------------------------------------------
unpack() {
  rm -rf "$RUN" && mkdir -p "$RUN" || return 1
  if command -v xz > /dev/null; then tar -C "$RUN" -xJf "$BUNDLE/payload.tar.xz"
  else python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$BUNDLE/payload.tar.xz" "$RUN"
  fi || return 1
  du -sh "$RUN"/bin "$RUN"/lib
}

environment() {
  date -u; uname -a; ldd --version | head -1
  nvidia-smi || echo "nvidia-smi failed"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.memory --format=csv || true
  nproc; free -g | head -2
  echo "CUDA libraries from:${CUDA_LIBS//:/ }"
  head -3 "$BUNDLE/MANIFEST.txt"
  # Where each needed library resolves: the bundle, the C runtime, CUDA, or elsewhere.
  local foreign=() missing=() b
  for b in "$RUN"/bin/*; do
    while read -r name _ path _; do
      case $path in
        "$RUN"/lib/*) ;;
        not) missing+=("$(basename "$b"): $name") ;;
        *) case $name in
             linux-vdso*|ld-linux*|libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|libgcc_s.so*) ;;
             libcuda.so*|libcudart.so*|libcublas*|libnvidia*) ;;
             *) foreign+=("$(basename "$b"): $name => $path") ;;
           esac ;;
      esac
    done < <(pg ldd "$b" | awk '/=>/ {print $1, $2, $3, $4}')
  done
  printf '%s\n' "missing: ${missing[*]:-none}" "outside the bundle: ${foreign[*]:-none}"
  python3 -c 'import json, sys; f = lambda a: [x for x in a.split("|") if x]; print(json.dumps({"missing": f(sys.argv[1]), "outside_bundle": f(sys.argv[2])}))' \
    "$(printf '|%s' "${missing[@]}")" "$(printf '|%s' "${foreign[@]}")" > "$OUT_DIR/libs.json"
  [[ ${#missing[@]} == 0 && ${#foreign[@]} == 0 ]]
}

TINY=$BUNDLE/model/tiny
gen() {  # gen BACKEND [args...]: greedy JSON output of the tiny model
  local backend=$1; shift
  # shellcheck disable=SC2046  # feature_flags is a word list
  pg "$RUN/bin/pagoda" generate "$TINY" --backend "$backend" --prompt "The quick brown fox" \
    --max-tokens 24 --ignore-eos --kv-cache-memory $((32 << 20)) --json $(feature_flags) "$@"
}
cpu_smoke() {
  gen cpu > "$OUT_DIR/cpu_a.json" && gen cpu > "$OUT_DIR/cpu_b.json" || return 1
  cat "$OUT_DIR/cpu_a.json"
  cmp "$OUT_DIR/cpu_a.json" "$OUT_DIR/cpu_b.json" || { echo "two CPU runs differ"; return 1; }
  pg "$RUN/bin/pagoda" generate "$BUNDLE/configs/tiny" --load-format dummy --backend cpu \
    --prompt "dummy" --max-tokens 8 --ignore-eos --kv-cache-memory $((16 << 20)) --json
}

gtests() {  # gtests BINARY...: each with XML output; fails if any fails
  local rc=0 t
  for t in "$@"; do
    [[ -x $RUN/bin/$t ]] || { echo "=== $t: missing"; rc=1; continue; }
    echo "=== $t"
    pg "$RUN/bin/$t" --gtest_output="xml:$OUT_DIR/gtest/$t.xml" || rc=1
  done
  return $rc
}
cuda_generate() {
  gen cpu > "$OUT_DIR/gen_cpu.json" && gen cuda > "$OUT_DIR/gen_cuda.json" || return 1
  python3 - "$OUT_DIR/gen_cpu.json" "$OUT_DIR/gen_cuda.json" <<'PY'
import json, sys
c, g = (json.load(open(p))["samples"][0]["token_ids"] for p in sys.argv[1:3])
k = 0
while k < min(len(c), len(g)) and c[k] == g[k]:
    k += 1
print("cpu ", c); print("cuda", g)
print("greedy tokens equal before the first divergence: %d/%d" % (k, len(c)))
sys.exit(0 if len(g) == len(c) else 1)
PY
}

perf_engine() {
  if [[ $HAVE_GPU == 1 ]]; then
    # shellcheck disable=SC2046
    pg "$RUN/bin/bench_engine" --rows streams --backend cuda --load-format dummy \
      --model "$BUNDLE/configs/llama-3-8b" --streams "$STREAMS" --kv-blocks 4608 \
      --stream-prompt 128 --stream-tokens 128 $(feature_flags) > "$OUT_DIR/engine.json.tmp"
  else
    echo "no GPU ($NO_GPU_REASON): the harness on the CPU, tiny shape, 1 and 4 streams"
    pg "$RUN/bin/bench_engine" --rows streams --backend cpu --load-format dummy \
      --model "$BUNDLE/configs/tiny" --streams 1,4 --kv-blocks 256 --stream-prompt 32 \
      --stream-tokens 16 > "$OUT_DIR/engine.json.tmp"
  fi
  local rc=$?
  mv "$OUT_DIR/engine.json.tmp" "$OUT_DIR/engine.json"
  cat "$OUT_DIR/engine.json"
  return $rc
}

# The phases run in child shells (under timeout): they get these.
export BUNDLE OUT_DIR RUN STREAMS CUDA_LIBS HAVE_GPU NO_GPU_REASON TINY
export -f pg unpack environment gen cpu_smoke gtests cuda_generate perf_engine feature_flags \
  features_off_env

step_profile() {
  # shellcheck disable=SC2046  # (graphs stay eager while profiling: every op is timed)
  PAGODA_CUDA_PROFILE=$OUT_DIR/step_profile.json pg "$RUN/bin/bench_engine" --rows streams \
    --backend cuda --load-format dummy --model "$BUNDLE/configs/llama-3-8b" --streams 64 \
    --kv-blocks 1024 --stream-prompt 128 --stream-tokens 32 $(feature_flags) || return 1
  cat "$OUT_DIR/step_profile.json"
}
export -f step_profile

say "bundle $BUNDLE -> $RUN; results in $OUT_DIR; GPU: $([[ $HAVE_GPU == 1 ]] && echo yes || echo "no ($NO_GPU_REASON)")"
phase unpack 60 unpack
phase env 30 environment
phase cpu_smoke 60 cpu_smoke
OP_TESTS=()
for f in "$RUN"/bin/cuda_*_gpu_test "$RUN"/bin/device_gpu_test; do
  [[ -x $f && $(basename "$f") != cuda_prefill_attention_gpu_test ]] && OP_TESTS+=("$(basename "$f")")
done
phase op_tests 150 gtests "${OP_TESTS[@]}"
if [[ $LAST_STATUS == failed ]]; then
  for f in $(op_test_suspects); do feature_off "$f" "op_tests: its cases failed"; done
fi
phase feat_prefill 60 gtests cuda_prefill_attention_gpu_test
[[ $LAST_STATUS == failed ]] && feature_off prefill "cuda_prefill_attention_gpu_test failed"
phase feat_graphs 60 gtests model_graph_gpu_test
[[ $LAST_STATUS == failed ]] && feature_off graphs "model_graph_gpu_test failed"
E2E='env PAGODA_GPU_MODEL="$TINY" bash -c "gtests model_cuda_gpu_test engine_cuda_gpu_test"'
phase e2e 120 bash -c "$E2E"
if [[ $LAST_STATUS == failed ]] && any_feature_on; then
  phase e2e_fallback 90 features_off_env bash -c "$E2E"
  [[ $LAST_STATUS == ok ]] && all_features_off "e2e failed with them, passed without"
fi
if needs_gpu cuda_generate; then
  phase cuda_generate 45 cuda_generate
  if [[ $LAST_STATUS == failed ]] && any_feature_on; then
    phase cuda_generate_fallback 45 features_off_env cuda_generate
    [[ $LAST_STATUS == ok ]] && all_features_off "cuda_generate failed with them, passed without"
  fi
fi
phase perf_kernels 90 pg "$RUN/bin/bench_kernels" --quick --json "$OUT_DIR/bench.json"
phase perf_engine 240 perf_engine
if [[ $LAST_STATUS == failed && $HAVE_GPU == 1 ]] && any_feature_on; then
  cp "$OUT_DIR/engine.json" "$OUT_DIR/engine_with_features.json" 2> /dev/null
  phase perf_engine_fallback 150 features_off_env perf_engine
fi
needs_gpu step_profile && phase step_profile 120 step_profile

summarize
python3 -c 'import json, sys; s = json.load(open(sys.argv[1])); print(json.dumps({k: v["status"] for k, v in s["phases"].items()})); print("tests", s["tests"], "failed", s["failed_cases"]); print("perf", json.dumps(s["perf"]))' "$OUT_DIR/summary.json"
if python3 -c 'import json, sys; sys.exit(0 if json.load(open(sys.argv[1]))["ok"] else 1)' "$OUT_DIR/summary.json"; then
  say "OK"; exit 0
fi
say "FAILED (see summary.json)"; exit 1
