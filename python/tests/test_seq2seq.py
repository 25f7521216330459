"""Encoder-decoders (T5, BART) from Python: `target=` is --target, the steps carry their
stack, and the document is the command's byte for byte."""

import json

import numpy as np

import attn_trace
from conftest import ROOT

T5 = ROOT / "fixtures" / "seq2seq" / "t5"
SOURCE, TARGET = "my shoes are small, my feet are big.", "the shoes are small."


def test_target_is_the_decoders_text(cli):
    t = attn_trace.trace(SOURCE, T5, target=TARGET, steps=["weights", "cross_attn.weights"])
    code, out, err = cli(SOURCE, "--model", T5, "--target", TARGET, "--steps", "weights,cross_attn.weights", "--format", "json")
    assert code == 0, err
    assert t.to_json().encode() == out
    doc = json.loads(out)
    source, target = len(doc["input"]["tokens"]), len(doc["input"]["target"]["tokens"])
    assert source != target
    cross = t.steps["decoder.layers.1.cross_attn.weights"]
    assert cross.shape == (4, target, source)
    assert np.allclose(cross.sum(axis=-1), 1.0, atol=1e-5)
    assert t.steps["encoder.layers.0.attn.weights"].shape == (4, source, source)


def test_encoder_decoder_generation_and_ablation():
    g = attn_trace.generate(SOURCE, T5, max_new_tokens=4, ablate="cross.1.2")
    assert len(g.token_ids) == 4
    assert g.steps[0]["gen.1.decoder.layers.0.cross_attn.weights"].shape[1] == 1
    assert g.trace.config["seq2seq"]["decoder"]["interventions"]["ablate_cross"] == [[1, 2]]
