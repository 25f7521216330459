"""The wheel's `attn-trace` command is the binary: the same bytes on stdout and stderr and the
same exit code for the same command line (it calls the same Rust `main`)."""

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SHOES

WHEEL_CMD = Path(sys.executable).parent / "attn-trace"


@pytest.mark.parametrize(
    "args",
    [
        [SHOES, "--heads", "2"],
        [SHOES, "--heads", "2", "--format", "json", "--causal"],
        [SHOES, "--format", "jsonl", "--steps", "weights"],
        [SHOES, "--format", "heatmap", "--color", "always"],
        [SHOES, "--heads", "3"],
        [SHOES, "--format", "xml"],
        ["schema"],
        ["diff", "nonexistent.json", "other.json"],
        ["--version"],
        ["--help"],
    ],
)
def test_the_wheel_command_is_the_binary(cli, args, tmp_path):
    assert WHEEL_CMD.exists(), f"{WHEEL_CMD}: the wheel's script is missing"
    want = cli(*args, cwd=tmp_path)
    got = subprocess.run([str(WHEEL_CMD), *args], capture_output=True, cwd=tmp_path)
    assert (got.returncode, got.stdout, got.stderr.decode()) == want


def test_a_closed_pipe_is_not_a_failure(tmp_path):
    p = subprocess.run(
        f"'{WHEEL_CMD}' '{SHOES}' --d-model 64 --layers 4 --steps all --format json | head -c 10",
        shell=True, capture_output=True, executable="/bin/bash", cwd=tmp_path,
    )
    assert p.stdout == b'{\n  "schem' and p.stderr == b""
