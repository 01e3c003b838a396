#!/usr/bin/env bash
# gpu-check.sh: one command that verifies and measures Pagoda on a CUDA
# machine from the self-contained bundle that tools/gpu-bundle makes (this
# script is the bundle's check.sh). Nothing is built there; nothing outside
# the bundle is needed but the C runtime, the CUDA driver, cuBLAS/cuBLASLt
# 13 (from the CUDA toolkit, else from an nvidia-* Python wheel: the env
# phase says which), bash, tar and python3. The bundle carries its own
# libcudart, every other library its programs load, and the test data.
#
#   bash check.sh [OUT_DIR]           (OUT_DIR defaults to $OUT, else /tmp/pagoda-gpu-out)
#   env: PAGODA_BUNDLE (default: this script's folder; from the repo,
#        <repo>/build-gpu-bundle), PAGODA_RUN (unpack folder, default
#        /tmp/pagoda-bundle-run), PAGODA_WORK (results folder, default
#        /tmp/pagoda-check-work), PAGODA_SKIP="phase ..." (phases to skip),
#        PAGODA_STREAMS (default 1,16,64,256), PAGODA_WARMUP (new tokens of
#        each engine warm-up run, default 8), PAGODA_BUDGET_S (default 460:
#        every phase's limit is cut to what is left of it; a phase with
#        under 20 s left is skipped as out of time).
#
# Results come back whole: every log, gtest XML and JSON goes into ONE
# folder (PAGODA_WORK/pagoda-check, outside OUT_DIR), and after every phase
# -- and on exit, also when a phase failed, the budget ran out or the script
# was interrupted (trap) -- it is packed into OUT_DIR/pagoda-check.tar.gz
# beside OUT_DIR/summary.json and OUT_DIR/summary.txt (nothing else is
# written to OUT_DIR: three files, each far under 16 MiB; a log over 4 MiB
# is cut to its first and last MiB in the archive). A run killed outright
# still leaves the archive of its last finished phase. The last lines
# printed are summary.txt: one line per phase (status, seconds, the fact
# that matters: tests passed/failed/skipped and the first failed case, why
# it skipped, whether the CUDA tokens equal the CPU's), the step features,
# the performance lines (throughput, ITL p50, kernel bandwidth), the verdict.
#
# Phases, each under `timeout` and recorded (status, rc, seconds, log) in
# phases.jsonl; a failed phase never stops the next one:
#   unpack        payload.tar.xz -> PAGODA_RUN (bin/, lib/)
#   env           GPU, driver, glibc, where cuBLAS comes from (cuda.json);
#                 every library each binary loads, with those found outside
#                 the bundle flagged (libs.json)
#   cpu_smoke     pagoda generate on the tiny model (CPU backend), twice: equal
#   op_tests      every CUDA kernel against its CPU twin (cuda_*_gpu_test
#                 but the tiled prefill's, device_gpu_test; gtest XML: the
#                 decode GEMV and fused decode kernels in cuda_gemv_gpu_test
#                 and cuda_decode_fusion_gpu_test, dequantize-on-load of every
#                 block type in cuda_dequant_gpu_test); a failed split-K case
#                 turns split-K off, a failed cuda_async_upload_gpu_test the
#                 asynchronous uploads, a failed GEMV / fused-decode case the
#                 decode kernels
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
#   cuda_generate pagoda generate --backend cuda vs --backend cpu, greedy:
#                 the token ids must be equal (generate.json; failed:
#                 cuda_generate_fallback, features off, likewise)
#   perf_kernels  bench_kernels --quick (each case warmed up by 3 calls;
#                 device-to-device copy bandwidth; the decode GEMV at
#                 Llama-3-8B shapes, M = 1, 2, 4, 8 (16: cuBLAS), GB/s and
#                 its fraction of the copy's (goal >= 0.85);
#                 paged-decode bandwidth at 64 x 2k, Llama-3-8B heads;
#                 prefill attention, tiled vs row kernel; sampling; the
#                 GEMMs of Llama-3-8B's projections at M = 1, 8, 16 ... 256)
#                 -> bench.json
#   perf_engine   bench_engine --rows streams, Llama-3-8B shape, dummy BF16
#                 weights, 1/16/64/256 concurrent streams, each count first
#                 warmed up untimed (--stream-warmup: lazy module loading,
#                 graph capture) -> engine.json: throughput, TTFT, steady
#                 ITL p50/p99 (without a GPU: the tiny shape on the CPU, 1
#                 and 4 streams, to exercise the harness); failed on the GPU
#                 with a feature on: perf_engine_fallback, every feature off
#   perf_lockstep the perf_engine load at 1, 64 and 256 streams again with
#                 --no-async-scheduling -> engine_lockstep.json; the summary
#                 prints default / lockstep throughput and ITL per count
#                 (overlap must never be slower than lockstep on the GPU)
#   perf_context_1k  256 streams with 1024-token prompts, 64 new tokens each
#                 (2 warm-up tokens) -> engine_1k.json; the summary prints
#                 the decode rate from TPOT (256 / ITL p50, prefill
#                 excluded; goal >= 12k tok/s)
#   step_profile  the same engine at 64 streams, 32 new tokens (after a
#                 warm-up, which the profile includes), with
#                 PAGODA_CUDA_PROFILE (gpu/cuda/op_profile.cuh): GPU ms per op
#                 category (GEMMs, attention, sampling, KV writes, other) and
#                 the host gaps, per synchronisation window -> step_profile.json
#                 (a separate run: the events slow the step a little)
#   memcheck      compute-sanitizer --tool memcheck over every GPU test
#                 binary (memcheck.<binary>.log; fails on any report)
# CUDA step features (graphs, split-K, tiled prefill, async uploads, decode
# kernels): each phase that shows one broken turns it off for every later
# phase, as flags for pagoda and bench_engine (--cuda-graphs off,
# --cuda-split-k 0, --cuda-prefill-kernel rowwise, --no-async-uploads) and as
# environment for the GPU tests (PAGODA_CUDA_GRAPHS=off, PAGODA_CUDA_SPLIT_K=0,
# PAGODA_CUDA_PREFILL_KERNEL=rowwise, PAGODA_CUDA_ASYNC_UPLOADS=off; the
# decode kernels only as PAGODA_CUDA_DECODE_KERNELS=off, which every program
# honours through gpu::make_backend; see gpu::step_feature_env); features.json (also in summary.json) says which
# are on and why any went off.
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
WORK=${PAGODA_WORK:-/tmp/pagoda-check-work}
RES=$WORK/pagoda-check
STREAMS=${PAGODA_STREAMS:-1,16,64,256}
WARMUP=${PAGODA_WARMUP:-8}
BUDGET=${PAGODA_BUDGET_S:-460}
SUMMARY_PY=$BUNDLE/summary.py
[[ -f $SUMMARY_PY ]] || SUMMARY_PY=$HERE/gpu-check-summary.py
rm -rf "$RES" && mkdir -p "$RES/gtest" "$OUT_DIR" || exit 1
: > "$RES/phases.jsonl"
T0=$(date +%s)
elapsed() { echo $(( $(date +%s) - T0 )); }
say() { echo "[gpu-check +$(elapsed)s] $*"; }
# The tests read their data from the bundle, not from the build machine's tree.
export PAGODA_TEST_DATA_DIR=$BUNDLE/tree/tests/data
export PAGODA_SHARED_DIR=$BUNDLE/tree/shared

# CUDA libraries: the bundle's libcudart comes first (bin/ -> lib/); cuBLAS
# and cuBLASLt from the toolkit, else from an nvidia-* wheel (torch's).
CUDA_LIBS="" CUBLAS_FROM=""
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib; do
  [[ -d $d ]] || continue
  CUDA_LIBS="$CUDA_LIBS:$d"
  [[ -z $CUBLAS_FROM ]] && ls "$d"/libcublasLt.so.13* > /dev/null 2>&1 && CUBLAS_FROM="toolkit $d"
done
if [[ -z $CUBLAS_FROM ]]; then
  WHEEL=$(python3 -c 'import glob, os, site, sys
dirs = site.getsitepackages() + [site.getusersitepackages()] + sys.path
for d in dirs:
    for lib in sorted(glob.glob(os.path.join(d, "nvidia", "**", "libcublasLt.so.13*"), recursive=True)):
        print(os.path.dirname(lib)); raise SystemExit' 2> /dev/null)
  if [[ -n $WHEEL ]]; then CUDA_LIBS="$CUDA_LIBS:$WHEEL"; CUBLAS_FROM="wheel $WHEEL"
  else CUBLAS_FROM="not found (no toolkit lib64, no nvidia-* wheel)"
  fi
fi
# Only the bundle's programs get the bundle's libraries (python3, tar keep the system's).
pg() { LD_LIBRARY_PATH="$RUN/lib$CUDA_LIBS" "$@"; }

HAVE_GPU=0
NO_GPU_REASON="nvidia-smi lists no GPU"
if command -v nvidia-smi > /dev/null && nvidia-smi -L 2> /dev/null | grep -q '^GPU'; then HAVE_GPU=1
elif ! command -v nvidia-smi > /dev/null; then NO_GPU_REASON="no nvidia-smi (no CUDA driver)"
fi
python3 -c 'import json, sys; json.dump({"cublas_from": sys.argv[1], "library_path": sys.argv[2]}, open(sys.argv[3], "w"))' \
  "$CUBLAS_FROM" "$RUN/lib$CUDA_LIBS" "$RES/cuda.json"

# summary.json + summary.txt in the results folder, then the archive; each
# file lands in OUT_DIR by rename, so OUT_DIR always holds a whole set.
summarize() {
  python3 "$SUMMARY_PY" "$RES" "$(elapsed)" "$HAVE_GPU" "$NO_GPU_REASON" || echo "summary failed"
  local f big=()
  while IFS= read -r f; do big+=("$f"); done < <(find "$RES" -type f -size +4M)
  for f in "${big[@]}"; do  # keep the archive small: first and last MiB of a huge log
    { head -c 1048576 "$f"; printf '\n[... cut by gpu-check: %s bytes in all ...]\n' "$(stat -c %s "$f")"
      tail -c 1048576 "$f"; } > "$f.cut" && mv "$f.cut" "$f"
  done
  tar -C "$WORK" -czf "$OUT_DIR/.pagoda-check.tar.gz" pagoda-check &&
    mv "$OUT_DIR/.pagoda-check.tar.gz" "$OUT_DIR/pagoda-check.tar.gz"
  for f in summary.json summary.txt; do
    [[ -f $RES/$f ]] && cp "$RES/$f" "$OUT_DIR/.$f" && mv "$OUT_DIR/.$f" "$OUT_DIR/$f"
  done
}
FINISHED=0
finish() {  # the EXIT trap: pack, print the table, exit 0 only when no phase failed
  [[ $FINISHED == 1 ]] && return
  FINISHED=1
  trap - INT TERM
  summarize
  echo
  cat "$RES/summary.txt" 2> /dev/null
  echo "results: $OUT_DIR/pagoda-check.tar.gz ($(du -k "$OUT_DIR/pagoda-check.tar.gz" 2> /dev/null | cut -f1) KiB), $OUT_DIR/summary.json, $OUT_DIR/summary.txt"
  if python3 -c 'import json, sys; sys.exit(0 if json.load(open(sys.argv[1]))["ok"] else 1)' "$RES/summary.json" 2> /dev/null; then
    exit 0
  fi
  exit 1
}
trap finish EXIT
CHILD=""
on_signal() {  # stop the running phase (timeout passes the signal on), then finish
  say "interrupted${CHILD:+: stopping the running phase}"
  [[ -n $CHILD ]] && kill -TERM "$CHILD" 2> /dev/null && wait "$CHILD" 2> /dev/null
  echo '{"phase": "interrupted", "status": "failed", "rc": 130, "seconds": 0, "reason": "signal"}' >> "$RES/phases.jsonl"
  exit 130
}
trap on_signal INT TERM

# phase NAME TIMEOUT_S CMD...: runs CMD (with the bundle's libraries) into NAME.log.
phase() {
  local name=$1 limit=$2; shift 2
  if [[ " ${PAGODA_SKIP:-} " == *" $name "* ]]; then skip "$name" "PAGODA_SKIP"; return; fi
  local left=$(( BUDGET - $(elapsed) ))
  if (( left < 20 )); then skip "$name" "out of time (budget ${BUDGET}s)"; return; fi
  (( limit > left )) && limit=$left
  say "$name (limit ${limit}s) -> $name.log"
  local t=$(date +%s) rc status last
  # In the background and waited for, so that a signal reaches the trap at once.
  PHASE=$name timeout -k 10 "$limit" bash -c '"$@"' bash "$@" > "$RES/$name.log" 2>&1 &
  CHILD=$!
  wait "$CHILD"
  rc=$?
  CHILD=
  status=ok
  [[ $rc != 0 ]] && status=failed
  [[ $rc == 124 || $rc == 137 ]] && echo "TIMED OUT after ${limit}s" >> "$RES/$name.log"
  last=$(grep -v '^\s*$' "$RES/$name.log" | tail -1 | cut -c1-120)
  python3 -c 'import json, sys; print(json.dumps({"phase": sys.argv[1], "status": sys.argv[2], "rc": int(sys.argv[3]), "seconds": int(sys.argv[4]), "log": sys.argv[1] + ".log", "last_line": sys.argv[5]}))' \
    "$name" "$status" "$rc" $(( $(date +%s) - t )) "$last" >> "$RES/phases.jsonl"
  tail -4 "$RES/$name.log" | sed 's/^/    /'
  say "$name: $status (rc $rc)"
  LAST_STATUS=$status
  summarize
}
skip() {
  LAST_STATUS=skipped
  say "$1: skipped: $2"
  printf '{"phase": "%s", "status": "skipped", "rc": 0, "seconds": 0, "reason": "%s"}\n' \
    "$1" "$2" >> "$RES/phases.jsonl"
  summarize
}
needs_gpu() {  # NAME: true when the phase may run
  [[ $HAVE_GPU == 1 ]] && return 0
  skip "$1" "no GPU: $NO_GPU_REASON"
  return 1
}

# ---- CUDA step features -------------------------------------------------------------
FEAT_GRAPHS=on FEAT_SPLIT_K=512 FEAT_PREFILL=fa2 FEAT_ASYNC=on FEAT_DECODE=on
FEAT_WHY=""
write_features() {
  python3 - "$RES/features.json" "$FEAT_GRAPHS" "$FEAT_SPLIT_K" "$FEAT_PREFILL" "$FEAT_ASYNC" "$FEAT_DECODE" "$FEAT_WHY" <<'PY'
import json, sys
path, graphs, split_k, prefill, asyn, decode, why = sys.argv[1:8]
json.dump({"graphs": graphs, "split_k": int(split_k), "prefill_kernel": prefill,
           "async_uploads": asyn, "decode_kernels": decode,
           "turned_off": [w for w in why.split("|") if w]},
          open(path, "w"), indent=2)
PY
}
feature_off() {  # NAME REASON: off for every later phase
  case $1 in
    graphs) [[ $FEAT_GRAPHS == off ]] && return; FEAT_GRAPHS=off; export PAGODA_CUDA_GRAPHS=off ;;
    split_k) [[ $FEAT_SPLIT_K == 0 ]] && return; FEAT_SPLIT_K=0; export PAGODA_CUDA_SPLIT_K=0 ;;
    prefill) [[ $FEAT_PREFILL == rowwise ]] && return; FEAT_PREFILL=rowwise; export PAGODA_CUDA_PREFILL_KERNEL=rowwise ;;
    async) [[ $FEAT_ASYNC == off ]] && return; FEAT_ASYNC=off; export PAGODA_CUDA_ASYNC_UPLOADS=off ;;
    decode) [[ $FEAT_DECODE == off ]] && return; FEAT_DECODE=off; export PAGODA_CUDA_DECODE_KERNELS=off ;;
  esac
  say "CUDA step feature $1 OFF from now on: $2"
  FEAT_WHY="$FEAT_WHY|$1: $2"
  export FEAT_GRAPHS FEAT_SPLIT_K FEAT_PREFILL FEAT_ASYNC FEAT_DECODE
  write_features
}
all_features_off() { local f; for f in graphs split_k prefill async decode; do feature_off "$f" "$1"; done; }
any_feature_on() { [[ $FEAT_GRAPHS == on || $FEAT_SPLIT_K != 0 || $FEAT_PREFILL == fa2 || $FEAT_ASYNC == on || $FEAT_DECODE == on ]]; }
feature_flags() {  # the flags for pagoda and bench_engine
  echo "--cuda-graphs $FEAT_GRAPHS --cuda-split-k $FEAT_SPLIT_K --cuda-prefill-kernel $FEAT_PREFILL"
  [[ $FEAT_ASYNC == off ]] && echo "--no-async-uploads"
  return 0
}
# CMD... with every feature off (environment; flags come from feature_flags).
features_off_env() {
  PAGODA_CUDA_GRAPHS=off PAGODA_CUDA_SPLIT_K=0 PAGODA_CUDA_PREFILL_KERNEL=rowwise \
    PAGODA_CUDA_ASYNC_UPLOADS=off PAGODA_CUDA_DECODE_KERNELS=off FEAT_GRAPHS=off \
    FEAT_SPLIT_K=0 FEAT_PREFILL=rowwise FEAT_ASYNC=off FEAT_DECODE=off "$@"
}
# Which features failed cases of op_tests implicate (split-K cases, async
# uploads, the decode GEMV / fused decode kernels).
op_test_suspects() {
  python3 - "$RES/gtest" <<'PY'
import glob, os, sys
import xml.etree.ElementTree as ET
out = set()
for path in glob.glob(os.path.join(sys.argv[1], "op_tests.*.xml")):
    prog = os.path.basename(path)[:-4].partition(".")[2]  # <phase>.<program>.xml
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
        elif prog in ("cuda_decode_fusion_gpu_test", "cuda_gemv_gpu_test"):
            out.add("decode")
print(" ".join(sorted(out)))
PY
}
export FEAT_GRAPHS FEAT_SPLIT_K FEAT_PREFILL FEAT_ASYNC FEAT_DECODE
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
  echo "cuBLAS/cuBLASLt: $CUBLAS_FROM; libcudart: the bundle's ($(ls "$RUN"/lib/libcudart.so* 2> /dev/null | xargs -n1 basename 2> /dev/null | tr '\n' ' '))"
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
    "$(printf '|%s' "${missing[@]}")" "$(printf '|%s' "${foreign[@]}")" > "$RES/libs.json"
  [[ ${#missing[@]} == 0 && ${#foreign[@]} == 0 ]]
}

TINY=$BUNDLE/model/tiny
CONFIGS=$BUNDLE/tree/model/configs  # the tree's model/configs (shapes for --load-format dummy)
gen() {  # gen BACKEND [args...]: greedy JSON output of the tiny model
  local backend=$1; shift
  # shellcheck disable=SC2046  # feature_flags is a word list
  pg "$RUN/bin/pagoda" generate "$TINY" --backend "$backend" --prompt "The quick brown fox" \
    --max-tokens 24 --ignore-eos --kv-cache-memory $((32 << 20)) --json $(feature_flags) "$@"
}
cpu_smoke() {
  gen cpu > "$RES/cpu_a.json" && gen cpu > "$RES/cpu_b.json" || return 1
  cat "$RES/cpu_a.json"
  cmp "$RES/cpu_a.json" "$RES/cpu_b.json" || { echo "two CPU runs differ"; return 1; }
  pg "$RUN/bin/pagoda" generate "$CONFIGS/tiny" --load-format dummy --backend cpu \
    --prompt "dummy" --max-tokens 8 --ignore-eos --kv-cache-memory $((16 << 20)) --json
}

gtests() {  # gtests BINARY...: each with XML output; fails if any fails
  local rc=0 t
  for t in "$@"; do
    [[ -x $RUN/bin/$t ]] || { echo "=== $t: missing"; rc=1; continue; }
    echo "=== $t"
    pg "$RUN/bin/$t" --gtest_output="xml:$RES/gtest/${PHASE:-gtests}.$t.xml" || rc=1
  done
  return $rc
}
cuda_generate() {  # the greedy token ids of CUDA must equal the CPU's
  gen cpu > "$RES/gen_cpu.json" && gen cuda > "$RES/gen_cuda.json" || return 1
  python3 - "$RES/gen_cpu.json" "$RES/gen_cuda.json" "$RES/generate.json" <<'PY'
import json, sys
c, g = (json.load(open(p))["samples"][0]["token_ids"] for p in sys.argv[1:3])
k = 0
while k < min(len(c), len(g)) and c[k] == g[k]:
    k += 1
print("cpu ", c); print("cuda", g)
print("greedy tokens equal before the first divergence: %d/%d (cuda gave %d)" % (k, len(c), len(g)))
json.dump({"equal": c == g, "equal_prefix": k, "len_cpu": len(c), "len_cuda": len(g)},
          open(sys.argv[3], "w"))
sys.exit(0 if c == g else 1)
PY
}

perf_engine() {
  if [[ $HAVE_GPU == 1 ]]; then
    # shellcheck disable=SC2046
    pg "$RUN/bin/bench_engine" --rows streams --backend cuda --load-format dummy \
      --model "$CONFIGS/llama-3-8b" --streams "$STREAMS" --kv-blocks 4608 \
      --stream-prompt 128 --stream-tokens 128 --stream-warmup "$WARMUP" $(feature_flags) \
      > "$RES/engine.json.tmp"
  else
    echo "no GPU ($NO_GPU_REASON): the harness on the CPU, tiny shape, 1 and 4 streams"
    pg "$RUN/bin/bench_engine" --rows streams --backend cpu --load-format dummy \
      --model "$CONFIGS/tiny" --streams 1,4 --kv-blocks 256 --stream-prompt 32 \
      --stream-tokens 16 --stream-warmup 2 > "$RES/engine.json.tmp"
  fi
  local rc=$?
  mv "$RES/engine.json.tmp" "$RES/engine.json"
  cat "$RES/engine.json"
  return $rc
}

# engine_run OUT_JSON ARGS...: bench_engine's streams row on the GPU, Llama-3-8B
# shape, dummy BF16, the current feature flags; OUT_JSON is written whole or not.
engine_run() {
  local out=$1
  shift
  # shellcheck disable=SC2046
  pg "$RUN/bin/bench_engine" --rows streams --backend cuda --load-format dummy \
    --model "$CONFIGS/llama-3-8b" "$@" $(feature_flags) > "$out.tmp"
  local rc=$?
  mv "$out.tmp" "$out"
  cat "$out"
  return $rc
}
perf_lockstep() {
  engine_run "$RES/engine_lockstep.json" --streams 1,64,256 --kv-blocks 4608 \
    --stream-prompt 128 --stream-tokens 128 --stream-warmup "$WARMUP" --no-async-scheduling
}
perf_context_1k() {  # 256 x (1024 + 64) tokens: 17408 blocks of 16 (34 GiB of BF16 KV)
  engine_run "$RES/engine_1k.json" --streams 256 --kv-blocks 18432 \
    --stream-prompt 1024 --stream-tokens 64 --stream-warmup 2
}

# The phases run in child shells (under timeout): they get these.
export BUNDLE RES RUN STREAMS WARMUP CUDA_LIBS HAVE_GPU NO_GPU_REASON TINY CONFIGS
export -f pg unpack environment gen cpu_smoke gtests cuda_generate perf_engine feature_flags \
  features_off_env engine_run perf_lockstep perf_context_1k

step_profile() {
  # shellcheck disable=SC2046  # (graphs stay eager while profiling: every op is timed)
  PAGODA_CUDA_PROFILE=$RES/step_profile.json pg "$RUN/bin/bench_engine" --rows streams \
    --backend cuda --load-format dummy --model "$CONFIGS/llama-3-8b" --streams 64 \
    --kv-blocks 1024 --stream-prompt 128 --stream-tokens 32 --stream-warmup 4 $(feature_flags) \
    || return 1
  cat "$RES/step_profile.json"
}
export -f step_profile

# compute-sanitizer memcheck over every GPU test binary (the e2e ones on the
# tiny model): out-of-bounds and misaligned device accesses, and CUDA API
# errors, that a passing test would not show. Each binary's report in
# memcheck.<name>.log; fails when any reports an error. Last: the figures come
# first, and on this run's budget it is cut, not the perf phases.
memcheck() {
  local cs rc=0 t
  cs=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2> /dev/null)
  [[ -n $cs ]] || { echo "compute-sanitizer not found"; return 1; }
  for t in "$RUN"/bin/*_gpu_test; do
    t=$(basename "$t")
    PAGODA_GPU_MODEL="$TINY" pg "$cs" --tool memcheck --error-exitcode 99 --print-limit 20 \
      "$RUN/bin/$t" > "$RES/memcheck.$t.log" 2>&1
    local r=$?
    echo "$t: rc $r, $(grep -c 'Invalid\|Misaligned\|API error' "$RES/memcheck.$t.log") reports; $(grep -m1 'ERROR SUMMARY' "$RES/memcheck.$t.log")"
    [[ $r == 0 ]] || rc=1
  done
  return $rc
}
export -f memcheck

say "bundle $BUNDLE -> $RUN; results in $RES, packed into $OUT_DIR; cuBLAS: $CUBLAS_FROM; GPU: $([[ $HAVE_GPU == 1 ]] && echo yes || echo "no ($NO_GPU_REASON)")"
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
phase perf_kernels 90 pg "$RUN/bin/bench_kernels" --quick --json "$RES/bench.json"
phase perf_engine 240 perf_engine
if [[ $LAST_STATUS == failed && $HAVE_GPU == 1 ]] && any_feature_on; then
  cp "$RES/engine.json" "$RES/engine_with_features.json" 2> /dev/null
  phase perf_engine_fallback 150 features_off_env perf_engine
fi
needs_gpu perf_context_1k && phase perf_context_1k 180 perf_context_1k
needs_gpu perf_lockstep && phase perf_lockstep 200 perf_lockstep
needs_gpu step_profile && phase step_profile 120 step_profile
needs_gpu memcheck && phase memcheck 120 memcheck
# The EXIT trap (finish) packs the results and prints the summary table.
