"""attn_trace.compare against `attn-trace compare`: the same report (the dict's `report` is the
command's JSON), the ranked tables as numpy arrays, the same refusals word for word."""

import json

import numpy as np
import pytest

import attn_trace
from conftest import ROOT

TUNED = str(ROOT / "fixtures" / "compare" / "llama-gqa-tuned")
BASE = str(ROOT / "fixtures" / "decoders" / "llama-gqa")


def test_the_report_is_the_commands(cli):
    r = attn_trace.compare("Hello world", TUNED, BASE, threshold=1e-3)
    code, out, err = cli("compare", "Hello world", "--model", TUNED, "--model", BASE, "--threshold", "1e-3",
                         "--format", "json")
    assert code == 1, err
    assert r["report"] == json.loads(out)
    assert not r["within_threshold"] and r["first_divergence"]["id"] == "layers.1.attn.q"


def test_the_ranked_tables_are_numpy_arrays():
    r = attn_trace.compare("Hello world", TUNED, BASE)
    heads = r["heads"]
    assert heads["layer"].dtype == np.int64 and heads["js_mean"].dtype == np.float64
    assert (heads["layer"][0], heads["head"][0]) == (1, 2)
    assert heads["js_mean"][0] > 0 and np.all(heads["js_mean"][1:] == 0)
    steps = r["steps"]
    assert steps["id"][0] == "layers.1.attn.q" and np.all(np.diff(steps["relative_error"]) <= 0)
    assert steps["layer"][list(steps["id"]).index("embed.token")] == -1
    assert np.all(steps["relative_error"][steps["layer"] == 0] == 0)
    layers = r["layers"]
    assert list(layers["layer"]) == [-1, 0, 1] and layers["relative_error"][2] > 0
    p = r["predictions"]
    assert p["kl"].shape == (len(r["tokens"]),) and p["agree"].dtype == bool
    assert np.array_equal(p["agree"], p["a_top1"] == p["b_top1"])


def test_toy_models_and_their_flags(tmp_path):
    w = tmp_path / "w.safetensors"
    attn_trace.trace("my shoes are small", heads=2, seed=7, save_weights=str(w))
    same = attn_trace.compare("my shoes are small", "toy", w, heads=2, seed=7)
    assert same["within_threshold"] and np.all(same["steps"]["relative_error"] == 0)
    other = attn_trace.compare("my shoes are small", "toy", w, heads=2)
    assert other["first_divergence"]["id"] == "embed.token"


def test_refusals_are_the_commands(cli):
    qwen = str(ROOT / "fixtures" / "decoders" / "qwen2")
    with pytest.raises(attn_trace.Error) as e:
        attn_trace.compare("Hello world", BASE, qwen)
    code, _, err = cli("compare", "Hello world", "--model", BASE, "--model", qwen)
    assert (e.value.code, code) == (2, 2)
    assert err.strip() == f"attn-trace: {e.value}"
    with pytest.raises(TypeError, match="focus"):
        attn_trace.compare("Hello world", BASE, BASE, focus=1)
    with pytest.raises(attn_trace.Error, match="--threshold"):
        attn_trace.compare("Hello world", BASE, BASE, threshold=-1)
