"""Shared fixtures for the Python integration tests: the pagoda binary and the
default model (tools/dev exports PAGODA_BIN and PAGODA_MODEL)."""
import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"


@pytest.fixture(scope="session")
def pagoda_bin() -> str:
    path = os.environ.get("PAGODA_BIN", str(ROOT / "build" / "pagoda"))
    if not os.path.exists(path):
        pytest.skip(f"pagoda binary not found at {path} (build first)")
    return path


@pytest.fixture(scope="session")
def model_path() -> str:
    path = os.environ.get(
        "PAGODA_MODEL",
        os.path.expanduser("~/.cache/pagoda/models/SmolLM2-135M-Instruct.Q4_1.gguf"))
    if not os.path.exists(path):
        pytest.skip(f"default model not found at {path} (run tools/fetch-model)")
    return path


def run(args, stdin: str = "", check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(args, input=stdin.encode(), capture_output=True, timeout=120)
    if check and proc.returncode != 0:
        raise AssertionError(f"{args} exited {proc.returncode}: {proc.stderr.decode()}")
    return proc
