"""Servers for tools/bench --compare-llama-cpp: start and stop `pagoda serve`
and llama.cpp's `llama-server` on 127.0.0.1, and describe the machine.

Contract: start_* return a Server whose /health answered 200, or raise
RuntimeError with the log's tail; Server.stop() sends SIGTERM (then SIGKILL
after a grace period) and always reaps the process. The caller owns the
Server and must stop it (use it as a context manager).
"""
from __future__ import annotations

import os
import pathlib
import re
import signal
import subprocess
import time
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parents[1]


class Server:
    def __init__(self, name, args, env, port, log_path):
        self.name, self.args, self.port, self.log_path = name, args, port, log_path
        self.base_url = f"http://127.0.0.1:{port}"
        self.log = open(log_path, "w")
        self.log.write("$ " + " ".join(args) + "\n")
        self.log.flush()
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT, env=env)

    def tail(self, n=3000) -> str:
        try:
            return pathlib.Path(self.log_path).read_text(errors="replace")[-n:]
        except OSError:
            return ""

    def wait_healthy(self, timeout=900.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited {self.proc.returncode}:\n{self.tail()}")
            try:
                with urllib.request.urlopen(self.base_url + "/health", timeout=5) as r:
                    if r.status == 200:
                        return self
            except OSError:
                pass
            time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"{self.name}: /health not 200 within {timeout} s:\n{self.tail()}")

    def cpu_seconds(self) -> float:
        """User + system CPU time of the server process (all threads) so far."""
        try:
            with open(f"/proc/{self.proc.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            return float("nan")

    def memory_mb(self) -> dict:
        """Resident memory of the server process now (rss) and its peak (hwm), MB;
        {} when /proc cannot tell."""
        out = {}
        try:
            with open(f"/proc/{self.proc.pid}/status") as f:
                for line in f:
                    fields = line.split()
                    key = {"VmRSS:": "rss_mb", "VmHWM:": "hwm_mb"}.get(fields[0] if fields else "")
                    if key:
                        out[key] = int(fields[1]) / 1024.0
        except (OSError, IndexError, ValueError):
            return {}
        return out

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def pagoda_help(binary: str) -> str:
    p = subprocess.run([binary, "serve", "--help"], capture_output=True, timeout=60)
    return p.stdout.decode(errors="replace") + p.stderr.decode(errors="replace")


def start_pagoda(binary, model, port, threads, log_path, extra=()) -> Server:
    """`pagoda serve` with PAGODA_CPU_THREADS=threads (and --threads when the
    binary has that flag), CPU backend, quantized precision."""
    help_text = pagoda_help(binary)
    args = [binary, "serve", model, "--host", "127.0.0.1", "--port", str(port), "--backend", "cpu"]
    if "--precision" in help_text:
        args += ["--precision", "quantized"]
    if re.search(r"--threads\b", help_text):
        args += ["--threads", str(threads)]
    args += list(extra)
    env = dict(os.environ, PAGODA_CPU_THREADS=str(threads))
    env.pop("PAGODA_API_KEY", None)
    return Server("pagoda", args, env, port, log_path).wait_healthy()


def start_llama(binary, model, port, threads, parallel, ctx, log_path, extra=(), env=None) -> Server:
    """llama-server with -t/-tb threads, -np parallel slots and -c ctx total;
    env: extra environment variables (e.g. OMP_WAIT_POLICY)."""
    args = [binary, "-m", model, "--host", "127.0.0.1", "--port", str(port),
            "-t", str(threads), "-tb", str(threads), "-np", str(parallel), "-c", str(ctx)] + list(extra)
    return Server("llama-server", args, dict(os.environ, **(env or {})), port, log_path).wait_healthy()


def llama_help_has(binary: str, flag: str) -> bool:
    p = subprocess.run([binary, "--help"], capture_output=True, timeout=60)
    return flag in (p.stdout + p.stderr).decode(errors="replace")


def machine() -> dict:
    """CPU model, the SIMD flags that matter here, nproc, load average, date, commit."""
    model, flags = "", []
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name") and not model:
                model = line.split(":", 1)[1].strip()
            if line.startswith("flags") and not flags:
                flags = line.split(":", 1)[1].split()
    wanted = ("avx", "avx2", "fma", "f16c", "avx_vnni", "avx512f", "avx512bw", "avx512vl",
              "avx512_vnni", "avx512_bf16", "amx_tile", "amx_int8")
    try:
        commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                                capture_output=True, timeout=30).stdout.decode().strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, timeout=30).stdout.decode().strip() != ""
    except OSError:
        commit, dirty = "", False
    return {"cpu": model, "isa": [f for f in wanted if f in flags], "nproc": os.cpu_count(),
            "loadavg": loadavg(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "commit": commit + ("+uncommitted" if dirty else "")}


def wait_for_load(below: float, max_s: float) -> float:
    """Sleeps until the 1-minute load average is below `below` or max_s
    seconds have passed; returns the seconds waited."""
    t0 = time.monotonic()
    while os.getloadavg()[0] >= below and time.monotonic() - t0 < max_s:
        time.sleep(15)
    return time.monotonic() - t0


def loadavg() -> list:
    return [round(x, 2) for x in os.getloadavg()]


def newest_pagoda() -> str:
    """build/pagoda: what `tools/dev` builds (pass --pagoda-bin for another build)."""
    return str(ROOT / "build" / "pagoda")


def fetch_model() -> str:
    env = dict(os.environ, PYTHON=os.environ.get("PYTHON", str(ROOT / ".venv" / "bin" / "python")))
    p = subprocess.run([str(ROOT / "tools" / "fetch-model")], capture_output=True, env=env, timeout=1800)
    if p.returncode != 0:
        raise RuntimeError(f"tools/fetch-model failed: {p.stderr.decode()[-2000:]}")
    return p.stdout.decode().strip().splitlines()[-1]


def build_llama_cpp() -> str:
    """Runs tools/peers/llama-cpp.sh (instant when cached); returns its bin folder."""
    p = subprocess.run([str(ROOT / "tools" / "peers" / "llama-cpp.sh")], stdout=subprocess.PIPE)
    if p.returncode != 0:
        raise RuntimeError("tools/peers/llama-cpp.sh failed (see its stderr above)")
    return os.path.join(p.stdout.decode().strip().splitlines()[-1], "bin")
