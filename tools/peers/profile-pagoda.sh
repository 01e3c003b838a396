#!/usr/bin/env bash
# tools/peers/profile-pagoda.sh: where `pagoda serve` spends its CPU time under
# a serving load: perf samples (cpu-clock, 999 Hz, all threads) while
# tools/bench runs the load, then the hottest symbols (self time, percent).
#
#   tools/peers/profile-pagoda.sh [PAGODA_BIN] [streams32|decode1]   (> report.txt)
#
# Loads: streams32 = 32 requests, 32 concurrent, token-id prompts of 16-32,
# 128 new tokens, greedy, ignore_eos; decode1 = 3 requests one at a time, 128
# new. Port 18160. Needs perf (linux-perf) and the venv. Starts one server
# and stops it (SIGTERM) before exiting, also on failure.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BIN="${1:-$ROOT/build/pagoda}"
LOAD="${2:-streams32}"
PORT="${PORT:-18160}"
THREADS="${THREADS:-2}"
PY="$ROOT/.venv/bin/python"
MODEL="$(PYTHON=$PY "$ROOT/tools/fetch-model")"
work="$(mktemp -d /tmp/pagoda-profile.XXXXXX)"
case "$LOAD" in
  streams32) load_args=(--num-prompts 32 --max-concurrency 32 --input-len 16-32 --output-len 128) ;;
  decode1) load_args=(--num-prompts 3 --max-concurrency 1 --input-len 16 --output-len 128) ;;
  *) echo "unknown load $LOAD" >&2; exit 2 ;;
esac
PAGODA_CPU_THREADS=$THREADS "$BIN" serve "$MODEL" --host 127.0.0.1 --port "$PORT" --backend cpu \
  --precision quantized > "$work/serve.log" 2>&1 &
server=$!
trap 'kill -TERM $server 2>/dev/null || true; wait $server 2>/dev/null || true' EXIT
for _ in $(seq 120); do
  curl -sf -o /dev/null "http://127.0.0.1:$PORT/health" && break
  sleep 0.5
done
"$PY" "$ROOT/tools/bench" --base-url "http://127.0.0.1:$PORT" --num-prompts 1 --output-len 8 --quiet \
  --ignore-eos >&2  # warm-up
perf record -e cpu-clock -F 999 -g -p "$server" -o "$work/perf.data" -- \
  "$PY" "$ROOT/tools/bench" --base-url "http://127.0.0.1:$PORT" "${load_args[@]}" --ignore-eos \
  --result-json "$work/bench.json" >&2 2>"$work/perf.err" || { cat "$work/perf.err" >&2; exit 1; }
echo "# $BIN, load $LOAD, threads $THREADS, $(date -u '+%F %H:%M UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg)"
"$PY" -c "import json,sys; m=json.load(open(sys.argv[1]))['runs'][0]['metrics']; print(f\"# output {m['output_throughput']:.1f} tok/s, TPOT mean {m['tpot_ms']['mean']:.1f} ms\")" "$work/bench.json"
perf report -i "$work/perf.data" --no-children --sort symbol --stdio --percent-limit 1 2>/dev/null |
  grep -E '^ +[0-9]' | sed -E 's/[[:space:]-]+$//' | cut -c1-160 | head -25
rm -rf "$work"
