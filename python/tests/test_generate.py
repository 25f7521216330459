"""attn_trace.generate: the command's --generate as a function, held to the binary's output."""

import json

import numpy as np
import pytest

import attn_trace
from conftest import ROOT, values

LLAMA = ROOT / "fixtures" / "decoders" / "llama-gqa"
PROMPT = "The capital of France is"


def test_generate_equals_the_cli_document(cli):
    g = attn_trace.generate(PROMPT, LLAMA, max_new_tokens=5, steps=["weights", "q"])
    code, out, err = cli(PROMPT, "--model", LLAMA, "--generate", "5", "--steps", "weights,q", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert g.to_json().encode() == out
    want = doc["generation"]
    assert g.text == want["text"]
    assert g.token_ids == [t["id"] for t in want["tokens"]]
    assert g.stop == "length" and len(g.steps) == 4
    for step, d in zip(g.steps, want["steps"]):
        assert sorted(step) == sorted(s["id"] for s in d["steps"])
        for s in d["steps"]:
            assert np.array_equal(step[s["id"]], values(s).astype(np.float32)), s["id"]
    # Step 0 is the prompt's trace.
    assert g.trace.steps["layers.0.attn.weights"].shape == (4, 7, 7)
    assert g.steps[0]["gen.1.layers.0.attn.weights"].shape == (4, 1, 8)


def test_sampling_options_are_keywords():
    a = attn_trace.generate(PROMPT, LLAMA, max_new_tokens=6, sample=True, temperature=1.5, sample_seed=9)
    b = attn_trace.generate(PROMPT, LLAMA, max_new_tokens=6, sample=True, temperature=1.5, sample_seed=9)
    assert a.token_ids == b.token_ids
    base = attn_trace.generate(PROMPT, LLAMA, max_new_tokens=6, ablate="0.1,1.2", baseline=True)
    assert base.baseline is not None and "parted_at" in base.baseline


def test_generation_errors_carry_the_cli_message(cli):
    with pytest.raises(attn_trace.Error) as e:
        attn_trace.generate(PROMPT, LLAMA, max_new_tokens=0)
    code, _, err = cli(PROMPT, "--model", LLAMA, "--generate", "0")
    assert e.value.code == code == 2
    assert "attn-trace: " + str(e.value) == err.strip()
    with pytest.raises(TypeError):
        attn_trace.generate(PROMPT, LLAMA, generate=3)


def test_ggml_arithmetic_is_a_keyword_and_writes_llama_cpps_tokens():
    # fixtures/oracle/llamacpp/smollm2_greedy.json: llama.cpp's own greedy tokens.
    from conftest import SMOLLM2
    oracle = json.loads((ROOT / "fixtures" / "oracle" / "llamacpp" / "smollm2_greedy.json").read_text())
    case = oracle["cases"]["capital"]
    g = attn_trace.generate(case["text"], SMOLLM2, max_new_tokens=8, arithmetic="ggml", no_special_tokens=True,
                            steps=["ids"])
    assert g.token_ids == case["generated_ids"][:8]
    assert json.loads(g.trace.to_json())["config"]["arithmetic"] == "ggml"
