"""Shared helpers: the repository's paths and the attn-trace binary the API is held to.

The binary is the one `cargo test` built (target/debug/attn-trace, or $ATTN_TRACE_BIN); the
API must print what it prints, byte for byte, and refuse what it refuses, word for word.
"""

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("ATTN_TRACE_BIN", ROOT / "target" / "debug" / "attn-trace"))
MINILM = ROOT / ".cache" / "models" / "all-MiniLM-L6-v2"
SMOLLM2 = ROOT / ".cache" / "models" / "smollm2" / "SmolLM2-135M-Instruct.Q4_1.gguf"
SHOES = "my shoes are small, my feet are big."


@pytest.fixture(scope="session")
def cli():
    """Runs the binary: returns (exit code, stdout bytes, stderr text)."""
    assert BIN.exists(), f"{BIN} is missing: run cargo build (or set ATTN_TRACE_BIN)"

    def run(*args, cwd=None):
        p = subprocess.run([str(BIN), *map(str, args)], capture_output=True, cwd=cwd)
        return p.returncode, p.stdout, p.stderr.decode()

    return run


def values(step):
    """A JSON step's values as a numpy array (the strings "nan", "inf", "-inf" as floats)."""
    raw = np.array(step["values"], dtype=object)
    if raw.size and isinstance(raw.flat[0], (bool, np.bool_)):
        return raw.astype(bool)
    if step["id"] == "tokens":
        return raw
    return np.vectorize(float, otypes=[np.float64])(raw) if raw.size else raw.astype(np.float64)


def doc_steps(stdout: bytes) -> dict:
    return {s["id"]: s for s in json.loads(stdout)["steps"]}


def read_safetensors(path) -> dict:
    """A minimal safetensors reader, so the tests need no more than numpy."""
    data = Path(path).read_bytes()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + n])
    body = data[8 + n :]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = {"F32": "<f4", "I64": "<i8", "U8": "u1"}[info["dtype"]]
        a, b = info["data_offsets"]
        out[name] = np.frombuffer(body[a:b], dtype=dtype).reshape(info["shape"])
    return out
