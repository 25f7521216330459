"""The Python API against the command: the same numbers (exactly), the same documents (byte
for byte), the same refusals (word for word); and against PyTorch through the oracle's
fixtures, as tests/it/oracle.rs holds the command."""

import json
import os
from pathlib import Path

import numpy as np
import pytest

import attn_trace
from conftest import MINILM, ROOT, SHOES, doc_steps, read_safetensors, values


def test_import_has_the_api():
    for name in ("trace", "diff", "schema", "Trace", "Error"):
        assert hasattr(attn_trace, name), name
    assert attn_trace.__version__.count(".") == 2


def test_the_acceptance_line_equals_the_cli_json_exactly(cli):
    t = attn_trace.trace("my shoes are small", heads=2)
    code, out, err = cli("my shoes are small", "--heads", "2", "--format", "json")
    assert code == 0, err
    want = doc_steps(out)
    w = t.steps["layers.0.attn.weights"]
    assert w.dtype == np.float32 and w.shape == (2, 4, 4)
    # Exactly: the JSON holds each f32 as its shortest round-trip decimal.
    assert np.array_equal(w, np.array(want["layers.0.attn.weights"]["values"], dtype=np.float32))
    assert t.to_json().encode() == out


@pytest.mark.parametrize(
    "kwargs,args",
    [
        ({"heads": 2}, ["--heads", "2"]),
        ({"heads": 2, "causal": True, "layers": 2}, ["--heads", "2", "--causal", "--layers", "2"]),
        ({"d_model": 8, "heads": 4, "d_k": 3, "d_v": 5, "norm": "pre", "activation": "gelu"},
         ["--d-model", "8", "--heads", "4", "--d-k", "3", "--d-v", "5", "--norm", "pre", "--activation", "gelu"]),
        ({"steps": ["weights", "context"], "layer": 0, "head": 1, "heads": 2},
         ["--steps", "weights,context", "--layer", "0", "--head", "1", "--heads", "2"]),
        ({"positions": "rope", "rms_norm": True, "gated": True, "activation": "silu", "heads": 2, "kv_heads": 1,
          "final_norm": True, "lm_head": "tied", "causal": True, "norm": "pre"},
         ["--positions", "rope", "--rms-norm", "--gated", "--activation", "silu", "--heads", "2", "--kv-heads", "1",
          "--final-norm", "--lm-head", "tied", "--causal", "--norm", "pre"]),
        ({"heads": 2, "ablate": "0.1", "knockout": ["0:small->shoes"], "stats": True, "rollout": True},
         ["--heads", "2", "--ablate", "0.1", "--knockout", "0:small->shoes", "--stats", "--rollout"]),
        ({"scale": -0.5, "remove": "", "seed": 7}, ["--scale", "-0.5", "--remove", "", "--seed", "7"]),
    ],
)
def test_every_step_and_the_document_equal_the_cli(cli, kwargs, args):
    t = attn_trace.trace(SHOES, **kwargs)
    code, out, err = cli(SHOES, *args, "--format", "json")
    assert code == 0, err
    assert t.to_json().encode() == out
    want = doc_steps(out)
    assert list(t.steps) == list(want)
    for sid, step in want.items():
        got = t.steps[sid]
        assert list(got.shape) == step["shape"], sid
        if got.dtype == np.float32:
            assert np.array_equal(got, values(step).astype(np.float32), equal_nan=True), sid
        else:
            assert got.tolist() == np.array(step["values"]).tolist(), sid
    assert t.tokens == json.loads(out)["input"]["tokens"]
    assert t.config == json.loads(out)["config"]


def test_ablate_expert_is_a_keyword_from_the_flag(cli):
    # No hand-written code: the keyword is --ablate-expert's clap definition.
    m = str(ROOT / "fixtures" / "decoders" / "qwen2_moe")
    t = attn_trace.trace(SHOES, model=m, ablate_expert="0.1,1.3")
    code, out, err = cli(SHOES, "--model", m, "--ablate-expert", "0.1,1.3", "--format", "json")
    assert code == 0, err
    assert t.to_json().encode() == out
    assert t.config["interventions"]["ablate_expert"] == [[0, 1], [1, 3]]
    chosen = t.steps["layers.0.ffn.router.chosen"]
    assert chosen.dtype == np.int64 and chosen.shape == (len(t.tokens), 2) and 1 not in chosen
    assert np.isneginf(t.steps["layers.1.ffn.router.logits"][:, 3]).all()


def test_patch_method_is_a_keyword_from_the_flag(cli):
    # --patch-method from its clap definition: attribution patching's grid, as the command's.
    m = str(ROOT / "fixtures" / "decoders" / "gpt2")
    kw = dict(model=m, patch="my shoes are big, my feet are", metric=[" big", " small"])
    t = attn_trace.trace("my shoes are small, my feet are", patch_method="attribution", **kw)
    code, out, err = cli("my shoes are small, my feet are", "--model", m, "--patch", "my shoes are big, my feet are",
                         "--metric", " big", " small", "--patch-method", "attribution", "--format", "json")
    assert code == 0, err
    assert t.to_json().encode() == out
    assert json.loads(out)["patching"]["method"] == "attribution"


def test_chat_and_system_are_keywords_from_the_flags(cli):
    # --chat (a flag) and --system (a value) from their clap definitions, as the command has them.
    m = str(ROOT / "fixtures" / "decoders" / "qwen2")
    t = attn_trace.trace("my shoes", model=m, chat=True, system="Be brief.")
    code, out, err = cli("my shoes", "--model", m, "--chat", "--system", "Be brief.", "--format", "json")
    assert code == 0, err
    assert t.to_json().encode() == out
    chat = json.loads(out)["input"]["chat"]
    assert chat == {
        "system": "Be brief.",
        "user": "my shoes",
        "rendered": "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nmy shoes<|im_end|>\n"
        "<|im_start|>assistant\n",
    }
    assert t.tokens[:3] == ["<|im_start|>", "s", "y"] and t.tokens[-1] == "Ċ"
    with pytest.raises(attn_trace.Error, match="^--chat: it renders a language model's chat template"):
        attn_trace.trace("my shoes", chat=True)


def _kwargs(args, options):
    """An oracle case's command line as keyword arguments."""
    sentence, rest, kw = args[0], list(args[1:]), {}
    while rest:
        key = rest.pop(0)[2:].replace("-", "_")
        kw[key] = True if options[key] == "flag" else rest.pop(0)
    return sentence, kw


def test_the_pytorch_oracle_cases_through_the_api():
    cases = sorted((ROOT / "fixtures" / "oracle" / "cases").glob("*.json"))
    assert len(cases) >= 20, "the oracle's case matrix is missing"
    options = dict(attn_trace._native.options())
    compared = 0
    for path in cases:
        case = json.loads(path.read_text())
        sentence, kw = _kwargs(case["args"], options)
        t = attn_trace.trace(sentence, **kw)
        assert t.token_ids == case["token_ids"], case["name"]
        for step in case["steps"]:
            got = t.steps[step["id"]]
            # f32 throughout; candle and PyTorch sum in different orders (as tests/it/oracle.rs).
            np.testing.assert_allclose(got, values(step), atol=1e-5, rtol=1e-5, err_msg=f"{case['name']} {step['id']}")
            compared += 1
    assert compared > 500


def test_minilm_equals_the_cli_exactly(cli):
    assert MINILM.is_dir(), f"{MINILM} is missing: run bash tests/fetch-model.sh"
    s = "The quick brown fox jumps over the lazy dog."
    t = attn_trace.trace(s, model=MINILM, steps="weights,output")
    code, out, err = cli(s, "--model", MINILM, "--steps", "weights,output", "--format", "json")
    assert code == 0, err
    assert t.to_json().encode() == out
    assert t.tokens[0] == "[CLS]" and t.tokens[-1] == "[SEP]"
    assert t.config["layers"] == 6 and t.config["heads"] == 12
    w = t.steps["layers.5.attn.weights"]
    assert w.shape == (12, len(t.tokens), len(t.tokens))
    np.testing.assert_allclose(w.sum(axis=-1), 1.0, atol=1e-5)


def test_steps_are_read_only_views_of_the_trace():
    t = attn_trace.trace("my shoes are small", heads=2)
    w = t.steps["layers.0.attn.weights"]
    assert not w.flags.writeable and not w.flags.owndata
    with pytest.raises(ValueError):
        w[0, 0, 0] = 1.0
    with pytest.raises(TypeError):
        t.steps["x"] = w
    assert t.steps["tokens"].tolist() == ["my", "shoes", "are", "small"]
    assert t.steps["token_ids"].dtype == np.int64
    assert t.dims["layers.0.attn.weights"] == ("head", "query_pos", "key_pos")
    del t  # the arrays keep the trace alive
    assert float(w.sum()) == pytest.approx(8.0, abs=1e-5)


@pytest.mark.parametrize(
    "kwargs,args",
    [
        ({"heads": 3}, ["--heads", "3"]),
        ({"steps": "weigths"}, ["--steps", "weigths"]),
        ({"positions": "diagonal"}, ["--positions", "diagonal"]),
        ({"heads": "two"}, ["--heads", "two"]),
        ({"layer": 4}, ["--layer", "4"]),
        ({"model": "/nonexistent/model"}, ["--model", "/nonexistent/model"]),
        ({"explain": True}, ["--explain"]),
        ({"max_len": 3}, ["--max-len", "3"]),
    ],
)
def test_errors_carry_the_cli_message(cli, kwargs, args):
    with pytest.raises(attn_trace.Error) as e:
        attn_trace.trace(SHOES, **kwargs)
    code, out, err = cli(SHOES, *args)
    assert (code, out) == (2, b"")
    assert err == f"attn-trace: {e.value}\n"
    assert e.value.code == 2 and e.value.message == str(e.value)
    assert "\n" not in str(e.value)


def test_python_mistakes_are_type_errors():
    # ArgumentError: an Error (code 2) that is also a TypeError; an unknown keyword is the
    # command's unknown flag, word for word (python/tests/test_hostile.py has the rest).
    with pytest.raises(TypeError, match=r"^unexpected argument '--hedas' found tip: a similar argument exists: '--heads'"):
        attn_trace.trace(SHOES, hedas=2)
    with pytest.raises(TypeError, match="format"):
        attn_trace.trace(SHOES, format="table")
    with pytest.raises(TypeError, match="True or False"):
        attn_trace.trace(SHOES, causal="yes")
    with pytest.raises(attn_trace.ArgumentError) as e:
        attn_trace.trace(SHOES, heads=True)
    assert isinstance(e.value, TypeError) and isinstance(e.value, attn_trace.Error) and e.value.code == 2


def test_a_sentence_is_literal_text():
    t = attn_trace.trace("-", remove="")
    assert t.tokens == ["-"]
    assert attn_trace.trace("--heads", remove="").tokens == ["--heads"]


class ArrayLike:
    """Anything with __array__ (a torch tensor, a jax array) is a weight."""

    def __init__(self, a):
        self.a = a

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self.a, dtype=dtype)


def test_weights_dict_equals_the_weights_file(cli, tmp_path):
    w = tmp_path / "w.safetensors"
    code, _, err = cli(SHOES, "--heads", "2", "--layers", "2", "--save-weights", w, "--format", "json")
    assert code == 0, err
    named = read_safetensors(w)
    assert "embed.token.weight" in named and "layers.1.attn.q_proj.weight" in named
    code, out, err = cli(SHOES, "--weights", w, "--format", "json")
    assert code == 0, err
    # float64 and __array__ objects are taken as float32, as a file's f64 would be.
    given = {k: (ArrayLike(v) if i % 2 else v.astype(np.float64)) for i, (k, v) in enumerate(named.items())}
    # A dict carries no settings (a file's metadata does): the head count is given as a flag.
    t = attn_trace.trace(SHOES, weights=given, heads=2)
    want = doc_steps(out)
    assert list(t.steps) == list(want)
    for sid, step in want.items():
        if t.steps[sid].dtype == np.float32:
            assert np.array_equal(t.steps[sid], values(step).astype(np.float32)), sid
    assert t.config["init"] == {"kind": "given"}
    assert json.loads(out)["config"]["layers"] == t.config["layers"] == 2
    # The file's path works too, and is the command's --weights.
    assert attn_trace.trace(SHOES, weights=w).to_json().encode() == out


def test_a_bad_weights_dict_is_an_error(tmp_path):
    with pytest.raises(attn_trace.Error, match=r"^weights: no layers\.0\.\* tensors") as e:
        attn_trace.trace(SHOES, weights={"embed.token.weight": np.zeros((6, 4)), "embed.position.weight": np.zeros((10, 4))})
    assert e.value.code == 2
    named = read_safetensors(_weights(tmp_path))
    named["layers.0.attn.q_proj.weight"] = np.zeros((3, 4))
    with pytest.raises(attn_trace.Error, match=r"^weights: tensor layers\.0\.attn\.k_proj\.weight has shape \[4, 4\] but the model needs \[3, 4\]"):
        attn_trace.trace(SHOES, weights=named)
    with pytest.raises(attn_trace.Error, match="no tensors"):
        attn_trace.trace(SHOES, weights={})
    with pytest.raises(attn_trace.Error, match="--weights"):
        attn_trace.trace(SHOES, model=MINILM, weights={"embed.token.weight": np.zeros((2, 2))})


def test_hostile_weights_dicts_are_clean_errors(tmp_path):
    """Issue 27: NaN is accepted with a note (as the command does); wrong dtypes, ragged or
    empty arrays and wrong shapes are one-line errors naming the tensor, never a panic."""
    named = read_safetensors(_weights(tmp_path))
    nan = dict(named)
    nan["layers.0.attn.q_proj.weight"] = np.full((4, 4), np.nan)
    with pytest.warns(UserWarning, match="NaN"):
        attn_trace.trace(SHOES, weights=nan)
    for value, message in [
        (np.array([["a", "b"], ["c", "d"]]), r"tensor layers\.0\.attn\.q_proj\.weight holds <U1; expected real numbers"),
        (np.ones((4, 4), dtype=np.complex64), r"holds complex64; expected real numbers"),
        (np.array([None, 1.0]), r"holds object; expected real numbers"),
        (np.array([True, False]), r"holds bool; expected real numbers"),
        ([[1.0, 2.0], [3.0]], r"tensor layers\.0\.attn\.q_proj\.weight is not an array of numbers"),
        (np.zeros((0, 4)), r"^weights: "),
        (np.zeros((4, 4, 4)), r"^weights: "),
        (np.float32(1.0), r"^weights: "),
    ]:
        bad = dict(named)
        bad["layers.0.attn.q_proj.weight"] = value
        with pytest.raises(attn_trace.Error, match=message) as e:
            attn_trace.trace(SHOES, weights=bad)
        assert e.value.code == 2 and "\n" not in str(e.value) and "panicked" not in str(e.value)


def test_hostile_model_files_are_clean_errors(tmp_path):
    """Issue 27 through the API: the hostile GGUF and pickle seeds of the fuzz targets are
    attn_trace.Error with the command's message (a panic would be a PanicException)."""
    import shutil
    seeds = ROOT / "tests/fuzz/seeds"
    for name, message in [
        ("alignment_0.gguf", r"general\.alignment is 0; expected a power of two"),
        ("block_count_2p40.gguf", r"llama\.block_count is 1099511627776 but the file holds blocks"),
        ("duplicate_tensor.gguf", r"tensor \"blk\.0\.attn_q\.weight\" appears twice"),
    ]:
        with pytest.raises(attn_trace.Error, match=message) as e:
            attn_trace.trace(SHOES, model=str(seeds / "gguf" / name))
        assert e.value.code == 2
    for name, message in [("string_4gib.bin", "a string of 4294967295 bytes"), ("memo_bomb.bin", "no dictionary")]:
        folder = tmp_path / name
        shutil.copytree(ROOT / "fixtures/decoders/llama-bin", folder)
        shutil.copy(seeds / "pickle" / name, folder / "pytorch_model.bin")
        with pytest.raises(attn_trace.Error, match=message) as e:
            attn_trace.trace("The capital of France is", model=str(folder))
        assert e.value.code == 2


def test_diff_reports_as_the_cli(cli, tmp_path):
    a = attn_trace.trace(SHOES, heads=2)
    same = attn_trace.diff(a, attn_trace.trace(SHOES, heads=2))
    assert same["within_tolerance"] and same["diverged"] == 0 and same["compared"] == len(a.steps)
    a.save(tmp_path / "a.npz")
    b = attn_trace.trace(SHOES, heads=2, seed=124)
    b.save(tmp_path / "b.json")
    rep = attn_trace.diff(tmp_path / "a.npz", b, atol=1e-6)
    assert not rep["within_tolerance"] and rep["first_divergence"]["id"] == "embed.token"
    code, out, _ = cli("diff", tmp_path / "a.npz", tmp_path / "b.json", "--atol", "1e-6", "--format", "json")
    assert code == 1
    cli_rep = json.loads(out)
    assert {k: v for k, v in rep.items() if k != "b"} == {k: v for k, v in cli_rep.items() if k != "b"}
    with pytest.raises(attn_trace.Error, match=r"^--atol: -1 is not a finite"):
        attn_trace.diff(a, b, atol=-1)
    with pytest.raises(attn_trace.Error, match="nonexistent"):
        attn_trace.diff(a, tmp_path / "nonexistent.json")


def test_save_writes_what_the_cli_writes(cli, tmp_path):
    t = attn_trace.trace(SHOES, heads=2, causal=True)
    for ext in ("json", "npz", "safetensors", "html"):
        t.save(tmp_path / f"t.{ext}")
    code, out, err = cli(SHOES, "--heads", "2", "--causal", "--format", "json", "--html", tmp_path / "cli.html",
                         "--save-trace", tmp_path / "cli.npz")
    assert code == 0, err
    assert (tmp_path / "t.json").read_bytes() == out
    assert (tmp_path / "t.html").read_bytes() == (tmp_path / "cli.html").read_bytes()
    assert (tmp_path / "t.npz").read_bytes() == (tmp_path / "cli.npz").read_bytes()
    npz = np.load(tmp_path / "t.npz")
    assert np.array_equal(npz["layers.0.attn.weights"], t.steps["layers.0.attn.weights"])
    with pytest.raises(attn_trace.Error, match=r"^save .*t\.xml: .*\.npz\)$"):
        t.save(tmp_path / "t.xml")
    assert not (tmp_path / "t.xml").exists()
    assert sorted(os.listdir(tmp_path)) == sorted(["t.json", "t.npz", "t.safetensors", "t.html", "cli.html", "cli.npz"])


def test_save_never_replaces_a_device_or_a_symlink(tmp_path):
    # Issue 27: a device is written in place, a symlink followed (it stays a link), a loop or a
    # directory refused; the same rules as the command's files (src/output/file.rs).
    t = attn_trace.trace(SHOES, heads=2)
    null, full = os.stat("/dev/null"), os.stat("/dev/full")
    # save takes its format from the extension, so the devices are reached through links.
    os.symlink("/dev/null", tmp_path / "null.json")
    os.symlink("/dev/full", tmp_path / "full.html")
    t.save(tmp_path / "null.json")
    with pytest.raises(attn_trace.Error, match="No space left on device"):
        t.save(tmp_path / "full.html")
    (tmp_path / "target.json").write_text("old")
    os.symlink("target.json", tmp_path / "link.json")
    t.save(tmp_path / "link.json")
    assert os.path.islink(tmp_path / "link.json")
    assert json.loads((tmp_path / "target.json").read_text())["steps"]
    os.symlink("b.json", tmp_path / "a.json")
    os.symlink("a.json", tmp_path / "b.json")
    with pytest.raises(attn_trace.Error, match="loops"):
        t.save(tmp_path / "a.json")
    os.mkdir(tmp_path / "d.json")
    with pytest.raises(attn_trace.Error, match="directory"):
        t.save(tmp_path / "d.json")
    assert (os.stat("/dev/null").st_rdev, os.stat("/dev/full").st_rdev) == (null.st_rdev, full.st_rdev)
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]


def test_files_the_options_name_are_written(tmp_path):
    attn_trace.trace(SHOES, save_trace=tmp_path / "s.safetensors", html=tmp_path / "p.html")
    assert read_safetensors(tmp_path / "s.safetensors")["layers.0.attn.weights"].shape == (1, 8, 8)
    assert (tmp_path / "p.html").read_text().startswith("<!DOCTYPE html>")


def test_the_notebook_view_is_the_html_page_in_its_own_frame(cli, tmp_path):
    # --steps hides the weights from the steps, not from the page (as with --html).
    t = attn_trace.trace(SHOES, heads=2, steps="embed")
    assert list(t.steps) == ["embed.token", "embed.position", "embed.sum", "embed.out"]
    code, _, err = cli(SHOES, "--heads", "2", "--steps", "embed", "--html", tmp_path / "p.html")
    assert code == 0, err
    page = (tmp_path / "p.html").read_text()
    assert t.html() == page
    one, two = t._repr_html_(), attn_trace.trace("my feet are big")._repr_html_()
    import html

    for frame in (one, two):
        assert frame.startswith("<iframe") and frame.endswith("</iframe>")
        assert 'id="layer"' not in frame  # the page's ids are inside the frame's document only
    assert html.escape(page, quote=True) in one
    ids = [f.split('id="', 1)[1].split('"', 1)[0] for f in (one, two)]
    assert ids[0] != ids[1]


def test_heatmap_is_a_matplotlib_figure():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    t = attn_trace.trace("my shoes are small", heads=2, head=1)
    fig = t.heatmap(0, 1)
    ax = fig.axes[0]
    shown = ax.images[0].get_array()
    assert np.array_equal(np.asarray(shown), t.steps["layers.0.attn.weights"][0])
    assert [x.get_text() for x in ax.get_xticklabels()] == t.tokens
    with pytest.raises(attn_trace.Error, match="head 0 is not in the trace"):
        t.heatmap(0, 0)
    with pytest.raises(attn_trace.Error, match="no step layers.3.attn.weights"):
        t.heatmap(3, 0)


def test_notes_are_warnings(tmp_path):
    named = {"embed.token.weight": np.full((6, 4), np.nan, dtype=np.float32)}
    named.update({k: v for k, v in read_safetensors(_weights(tmp_path)).items() if k != "embed.token.weight"})
    with pytest.warns(UserWarning, match="NaN or infinite values in embed.token.weight"):
        t = attn_trace.trace(SHOES, weights=named)
    assert t.notes and "embed.token.weight" in t.notes[0]


def _weights(tmp_path: Path) -> Path:
    w = tmp_path / "w.safetensors"
    attn_trace.trace(SHOES, save_weights=w)
    return w


def test_schema_is_the_commands(cli):
    code, out, _ = cli("schema")
    assert code == 0 and attn_trace.schema() == json.loads(out)
