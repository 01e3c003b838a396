#!/usr/bin/env bash
# tools/peers/llama-cpp.sh: builds llama.cpp's llama-server and llama-bench, CPU
# only, from the llama.cpp sources vendored in PyPI's llama-cpp-python sdist.
# A peer for side-by-side benchmarks (tools/bench --compare-llama-cpp); it is
# outside the project's build and outside CI.
#
# Contract:
#   - prints the folder that holds bin/llama-server and bin/llama-bench as the
#     last line of stdout; everything else goes to stderr;
#   - caches under $PAGODA_PEERS_DIR (default ~/.cache/pagoda/peers), keyed by
#     the sdist version and the ISA flags used, so a second run is instant;
#   - GGML_NATIVE=OFF: -march=native would let ggml emit AMX, which some VMs
#     report in cpuid but forbid (SIGILL in tinygemm_kernel_amx). The ISA
#     flags are chosen explicitly from /proc/cpuinfo instead; AMX is always off.
#   - needs cmake, ninja (or make) and a C++17 compiler; no CUDA, no curl, no SSL.
# Environment: LLAMA_CPP_PYTHON_VERSION (default pinned below), PYTHON (a Python
# with pip; default /work/main/.venv/bin/python or python3), JOBS (default nproc),
# LLAMA_CPP_ISA_OFF (see below).
set -euo pipefail

VERSION="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
PEERS="${PAGODA_PEERS_DIR:-$HOME/.cache/pagoda/peers}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PYTHON="${PYTHON:-}"
if [[ -z "$PYTHON" ]]; then
  if [[ -x "$HERE/../../.venv/bin/python" ]]; then PYTHON="$HERE/../../.venv/bin/python"; else PYTHON=python3; fi
fi
JOBS="${JOBS:-$(nproc)}"

log() { echo "llama-cpp.sh: $*" >&2; }

# The CPU's flags (first processor's line of /proc/cpuinfo).
cpu_flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
# LLAMA_CPP_ISA_OFF: /proc/cpuinfo flags to treat as absent, to build the
# peer for a smaller ISA on this machine (a side-by-side with Pagoda forced to
# the same one by PAGODA_CPU_ISA), e.g. "avx_vnni avx512_vnni avx512vbmi
# avx512_bf16" for a Skylake-class AVX-512 without VNNI.
for off in ${LLAMA_CPP_ISA_OFF:-}; do cpu_flags=${cpu_flags// $off / }; done
has() { [[ "$cpu_flags" == *" $1 "* ]]; }
onoff() { if has "$1"; then echo ON; else echo OFF; fi; }

isa_args=(-DGGML_NATIVE=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF)
isa_tag=""
add_isa() { # add_isa CMAKE_OPTION ON|OFF TAG
  isa_args+=("-D$1=$2")
  if [[ "$2" == ON ]]; then isa_tag+="-$3"; fi
}
add_isa GGML_SSE42 "$(onoff sse4_2)" sse42
add_isa GGML_AVX "$(onoff avx)" avx
add_isa GGML_AVX2 "$(onoff avx2)" avx2
add_isa GGML_BMI2 "$(onoff bmi2)" bmi2
add_isa GGML_FMA "$(onoff fma)" fma
add_isa GGML_F16C "$(onoff f16c)" f16c
add_isa GGML_AVX_VNNI "$(onoff avx_vnni)" avxvnni
# ggml's GGML_AVX512 means F+CD+VL+DQ+BW together (it passes all five -m flags).
avx512=OFF
if has avx512f && has avx512cd && has avx512vl && has avx512dq && has avx512bw; then avx512=ON; fi
add_isa GGML_AVX512 "$avx512" avx512
if [[ "$avx512" == ON ]]; then
  add_isa GGML_AVX512_VBMI "$(onoff avx512vbmi)" vbmi
  add_isa GGML_AVX512_VNNI "$(onoff avx512_vnni)" vnni512
  add_isa GGML_AVX512_BF16 "$(onoff avx512_bf16)" bf16
else
  isa_args+=(-DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF)
fi

prefix="$PEERS/llama-cpp-$VERSION${isa_tag}"
if [[ -x "$prefix/bin/llama-server" && -x "$prefix/bin/llama-bench" && -f "$prefix/BUILD_OK" ]]; then
  log "cached: $prefix"
  echo "$prefix"
  exit 0
fi

src_root="$PEERS/src"
sdist="$src_root/llama_cpp_python-$VERSION.tar.gz"
mkdir -p "$src_root"
# The sdist straight from PyPI's simple index (seconds), checked against the
# sha256 the index gives; `pip download --no-binary :all:` is the fallback,
# since it may first build the sdist's build requirements (cmake) from
# source, which took ~30 minutes on two cores.
fetch_sdist() {
  local index="${PIP_INDEX_URL:-https://pypi.org/simple}" name="llama_cpp_python-$VERSION.tar.gz" href url sha
  command -v curl >/dev/null || return 1
  href=$(curl -fsS "${index%/}/llama-cpp-python/" | grep -o "href=\"[^\"]*/$name#sha256=[0-9a-f]*\"" | head -1) || return 1
  href=${href#href=\"}; href=${href%\"}
  url=${href%%#*}; sha=${href##*#sha256=}
  [[ -n $url && -n $sha ]] || return 1
  curl -fsS -o "$sdist.part" "$url" || return 1
  if ! echo "$sha  $sdist.part" | sha256sum -c --status; then
    log "sha256 of $url differs from the index's $sha"; rm -f "$sdist.part"; return 1
  fi
  mv "$sdist.part" "$sdist"
}
if [[ ! -f "$sdist" ]]; then
  log "downloading llama-cpp-python==$VERSION (sdist) into $src_root"
  fetch_sdist || "$PYTHON" -m pip download --no-binary :all: --no-deps -d "$src_root" "llama-cpp-python==$VERSION" >&2
fi
unpacked="$src_root/llama_cpp_python-$VERSION"
if [[ ! -f "$unpacked/vendor/llama.cpp/CMakeLists.txt" ]]; then
  log "unpacking $sdist"
  tar -xzf "$sdist" -C "$src_root"
fi
llama="$unpacked/vendor/llama.cpp"
[[ -f "$llama/CMakeLists.txt" ]] || { log "no vendored llama.cpp in $unpacked"; exit 1; }

build="$prefix/build"
generator=()
if command -v ninja >/dev/null; then generator=(-G Ninja); fi
log "configuring $build with: ${isa_args[*]}"
cmake -S "$llama" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DBUILD_SHARED_LIBS=OFF -DGGML_CUDA=OFF -DGGML_METAL=OFF -DGGML_VULKAN=OFF \
  -DGGML_BACKEND_DL=OFF -DGGML_CPU_ALL_VARIANTS=OFF "${isa_args[@]}" \
  -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=ON \
  -DLLAMA_BUILD_SERVER=ON >&2
log "building llama-server and llama-bench with $JOBS jobs"
cmake --build "$build" -j "$JOBS" --target llama-server llama-bench >&2
mkdir -p "$prefix/bin"
cp "$build/bin/llama-server" "$build/bin/llama-bench" "$prefix/bin/"
printf 'llama-cpp-python %s\ncmake %s\n' "$VERSION" "${isa_args[*]}" > "$prefix/BUILD_OK"
log "built: $prefix/bin/llama-server, $prefix/bin/llama-bench"
echo "$prefix"
