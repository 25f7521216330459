"""attn-trace from Python: trace a transformer step by step, every intermediate tensor named.

    >>> import attn_trace
    >>> t = attn_trace.trace("my shoes are small", heads=2)
    >>> t.steps["layers.0.attn.weights"].shape
    (2, 4, 4)

``trace`` takes the command's options as keyword arguments (``--d-model 8`` is ``d_model=8``,
``--causal`` is ``causal=True``, ``--steps weights,context`` is ``steps=["weights",
"context"]``) and runs the same Rust library as the ``attn-trace`` command, in this process:
the same checks, the same numbers, the same one-line messages (raised as ``Error``).
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Optional

import numpy as np

from . import _args, _native
from ._errors import ArgumentError, Error

__all__ = ["Error", "ArgumentError", "Trace", "Generation", "trace", "generate", "diff", "compare", "schema",
           "__version__"]
__version__ = _native.__version__

# Keywords that are flags of the command but not options here: the API returns the trace
# instead of printing it, and traces one sentence per call.
_NOT_HERE = {
    "format": "use .to_json(), .save(path) or the attn-trace command for tables",
    "completions": "run attn-trace --completions SHELL",
    "man": "run attn-trace --man",
    "help": "see help(attn_trace.trace), or attn-trace --help for the options",
    "version": "see attn_trace.__version__",
    "batch": "call attn_trace.trace once per sentence",
}

_OPTIONS: Optional[dict] = None


def _options() -> dict:
    global _OPTIONS
    if _OPTIONS is None:
        _OPTIONS = dict(_native.options())
    return _OPTIONS


def _argv(sentence: Any, pair: Any, model: Any, options: dict) -> list:
    """The command line that the keyword arguments stand for."""
    argv = ["attn-trace", "--format=json"]
    if model is not None:
        argv.append("--model=" + _args.path("--model", model, "pass a model folder, a .gguf file or ollama:NAME"))
    argv += _args.command_line(options, _options(), _NOT_HERE, "attn-trace")
    if sentence is not None or pair is not None:
        if sentence is None:
            raise Error("pair: it is the second sentence of a pair (pass a sentence too)", 2)
        argv += ["--", _args.words("sentence", sentence, "pass the sentence as a str")]
        if pair is not None:
            argv.append(_args.words("pair", pair, "pass the second sentence as a str"))
    return argv


def _given(weights: Mapping) -> list:
    """A dict of arrays (numpy, torch, anything with __array__) as float32 C-order arrays.
    Arrays of anything but real numbers (strings, objects, complex numbers, ragged lists) are
    refused as ``Error``, naming the tensor, rather than converted or raised as numpy's own
    exception."""
    out = []
    for name, value in weights.items():
        name = _args.words("weights", name, "name each tensor with a str, e.g. 'layers.0.attn.q_proj.weight'")
        if hasattr(value, "detach"):  # a torch tensor that may require grad or live on a GPU
            value = value.detach().cpu()
        try:
            a = np.asarray(value)
        except Exception as e:  # whatever an object's __array__ raises: the tensor is named
            said = " ".join(str(e).split())  # one line, whatever the object raised
            raise Error(f"weights: tensor {name} is not an array of numbers ({said}) (pass arrays of floats)", 2) from None
        if a.dtype.kind not in "fiu":
            raise Error(f"weights: tensor {name} holds {a.dtype}; expected real numbers (pass arrays of floats)", 2)
        out.append((name, np.ascontiguousarray(a, dtype=np.float32)))
    return out


class Trace:
    """One traced run: ``tokens`` (``texts`` and ``labels`` as text), ``predictions``,
    ``config`` (the JSON document's config), ``steps`` (step id to a numpy array in the
    step's shape, read-only views of the trace), ``to_json()``,
    ``save(path)``, and in notebooks the ``--html`` page inline (``_repr_html_``) and
    ``heatmap(layer, head)``."""

    def __init__(self, native: Any):
        self._native = native
        self._steps: Optional[Mapping] = None
        self._config: Optional[dict] = None
        self._predictions: Optional[list] = None

    @property
    def tokens(self) -> list:
        return self._native.tokens

    @property
    def texts(self) -> Optional[list]:
        """What each token spells as text (``' café'``, ``'巴黎'``; ``'<0xE5>'`` for a byte
        that is only part of a character), as JSON's ``input.texts``; None for a vocabulary
        without a byte form (WordPiece, the toy vocabularies)."""
        return self._native.texts

    @property
    def labels(self) -> list:
        """Each position's label as tables, heatmaps and the page show it: the text, a space
        as ``·`` and a newline as ``↵`` (``'·café'``), or the token as spelled without texts."""
        return self._native.labels

    @property
    def predictions(self) -> Optional[list]:
        """A language model's next-token predictions, as JSON's ``predictions``: per position
        ``{"pos", "token", "text", "top": [{"id", "token", "text", "prob"}, …]}`` (``text``
        only with ``texts``); None without a language-model head."""
        if self._predictions is None:
            raw = self._native.predictions_json()
            self._predictions = [] if raw is None else json.loads(raw)
        return self._predictions or None

    @property
    def token_ids(self) -> Optional[list]:
        return self._native.token_ids

    @property
    def notes(self) -> list:
        """What the command would print as notes on stderr."""
        return self._native.notes

    @property
    def config(self) -> dict:
        if self._config is None:
            self._config = json.loads(self._native.config_json())
        return self._config

    @property
    def steps(self) -> Mapping:
        if self._steps is None:
            steps = {}
            for sid, value in self._native.step_values():
                if isinstance(value, tuple):  # strings: (shape, list)
                    shape, items = value
                    value = np.array(items, dtype=object).reshape(shape)
                steps[sid] = value
            self._steps = MappingProxyType(steps)
        return self._steps

    @property
    def dims(self) -> Mapping:
        """Step id to its dimension names, e.g. ("head", "query_pos", "key_pos")."""
        return MappingProxyType({i[0]: tuple(i[3]) for i in self._native.step_info()})

    def heads(self, step: str) -> list:
        """Which heads a per-head step holds (all of them unless ``head=`` narrowed it)."""
        for sid, _, _, dims, heads in self._native.step_info():
            if sid == step:
                if heads is not None:
                    return list(heads)
                return list(range(self.steps[sid].shape[0])) if dims and dims[0] == "head" else []
        raise KeyError(step)

    def to_json(self) -> str:
        """The JSON document, byte for byte what ``attn-trace … --format json`` prints."""
        return self._native.to_json()

    def save(self, path: "str | os.PathLike") -> None:
        """Writes the trace in the format the extension names: .json, .html, .safetensors,
        .npz (written whole or not at all)."""
        self._native.save(_args.path("save", path, "pass the file's path as a str or os.PathLike"))

    def html(self) -> Optional[str]:
        """The ``--html`` page (a whole document), or None without attention weights."""
        return self._native.html()

    def _repr_html_(self) -> Optional[str]:
        from ._notebook import inline

        page = self._native.html()
        return None if page is None else inline(page)

    def heatmap(self, layer: int = 0, head: int = 0):
        """One head's attention weights as a matplotlib figure (needs matplotlib)."""
        from ._notebook import heatmap

        return heatmap(self, layer, head)

    def __repr__(self) -> str:
        c = self.config
        return (
            f"<attn_trace.Trace: {len(self.tokens)} tokens, {c.get('layers')} layers, "
            f"{c.get('heads')} heads, {len(self._native.step_info())} steps>"
        )


def trace(sentence: Optional[str] = None, model: Any = None, *, pair: Optional[str] = None,
          weights: Any = None, **options: Any) -> Trace:
    """Traces ``sentence`` (with ``model``, a Hugging Face folder, a GGUF file or
    ``ollama:NAME``; the toy model of the flags without). Options are the command's flags as
    keyword arguments. ``weights`` is a weights file's path or a dict of arrays named as in
    weight files (``embed.token.weight``, ``layers.0.attn.q_proj.weight``, …). Raises ``Error``
    with the command's message for anything the command refuses."""
    given = None
    if isinstance(weights, Mapping):
        given = _given(weights)
        # The command line says --weights, so every check of the flag applies; the arrays
        # replace the file.
        weights = "(weights dict)"
    argv = _argv(sentence, pair, model, options)
    if weights is not None:
        argv[2:2] = _args.command_line({"weights": weights}, _options(), {}, "attn-trace")
    t = Trace(_native.trace(argv, given))
    if not options.get("quiet"):
        for note in t.notes:
            warnings.warn(f"attn-trace: {note}", stacklevel=2)
    return t


class Generation:
    """A traced generation (``generate``): ``text`` (the generated text), ``token_ids`` (the
    generated ids), ``tokens`` (each generated token as JSON's ``generation.tokens``: its
    ``position``, ``id``, ``token``, ``text``, ``prob``, ``candidates`` and ``sources``),
    ``stop`` (``"length"``, ``"eos"`` or ``"positions"``), ``baseline`` (with
    ``baseline=True``), ``steps`` (decode step t at index t − 1: a dict of step id, e.g.
    ``"gen.1.layers.0.attn.weights"``, to a numpy array), ``trace`` (the prompt's trace,
    step 0), ``to_json()`` and, in notebooks, the ``--html`` page inline."""

    def __init__(self, trace: Trace):
        self.trace = trace
        raw = trace._native.generation_json()
        self._record = json.loads(raw) if raw is not None else {}
        self._steps: Optional[list] = None

    @property
    def text(self) -> str:
        return self._record["text"]

    @property
    def tokens(self) -> list:
        return self._record["tokens"]

    @property
    def token_ids(self) -> list:
        return [t["id"] for t in self._record["tokens"]]

    @property
    def stop(self) -> str:
        return self._record["stop"]

    @property
    def baseline(self) -> Optional[dict]:
        return self._record.get("baseline")

    @property
    def steps(self) -> list:
        if self._steps is None:
            self._steps = [MappingProxyType(dict(values)) for _, _, values in self.trace._native.generation_step_values()]
        return self._steps

    def to_json(self) -> str:
        """The JSON document, byte for byte what ``attn-trace … --generate N --format json`` prints."""
        return self.trace.to_json()

    def _repr_html_(self) -> Optional[str]:
        return self.trace._repr_html_()

    def __repr__(self) -> str:
        return f"<attn_trace.Generation: {len(self.tokens)} tokens ({self.stop}): {self.text!r}>"


def generate(prompt: str, model: Any = None, max_new_tokens: int = 20, **options: Any) -> Generation:
    """Generates up to ``max_new_tokens`` after ``prompt`` with a key/value cache, tracing every
    decode step (``attn-trace PROMPT --generate N``). Options are the command's flags as keyword
    arguments: ``sample=True, temperature=0.7, top_p=0.9, sample_seed=1``, ``ablate="3.1"``,
    ``baseline=True``, ``steps=["weights"]``, ``chat=True``, … Raises ``Error`` with the
    command's message for anything the command refuses."""
    if "generate" in options:
        raise ArgumentError("generate=: not an option here (pass max_new_tokens=)", 2)
    if max_new_tokens is None:
        raise ArgumentError("--generate: None is not a number of tokens (pass max_new_tokens=N, e.g. 20)", 2)
    return Generation(trace(prompt, model, generate=max_new_tokens, **options))


def diff(a: Any, b: Any, atol: float = 1e-5, rtol: float = 1e-5) -> dict:
    """Compares two traces (each a Trace or a trace file's path) step by step: the report of
    ``attn-trace diff A B --format json`` as a dict; ``report["within_tolerance"]`` is the verdict."""
    hint = "pass a Trace, or a trace file's path as a str or os.PathLike"
    sides = [t._native if isinstance(t, Trace) else _args.path(f"diff: {n}", t, hint) for n, t in (("a", a), ("b", b))]
    # --atol and --rtol as the command reads them (its parser, its messages); None is the default.
    flags = _args.command_line({"atol": atol, "rtol": rtol}, {"atol": "value", "rtol": "value"}, {}, "attn-trace diff")
    text, _ok = _native.diff(sides[0], sides[1], flags)
    return json.loads(text)


_COMPARE_OPTIONS: Optional[dict] = None


def _compare_argv(prompt: Any, model_a: Any, model_b: Any, options: dict) -> list:
    """The `attn-trace compare` command line that the keyword arguments stand for."""
    global _COMPARE_OPTIONS
    if _COMPARE_OPTIONS is None:
        # The main command's flags that compare hides are spelled as the main command's, so
        # compare refuses them with its own message ("--knockout: it does not apply to compare").
        _COMPARE_OPTIONS = {**_options(), **dict(_native.compare_options())}
    argv = ["attn-trace compare", "--format=json", "--quiet"]
    hint = "pass a model folder, a .gguf file, ollama:NAME, a toy weights file or 'toy'"
    for name, m in (("model_a", model_a), ("model_b", model_b)):
        if m is not None:
            argv.append("--model=" + _args.path(f"--model ({name})", m, hint))
    refused = {"model": "pass the models as model_a and model_b", "format": "the report is returned as a dict",
               "help": _NOT_HERE["help"], "version": _NOT_HERE["version"]}
    argv += _args.command_line(options, _COMPARE_OPTIONS, refused, "attn-trace compare")
    if prompt is not None:
        argv += ["--", _args.words("prompt", prompt, "pass the prompt as a str")]
    return argv


def _columns(rows: list, columns: dict) -> dict:
    """Report rows as a dict of numpy arrays, one per column: `columns` maps a name to
    (function of a row, dtype)."""
    return {name: np.array([f(r) for r in rows], dtype=dtype) for name, (f, dtype) in columns.items()}


def _number(v: Any) -> float:
    """A report number ("inf" and "nan" are strings in JSON; null is nan)."""
    if v is None:
        return float("nan")
    return float(v)


def compare(prompt: str, model_a: Any, model_b: Any, **options: Any) -> dict:
    """Traces ``prompt`` through two models in lockstep (``attn-trace compare``): ``model_a`` is
    under test, ``model_b`` the reference; each a Hugging Face folder, a GGUF file,
    ``ollama:NAME``, a toy weights file or ``"toy"``. Options are the command's flags as
    keyword arguments (``threshold=1e-3``, ``ids_from="a"``, ``no_special_tokens=True``, the
    toy model's flags). Returns the report as a dict: ``within_threshold``,
    ``first_divergence``, and the ranked tables as dicts of numpy arrays: ``steps`` (``id``,
    ``layer`` (-1 outside the layers), ``relative_error``, ``max_abs_error``, ``diverges``),
    ``heads`` (``layer``, ``head``, ``js_mean``, ``js_max``, ``js_max_query``), ``layers`` (the
    residual stream: ``layer`` (-1 for the embeddings), ``relative_error``) and
    ``predictions`` (``pos``, ``a_top1``, ``b_top1``, ``agree``, ``kl``; None without a
    language-model head); ``report`` is the whole JSON report. Raises ``Error`` with the
    command's message for anything it refuses (different architectures, vocabularies or
    tokenizations)."""
    quiet = _args.flag("--quiet", "quiet", options.pop("quiet", False))
    text, _ok = _native.compare(_compare_argv(prompt, model_a, model_b, options))
    report = json.loads(text)
    if not quiet:
        for note in report["notes"]:
            warnings.warn(f"attn-trace: {note}", stacklevel=2)
    layer = lambda r: -1 if r["layer"] is None else r["layer"]  # noqa: E731
    out = {k: report[k] for k in ("within_threshold", "first_divergence", "threshold", "tokens", "token_ids",
                                   "only_in_a", "only_in_b", "notes")}
    out["steps"] = _columns(report["steps"], {
        "id": (lambda r: r["id"], str), "layer": (layer, np.int64),
        "relative_error": (lambda r: _number(r["relative_error"]), np.float64),
        "max_abs_error": (lambda r: _number(r.get("max_abs_error")), np.float64),
        "diverges": (lambda r: r["diverges"], bool),
    })
    out["heads"] = _columns(report["heads"], {
        "layer": (lambda r: r["layer"], np.int64), "head": (lambda r: r["head"], np.int64),
        "js_mean": (lambda r: _number(r["js_mean"]), np.float64), "js_max": (lambda r: _number(r["js_max"]), np.float64),
        "js_max_query": (lambda r: r["js_max_query"], np.int64),
    })
    out["layers"] = _columns(report["layers"], {
        "layer": (layer, np.int64), "relative_error": (lambda r: _number(r["relative_error"]), np.float64),
        "max_abs_error": (lambda r: _number(r["max_abs_error"]), np.float64),
    })
    p = report["predictions"]
    out["predictions"] = None if p is None else _columns(p["rows"], {
        "pos": (lambda r: r["pos"], np.int64),
        "a_top1": (lambda r: r["a"][0]["id"] if r["a"] else -1, np.int64),
        "b_top1": (lambda r: r["b"][0]["id"] if r["b"] else -1, np.int64),
        "agree": (lambda r: r["agree"], bool), "kl": (lambda r: _number(r["kl"]), np.float64),
    })
    out["report"] = report
    return out


def schema() -> dict:
    """The JSON Schema of the trace document (``attn-trace schema``)."""
    return json.loads(_native.schema())
