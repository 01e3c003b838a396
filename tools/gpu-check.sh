#!/usr/bin/env bash
# gpu-check.sh: one command that checks the CUDA backend on a machine with an
# NVIDIA GPU and no network, and leaves logs plus a JSON summary.
#
#   tools/gpu-check.sh [OUT_DIR]      (OUT_DIR defaults to $OUT, else /tmp/pagoda-gpu-out)
#   tools/gpu-check.sh --prepare      (run once where /usr/src/googletest exists:
#                                      copies it to third_party/googletest, which
#                                      .gitignore ignores, so pass it in `carry`)
#
# Steps: log the environment (nvidia-smi, nvcc, cmake, compilers, cuBLAS);
# configure tools/CMakeLists.txt standalone (the gpu layer, every
# tests/*_gpu_test.cpp and bench_kernels; no CAF/spdlog/... needed) in
# $PAGODA_GPU_BUILD (default /tmp/pagoda-gpu-build) for $PAGODA_CUDA_ARCHS
# (default 90); build with -j$(nproc), continuing past failing targets; run
# `ctest -L gpu`; run bench_kernels; if time allows, compute-sanitizer memcheck
# on a few small test cases. Everything lands in OUT_DIR (8 files at most):
#   env.txt build.txt ctest.txt bench.json bench.txt sanitizer.txt summary.json
# Exit status: 0 when the build and every test passed, else 1.
# Budget: about 8 minutes on a 16-core machine (the sanitizer step is skipped
# when the earlier steps took more than 5 minutes).
set -u -o pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
if [[ "${1:-}" == "--prepare" ]]; then
  if [[ -f "$ROOT/third_party/googletest/CMakeLists.txt" ]]; then
    echo "third_party/googletest already present"
  else
    mkdir -p "$ROOT/third_party" && cp -r /usr/src/googletest "$ROOT/third_party/googletest" &&
      echo "copied /usr/src/googletest to third_party/googletest ($(du -sh "$ROOT/third_party/googletest" | cut -f1))"
  fi
  exit $?
fi

OUT_DIR=${1:-${OUT:-/tmp/pagoda-gpu-out}}
BUILD=${PAGODA_GPU_BUILD:-/tmp/pagoda-gpu-build}
ARCHS=${PAGODA_CUDA_ARCHS:-90}
JOBS=${JOBS:-$(nproc)}
mkdir -p "$OUT_DIR"
export PATH=/usr/local/cuda/bin:$PATH
T0=$(date +%s)
elapsed() { echo $(( $(date +%s) - T0 )); }
say() { echo "[gpu-check +$(elapsed)s] $*"; }

# ---- 1. environment ----------------------------------------------------------------
say "environment -> env.txt"
{
  date -u; uname -a; echo
  nvidia-smi || echo "nvidia-smi failed"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.memory \
    --format=csv || true
  echo; nvcc --version || echo "no nvcc"
  echo; cmake --version | head -1; echo "ninja $(ninja --version 2>&1)"
  c++ --version | head -1; ldd --version | head -1
  echo; echo "cuBLAS / cudart in the toolkit:"
  ls /usr/local/cuda/lib64 /usr/local/cuda/targets/*/lib 2>/dev/null | grep -E 'cublas|cudart' | sort -u
  echo; echo "googletest: $(ls -d "$ROOT"/third_party/googletest /usr/src/googletest 2>/dev/null)"
  echo "compute-sanitizer: $(command -v compute-sanitizer || echo none)"
  echo; echo "tree: $(cd "$ROOT" && git rev-parse HEAD 2>/dev/null) $(cd "$ROOT" && git status --short 2>/dev/null | wc -l) changed files"
} > "$OUT_DIR/env.txt" 2>&1

# cuBLAS outside the toolkit (pip wheels): point CMake at it. Untested fallback.
EXTRA=()
if ! ls /usr/local/cuda/lib64/libcublas.so* /usr/local/cuda/targets/*/lib/libcublas.so* >/dev/null 2>&1; then
  WHEEL=$(python3 - <<'PY' 2>/dev/null
import glob, os, site
for d in site.getsitepackages():
    for lib in glob.glob(os.path.join(d, "nvidia", "**", "libcublas.so.*"), recursive=True):
        print(os.path.dirname(lib)); raise SystemExit
PY
)
  if [[ -n "$WHEEL" ]]; then
    say "cuBLAS from $WHEEL"
    EXTRA+=("-DCUDA_cublas_LIBRARY=$(ls "$WHEEL"/libcublas.so.* | head -1)"
            "-DCUDA_cublasLt_LIBRARY=$(ls "$WHEEL"/libcublasLt.so.* | head -1)"
            "-DCMAKE_CXX_FLAGS=-I$WHEEL/../include" "-DCMAKE_CUDA_FLAGS=-I$WHEEL/../include")
    export LD_LIBRARY_PATH="$WHEEL:${LD_LIBRARY_PATH:-}"
  fi
fi

# ---- 2. configure and build -----------------------------------------------------------
say "configure + build ($ARCHS, -j$JOBS) -> build.txt"
CONFIGURE_OK=0; BUILD_OK=0
{
  cmake -S "$ROOT/tools" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DPAGODA_CUDA_ARCHS="$ARCHS" "${EXTRA[@]}" && echo CONFIGURE_OK
} > "$OUT_DIR/build.txt" 2>&1 && CONFIGURE_OK=1
if [[ $CONFIGURE_OK == 1 ]]; then
  cmake --build "$BUILD" -j "$JOBS" -- -k 0 >> "$OUT_DIR/build.txt" 2>&1 && BUILD_OK=1
fi
say "configure=$CONFIGURE_OK build=$BUILD_OK"

# ---- 3. tests -------------------------------------------------------------------------
CTEST_RC=-1
if [[ $CONFIGURE_OK == 1 ]]; then
  say "ctest -L gpu -> ctest.txt"
  rm -rf "$BUILD/gtest-xml"; mkdir -p "$BUILD/gtest-xml"
  GTEST_OUTPUT="xml:$BUILD/gtest-xml/" ctest --test-dir "$BUILD" -L gpu -V --timeout 180 \
    > "$OUT_DIR/ctest.txt" 2>&1
  CTEST_RC=$?
  grep -E "tests passed|tests failed|\*\*\*" "$OUT_DIR/ctest.txt" | tail -15
fi

# ---- 4. benchmark ---------------------------------------------------------------------
BENCH_RC=-1
if [[ -x "$BUILD/bench_kernels" ]]; then
  say "bench_kernels -> bench.json, bench.txt"
  timeout 180 "$BUILD/bench_kernels" --json "$OUT_DIR/bench.json" > /dev/null 2> "$OUT_DIR/bench.txt"
  BENCH_RC=$?
  cat "$OUT_DIR/bench.txt"
fi

# ---- 5. memory checker on small cases (when there is time) -------------------------------
SAN_RC=-1
if command -v compute-sanitizer > /dev/null && [[ $(elapsed) -lt 300 && $BUILD_OK == 1 ]]; then
  say "compute-sanitizer memcheck -> sanitizer.txt"
  SAN_RC=0
  for t in "cuda_attention_gpu_test:*BatchEquals*:*EndToEnd*:*GroupsAboveEight*" \
           "cuda_kv_cache_gpu_test:*" "cuda_ops_gpu_test:*Rope*:*RmsNorm*:*Embedding*" \
           "cuda_sampling_gpu_test:*Deterministic*"; do
    bin=${t%%:*}; filter=${t#*:}
    left=$(( 440 - $(elapsed) ))
    if [[ $left -lt 30 ]]; then echo "=== out of time: skipped $bin" >> "$OUT_DIR/sanitizer.txt"; continue; fi
    echo "=== $bin --gtest_filter=$filter" >> "$OUT_DIR/sanitizer.txt"
    timeout $(( left < 100 ? left : 100 )) compute-sanitizer --tool memcheck --error-exitcode 3 "$BUILD/$bin" \
      --gtest_filter="$filter" >> "$OUT_DIR/sanitizer.txt" 2>&1 || SAN_RC=$?
  done
  tail -5 "$OUT_DIR/sanitizer.txt"
fi

# ---- 6. summary -----------------------------------------------------------------------
python3 - "$BUILD/gtest-xml" "$OUT_DIR" "$CONFIGURE_OK" "$BUILD_OK" "$CTEST_RC" "$BENCH_RC" \
  "$SAN_RC" "$(elapsed)" <<'PY' | tee "$OUT_DIR/summary.json"
import glob, json, os, sys
import xml.etree.ElementTree as ET
xml_dir, out_dir, conf, build, ctest_rc, bench_rc, san_rc, secs = sys.argv[1:9]
s = {"configure_ok": conf == "1", "build_ok": build == "1", "ctest_rc": int(ctest_rc),
     "bench_rc": int(bench_rc), "sanitizer_rc": int(san_rc), "elapsed_s": int(secs),
     "tests": {"passed": 0, "failed": 0, "skipped": 0}, "failed_cases": [], "programs": {}}
for path in sorted(glob.glob(os.path.join(xml_dir, "*.xml"))):
    prog = {"passed": 0, "failed": 0, "skipped": 0}
    for case in ET.parse(path).getroot().iter("testcase"):
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
s["all_skipped"] = s["tests"]["passed"] == 0 and s["tests"]["skipped"] > 0
try:  # programs ctest saw fail (a crash leaves no XML)
    text = open(os.path.join(out_dir, "ctest.txt"), errors="replace").read()
    tail = text.split("The following tests FAILED:", 1)
    s["ctest_failed_programs"] = [l.strip() for l in tail[1].splitlines() if l.strip()
                                  and not l.startswith("Errors")] if len(tail) == 2 else []
except OSError:
    s["ctest_failed_programs"] = []
try:
    with open(os.path.join(out_dir, "bench.json")) as f:
        s["bench"] = json.load(f)
except Exception as e:  # no bench output
    s["bench"] = None
print(json.dumps(s, indent=2))
PY

if [[ $BUILD_OK == 1 && $CTEST_RC == 0 ]]; then
  say "OK"; exit 0
fi
say "FAILED (configure=$CONFIGURE_OK build=$BUILD_OK ctest_rc=$CTEST_RC)"; exit 1
