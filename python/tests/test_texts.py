"""Tokens as text (issue 28): `Trace.texts` is JSON's `input.texts`, `Trace.labels` what the
tables, heatmaps and the page show, `Trace.predictions` JSON's `predictions` with each
token's text; as tests/it/token_text.rs holds the command."""

import json

import pytest

import attn_trace
from conftest import ROOT, SHOES, SMOLLM2

# café is one token of SmolLM2's vocabulary (spelled ĠcafÃ©), 中 and 文 one each; 巴黎 is six
# bytes, each a token, the first with the space before it.
CAFE = "un café 中文 巴黎"


def test_smollm2_texts_equal_the_cli_json(cli):
    assert SMOLLM2.is_file(), f"{SMOLLM2} is missing: run bash tests/fetch-smollm2.sh"
    t = attn_trace.trace(CAFE, model=SMOLLM2, steps="tokens", top_k=3, quiet=True)
    code, out, err = cli(CAFE, "--model", SMOLLM2, "--steps", "tokens", "--top-k", "3", "--format", "json")
    assert code == 0, err
    assert t.to_json().encode() == out
    doc = json.loads(out)
    assert t.tokens == doc["input"]["tokens"] and t.texts == doc["input"]["texts"]
    assert t.tokens[1] == "ĠcafÃ©" and t.texts[1] == " café"
    assert t.texts[3:6] == ["中", "文", " <0xE5>"]
    assert t.texts[6:] == ["<0xB7>", "<0xB4>", "<0xE9>", "<0xBB>", "<0x8E>"]
    assert t.labels[:6] == ["un", "·café", "·", "中", "文", "·<0xE5>"]
    assert not any(c in "".join(t.texts + t.labels) for c in "ĠÃå")
    assert t.predictions == doc["predictions"]
    assert [p["text"] for p in t.predictions] == t.texts
    for row in t.predictions:
        assert len(row["top"]) == 3
        for p in row["top"]:
            assert "Ġ" not in p["text"] and (p["text"].isascii() or p["text"] != p["token"]), p


def test_a_byte_level_vocabulary_reads_as_text_in_the_heatmap():
    t = attn_trace.trace("my shoes", model=ROOT / "fixtures" / "decoders" / "gpt2", quiet=True)
    assert (t.tokens, t.texts, t.labels) == (["my", "Ġshoes"], ["my", " shoes"], ["my", "·shoes"])
    assert t.predictions[1]["token"] == "Ġshoes" and t.predictions[1]["text"] == " shoes"
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    ax = t.heatmap(0, 0).axes[0]
    assert [x.get_text() for x in ax.get_xticklabels()] == ["my", "·shoes"]
    assert [y.get_text() for y in ax.get_yticklabels()] == ["my", "·shoes"]


def test_no_texts_without_a_byte_form(cli):
    bert = attn_trace.trace("embeddings", model=ROOT / "fixtures" / "tiny-bert", steps="tokens")
    assert bert.texts is None and bert.labels == bert.tokens and bert.predictions is None
    toy = attn_trace.trace(SHOES, heads=2)
    assert toy.texts is None and toy.labels == toy.tokens and toy.predictions is None
    # A toy language-model head predicts the toy vocabulary's tokens, which have no text.
    lm = attn_trace.trace("my shoes", lm_head="tied", final_norm=True)
    code, out, err = cli("my shoes", "--lm-head", "tied", "--final-norm", "--format", "json")
    assert code == 0, err
    assert lm.texts is None and lm.predictions == json.loads(out)["predictions"]
    assert "text" not in lm.predictions[0] and "text" not in lm.predictions[0]["top"][0]
