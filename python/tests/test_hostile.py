"""Hostile arguments to the Python API (issue 48, class 7): every public function's keywords
given the wrong type, huge numbers, NaN and infinities, bytes, file objects, arrays, empty and
undecodable text, directories and devices, unknown keywords. Each is `attn_trace.Error` with
the command's exit code; where a command line can say the same thing (`heads=2.5` is
`--heads=2.5`), the message is the command's stderr line word for word, and no file is left
behind by either. A value no command line can hold (`heads=True`, `sentence=b"…"`, a file
object) is `attn_trace.ArgumentError`, an Error that is also a TypeError. Then what a call
must survive: Ctrl-C during a long run, several threads at once, a forked child, arrays that
outlive their trace, and a reloaded module."""

import gc
import importlib
import io
import json
import math
import multiprocessing
import os
import pickle
import signal
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import attn_trace
from conftest import BIN, ROOT, SHOES

LLAMA = str(ROOT / "fixtures" / "decoders" / "llama-gqa")
PROMPT = "The capital of France is"
BIG = 10**30
NAN, INF = float("nan"), float("inf")
CLOSED = io.StringIO()
CLOSED.close()
OPEN = io.BytesIO(b"0:small->shoes")


class ArrayLike:
    """A torch or jax tensor, as far as the API can tell: something with __array__."""

    def __array__(self, dtype=None, copy=None):
        return np.zeros(2, dtype=dtype)


def _call(fn, args, kwargs):
    return getattr(attn_trace, fn)(*args, **kwargs)


def _subst(v, tmp):
    """`{tmp}` in any str or bytes of a case, as the test's folder."""
    if isinstance(v, str):
        return v.replace("{tmp}", str(tmp))
    if isinstance(v, bytes):
        return v.replace(b"{tmp}", os.fsencode(str(tmp)))
    if isinstance(v, (list, tuple)):
        return type(v)(_subst(x, tmp) for x in v)
    if isinstance(v, dict):
        return {k: _subst(x, tmp) for k, x in v.items()}
    return v


@pytest.fixture
def folder(tmp_path):
    """A folder with what the cases name: a trace file, a directory with a trace file's name."""
    attn_trace.trace(SHOES).save(tmp_path / "a.json")
    (tmp_path / "d.npz").mkdir()
    (tmp_path / "d.html").mkdir()
    return tmp_path


def _listing(path):
    return sorted(os.listdir(path))


# (id, function, args, kwargs, the command line that says the same): the API's message is the
# command's stderr line without "attn-trace: ", its code the command's exit code.
SAME = [
    # Numbers as the command line spells them: Python's repr, which Rust reads back.
    ("heads=2.5", "trace", (SHOES,), {"heads": 2.5}, [SHOES, "--heads=2.5"]),
    ("heads=2.0", "trace", (SHOES,), {"heads": 2.0}, [SHOES, "--heads=2.0"]),
    ("heads=10**30", "trace", (SHOES,), {"heads": BIG}, [SHOES, f"--heads={BIG}"]),
    ("heads=2**64", "trace", (SHOES,), {"heads": 2**64}, [SHOES, f"--heads={2**64}"]),
    ("heads=-1", "trace", (SHOES,), {"heads": -1}, [SHOES, "--heads=-1"]),
    ("heads=nan", "trace", (SHOES,), {"heads": NAN}, [SHOES, "--heads=nan"]),
    ("heads=inf", "trace", (SHOES,), {"heads": INF}, [SHOES, "--heads=inf"]),
    ("heads=''", "trace", (SHOES,), {"heads": ""}, [SHOES, "--heads="]),
    ("heads=[]", "trace", (SHOES,), {"heads": []}, [SHOES, "--heads="]),
    ("heads=[2,3]", "trace", (SHOES,), {"heads": [2, 3]}, [SHOES, "--heads=2,3"]),
    ("heads=np.float32", "trace", (SHOES,), {"heads": np.float32(1.5)}, [SHOES, "--heads=1.5"]),
    ("heads=3", "trace", (SHOES,), {"heads": 3}, [SHOES, "--heads=3"]),
    ("layers=0", "trace", (SHOES,), {"layers": 0}, [SHOES, "--layers=0"]),
    ("layers=2**64", "trace", (SHOES,), {"layers": 2**64}, [SHOES, f"--layers={2**64}"]),
    ("d_model=-1", "trace", (SHOES,), {"d_model": -1}, [SHOES, "--d-model=-1"]),
    ("scale=nan", "trace", (SHOES,), {"scale": NAN}, [SHOES, "--scale=nan"]),
    ("scale=-inf", "trace", (SHOES,), {"scale": -INF}, [SHOES, "--scale=-inf"]),
    ("scale=10**400", "trace", (SHOES,), {"scale": 10**400}, [SHOES, f"--scale={10**400}"]),
    ("eps=nan", "trace", (SHOES,), {"eps": NAN}, [SHOES, "--eps=nan"]),
    ("seed=2**64", "trace", (SHOES,), {"seed": 2**64}, [SHOES, f"--seed={2**64}"]),
    ("seed=-2**64", "trace", (SHOES,), {"seed": -(2**64)}, [SHOES, f"--seed={-(2**64)}"]),
    ("max_len=0", "trace", (SHOES,), {"max_len": 0}, [SHOES, "--max-len=0"]),
    ("layer=10**30", "trace", (SHOES,), {"layer": BIG}, [SHOES, f"--layer={BIG}"]),
    ("head=-1", "trace", (SHOES,), {"head": -1}, [SHOES, "--head=-1"]),
    ("query_tile=0", "trace", (SHOES,), {"query_tile": 0}, [SHOES, "--query-tile=0"]),
    ("max_memory=-1", "trace", (SHOES,), {"max_memory": -1}, [SHOES, "--max-memory=-1"]),
    ("max_memory=nan", "trace", (SHOES,), {"max_memory": NAN}, [SHOES, "--max-memory=nan"]),
    ("check_tol=nan", "trace", (SHOES,), {"check": True, "check_tol": NAN}, [SHOES, "--check", "--check-tol=nan"]),
    ("alpha=inf", "trace", (SHOES,), {"alpha": INF}, [SHOES, "--alpha=inf"]),
    # Text and lists.
    ("steps=[]", "trace", (SHOES,), {"steps": []}, [SHOES, "--steps="]),
    ("steps=[1]", "trace", (SHOES,), {"steps": [1]}, [SHOES, "--steps=1"]),
    ("steps=[nul]", "trace", (SHOES,), {"steps": ["weights\0"]}, None),
    ("positions=diagonal", "trace", (SHOES,), {"positions": "diagonal"}, [SHOES, "--positions=diagonal"]),
    ("knockout=5", "trace", (SHOES,), {"knockout": 5}, [SHOES, "--knockout=5"]),
    ("knockout=''", "trace", (SHOES,), {"knockout": ""}, [SHOES, "--knockout="]),
    ("knockout=[1.5]", "trace", (SHOES,), {"knockout": [1.5]}, [SHOES, "--knockout=1.5"]),
    ("metric=(1,2)", "trace", (SHOES,), {"metric": (1, 2)}, [SHOES, "--metric", "1", "2"]),
    ("chat (toy)", "trace", (SHOES,), {"chat": True}, [SHOES, "--chat"]),
    ("system without chat", "trace", (SHOES,), {"system": "Be brief."}, [SHOES, "--system=Be brief."]),
    ("sentence=''", "trace", ("",), {}, [""]),
    ("sentence=spaces", "trace", ("   ",), {}, ["   "]),
    ("sentence=None", "trace", (None,), {}, []),
    ("sentence=undecodable", "trace", ("my \udcff shoes",), {}, [b"my \xff shoes"]),
    ("system=undecodable", "trace", (SHOES,), {"system": "\udcff"}, [SHOES, b"--system=\xff"]),
    # The sentence follows "--" (a sentence may start with "-"), so clap names the two in that order.
    ("file and sentence", "trace", (SHOES,), {"file": "{tmp}/a.json"}, ["--file={tmp}/a.json", "--", SHOES]),
    # Unknown keywords are unknown flags (ArgumentError: see UNKNOWN).
    # Paths that are directories, devices, empty or missing, and undecodable file names.
    ("model=''", "trace", (SHOES,), {"model": ""}, [SHOES, "--model="]),
    ("model=dir", "trace", (SHOES,), {"model": "{tmp}"}, [SHOES, "--model={tmp}"]),
    ("model=/dev/zero", "trace", (SHOES,), {"model": "/dev/zero"}, [SHOES, "--model=/dev/zero"]),
    ("model=/dev/null", "trace", (SHOES,), {"model": "/dev/null"}, [SHOES, "--model=/dev/null"]),
    ("model=missing", "trace", (SHOES,), {"model": "{tmp}/none"}, [SHOES, "--model={tmp}/none"]),
    ("model=undecodable", "trace", (SHOES,), {"model": "{tmp}/\udcff"}, [SHOES, b"--model={tmp}/\xff"]),
    ("model=nul", "trace", (SHOES,), {"model": "a\0b"}, None),
    ("weights=''", "trace", (SHOES,), {"weights": ""}, [SHOES, "--weights="]),
    ("weights=dir", "trace", (SHOES,), {"weights": "{tmp}"}, [SHOES, "--weights={tmp}"]),
    ("weights=/dev/null", "trace", (SHOES,), {"weights": "/dev/null"}, [SHOES, "--weights=/dev/null"]),
    ("weights=/dev/zero", "trace", (SHOES,), {"weights": "/dev/zero"}, [SHOES, "--weights=/dev/zero"]),
    ("weights=42", "trace", (SHOES,), {"weights": 42}, [SHOES, "--weights=42"]),
    ("weights=undecodable", "trace", (SHOES,), {"weights": "{tmp}/\udcff.safetensors"},
     [SHOES, b"--weights={tmp}/\xff.safetensors"]),
    ("weights=trace file", "trace", (SHOES,), {"weights": "{tmp}/a.json"}, [SHOES, "--weights={tmp}/a.json"]),
    ("save_trace=''", "trace", (SHOES,), {"save_trace": ""}, [SHOES, "--save-trace="]),
    ("save_trace=dir", "trace", (SHOES,), {"save_trace": "{tmp}/d.npz"}, [SHOES, "--save-trace={tmp}/d.npz"]),
    ("save_trace=.txt", "trace", (SHOES,), {"save_trace": "{tmp}/t.txt"}, [SHOES, "--save-trace={tmp}/t.txt"]),
    ("save_trace=no folder", "trace", (SHOES,), {"save_trace": "{tmp}/no/t.npz"},
     [SHOES, "--save-trace={tmp}/no/t.npz"]),
    ("html=dir", "trace", (SHOES,), {"html": "{tmp}/d.html"}, [SHOES, "--html={tmp}/d.html"]),
    ("html=/dev/full", "trace", (SHOES,), {"html": "/dev/full"}, [SHOES, "--html=/dev/full"]),
    ("svg=dir", "trace", (SHOES,), {"svg": "{tmp}"}, [SHOES, "--svg={tmp}"]),
    ("save_weights=dir", "trace", (SHOES,), {"save_weights": "{tmp}"}, [SHOES, "--save-weights={tmp}"]),
    ("file=dir", "trace", (), {"file": "{tmp}"}, ["--file={tmp}"]),
    ("file=/dev/null", "trace", (), {"file": "/dev/null"}, ["--file=/dev/null"]),
    ("file=/dev/zero", "trace", (), {"file": "/dev/zero"}, ["--file=/dev/zero"]),
    ("file=undecodable", "trace", (), {"file": "{tmp}/\udcff"}, [b"--file={tmp}/\xff"]),
    ("vocab=dir", "trace", (SHOES,), {"vocab": "{tmp}"}, [SHOES, "--vocab={tmp}"]),
    ("vocab=/dev/null", "trace", (SHOES,), {"vocab": "/dev/null"}, [SHOES, "--vocab=/dev/null"]),
    ("vocab=/dev/zero", "trace", (SHOES,), {"vocab": "/dev/zero"}, [SHOES, "--vocab=/dev/zero"]),
    ("input=dir", "trace", (), {"input": "{tmp}"}, ["--input={tmp}"]),
    ("input=/dev/null", "trace", (), {"input": "/dev/null"}, ["--input=/dev/null"]),
    ("input=/dev/zero", "trace", (), {"input": "/dev/zero"}, ["--input=/dev/zero"]),
    ("steer=dir", "trace", (SHOES,), {"steer": "0:{tmp}"}, [SHOES, "--steer=0:{tmp}"]),
    # generate: max_new_tokens is --generate.
    ("max_new_tokens=0", "generate", (PROMPT, LLAMA), {"max_new_tokens": 0}, [PROMPT, "--model", LLAMA, "--generate=0"]),
    ("max_new_tokens=-1", "generate", (PROMPT, LLAMA), {"max_new_tokens": -1},
     [PROMPT, "--model", LLAMA, "--generate=-1"]),
    ("max_new_tokens=2**64", "generate", (PROMPT, LLAMA), {"max_new_tokens": 2**64},
     [PROMPT, "--model", LLAMA, f"--generate={2**64}"]),
    ("max_new_tokens=1.5", "generate", (PROMPT, LLAMA), {"max_new_tokens": 1.5},
     [PROMPT, "--model", LLAMA, "--generate=1.5"]),
    ("max_new_tokens=nan", "generate", (PROMPT, LLAMA), {"max_new_tokens": NAN},
     [PROMPT, "--model", LLAMA, "--generate=nan"]),
    ("max_new_tokens='x'", "generate", (PROMPT, LLAMA), {"max_new_tokens": "x"},
     [PROMPT, "--model", LLAMA, "--generate=x"]),
    ("generate (toy)", "generate", (PROMPT,), {"max_new_tokens": 3}, [PROMPT, "--generate=3"]),
    ("temperature=nan", "generate", (PROMPT, LLAMA), {"sample": True, "temperature": NAN},
     [PROMPT, "--model", LLAMA, "--generate=20", "--sample", "--temperature=nan"]),
    ("temperature=0", "generate", (PROMPT, LLAMA), {"sample": True, "temperature": 0},
     [PROMPT, "--model", LLAMA, "--generate=20", "--sample", "--temperature=0"]),
    ("temperature=-inf", "generate", (PROMPT, LLAMA), {"sample": True, "temperature": -INF},
     [PROMPT, "--model", LLAMA, "--generate=20", "--sample", "--temperature=-inf"]),
    ("top_p=inf", "generate", (PROMPT, LLAMA), {"sample": True, "top_p": INF},
     [PROMPT, "--model", LLAMA, "--generate=20", "--sample", "--top-p=inf"]),
    ("top_p=0", "generate", (PROMPT, LLAMA), {"sample": True, "top_p": 0},
     [PROMPT, "--model", LLAMA, "--generate=20", "--sample", "--top-p=0"]),
    ("sample_top_k=2**64", "generate", (PROMPT, LLAMA), {"sample": True, "sample_top_k": 2**64},
     [PROMPT, "--model", LLAMA, "--generate=20", "--sample", f"--sample-top-k={2**64}"]),
    ("sample_seed=-1", "generate", (PROMPT, LLAMA), {"sample": True, "sample_seed": -1},
     [PROMPT, "--model", LLAMA, "--generate=20", "--sample", "--sample-seed=-1"]),
    ("temperature without sample", "generate", (PROMPT, LLAMA), {"temperature": 0.5},
     [PROMPT, "--model", LLAMA, "--generate=20", "--temperature=0.5"]),
    ("prompt=''", "generate", ("", LLAMA), {}, ["", "--model", LLAMA, "--generate=20"]),
    # compare: the two models are --model twice.
    ("threshold=nan", "compare", (PROMPT, LLAMA, LLAMA), {"threshold": NAN},
     ["compare", PROMPT, "--model", LLAMA, "--model", LLAMA, "--threshold=nan"]),
    ("threshold=-1", "compare", (PROMPT, LLAMA, LLAMA), {"threshold": -1},
     ["compare", PROMPT, "--model", LLAMA, "--model", LLAMA, "--threshold=-1"]),
    ("threshold='x'", "compare", (PROMPT, LLAMA, LLAMA), {"threshold": "x"},
     ["compare", PROMPT, "--model", LLAMA, "--model", LLAMA, "--threshold=x"]),
    ("top=-1", "compare", (PROMPT, LLAMA, LLAMA), {"top": -1},
     ["compare", PROMPT, "--model", LLAMA, "--model", LLAMA, "--top=-1"]),
    ("ids_from='c'", "compare", (PROMPT, LLAMA, LLAMA), {"ids_from": "c"},
     ["compare", PROMPT, "--model", LLAMA, "--model", LLAMA, "--ids-from=c"]),
    ("compare generate=2**64", "compare", (PROMPT, LLAMA, LLAMA), {"generate": 2**64},
     ["compare", PROMPT, "--model", LLAMA, "--model", LLAMA, f"--generate={2**64}"]),
    ("compare prompt=None", "compare", (None, LLAMA, LLAMA), {}, ["compare", "--model", LLAMA, "--model", LLAMA]),
    ("compare prompt=''", "compare", ("", LLAMA, LLAMA), {}, ["compare", "", "--model", LLAMA, "--model", LLAMA]),
    ("compare model_b=None", "compare", (PROMPT, LLAMA, None), {}, ["compare", PROMPT, "--model", LLAMA]),
    ("compare model_a=''", "compare", (PROMPT, "", LLAMA), {}, ["compare", PROMPT, "--model=", "--model", LLAMA]),
    ("compare model_a=dir", "compare", (PROMPT, "{tmp}", LLAMA), {}, ["compare", PROMPT, "--model={tmp}", "--model", LLAMA]),
    ("compare model_a=zero.json", "compare", (PROMPT, "/dev/zero/w.json", LLAMA), {},
     ["compare", PROMPT, "--model=/dev/zero/w.json", "--model", LLAMA]),
    ("compare model_a=/dev/zero", "compare", (PROMPT, "/dev/zero", LLAMA), {},
     ["compare", PROMPT, "--model=/dev/zero", "--model", LLAMA]),
    ("compare html=dir", "compare", (PROMPT, LLAMA, LLAMA), {"html": "{tmp}/d.html"},
     ["compare", PROMPT, "--model", LLAMA, "--model", LLAMA, "--html={tmp}/d.html"]),
    # diff: --atol and --rtol, and the two files.
    ("atol=nan", "diff", ("{tmp}/a.json", "{tmp}/a.json"), {"atol": NAN}, ["diff", "{tmp}/a.json", "{tmp}/a.json", "--atol=nan"]),
    ("atol=-1", "diff", ("{tmp}/a.json", "{tmp}/a.json"), {"atol": -1}, ["diff", "{tmp}/a.json", "{tmp}/a.json", "--atol=-1"]),
    ("atol='x'", "diff", ("{tmp}/a.json", "{tmp}/a.json"), {"atol": "x"}, ["diff", "{tmp}/a.json", "{tmp}/a.json", "--atol=x"]),
    ("atol=10**400", "diff", ("{tmp}/a.json", "{tmp}/a.json"), {"atol": 10**400},
     ["diff", "{tmp}/a.json", "{tmp}/a.json", f"--atol={10**400}"]),
    ("rtol=inf", "diff", ("{tmp}/a.json", "{tmp}/a.json"), {"rtol": INF}, ["diff", "{tmp}/a.json", "{tmp}/a.json", "--rtol=inf"]),
    ("diff a=dir", "diff", ("{tmp}", "{tmp}/a.json"), {}, ["diff", "{tmp}", "{tmp}/a.json"]),
    ("diff a=/dev/null", "diff", ("/dev/null", "{tmp}/a.json"), {}, ["diff", "/dev/null", "{tmp}/a.json"]),
    ("diff a=/dev/zero", "diff", ("/dev/zero", "{tmp}/a.json"), {}, ["diff", "/dev/zero", "{tmp}/a.json"]),
    ("diff a=''", "diff", ("", "{tmp}/a.json"), {}, ["diff", "", "{tmp}/a.json"]),
    ("diff a=-x.json", "diff", ("-x.json", "{tmp}/a.json"), {}, ["diff", "--", "-x.json", "{tmp}/a.json"]),
    ("diff a=undecodable", "diff", ("{tmp}/\udcff.json", "{tmp}/a.json"), {}, ["diff", b"{tmp}/\xff.json", "{tmp}/a.json"]),
]

# Keywords that name no flag (here): the command's own refusal of --the-same-flag, as
# ArgumentError.
UNKNOWN = [
    ("hedas=2", "trace", (SHOES,), {"hedas": 2}, [SHOES, "--hedas=2"]),
    ("nonsense=None", "trace", (SHOES,), {"nonsense": None}, [SHOES, "--nonsense"]),
    ("generate bogus", "generate", (PROMPT, LLAMA), {"bogus": [1]}, [PROMPT, "--model", LLAMA, "--bogus"]),
    ("compare knockout", "compare", (PROMPT, LLAMA, LLAMA), {"knockout": ["0:a->b"]},
     ["compare", PROMPT, "--model", LLAMA, "--model", LLAMA, "--knockout=0:a->b"]),
    ("compare focus", "compare", (PROMPT, LLAMA, LLAMA), {"focus": 1},
     ["compare", PROMPT, "--model", LLAMA, "--model", LLAMA, "--focus=1"]),
    ("compare bogus", "compare", (PROMPT, LLAMA, LLAMA), {"bogus": 1},
     ["compare", PROMPT, "--model", LLAMA, "--model", LLAMA, "--bogus"]),
    ("compare pair", "compare", (PROMPT, LLAMA, LLAMA), {"pair": "x"},
     ["compare", PROMPT, "--model", LLAMA, "--model", LLAMA, "--pair"]),
]


def _cli(args, cwd):
    p = subprocess.run([str(BIN), *args], capture_output=True, cwd=cwd, timeout=120, stdin=subprocess.DEVNULL)
    return p.returncode, p.stdout, p.stderr.decode("utf-8", "replace")


def _same(folder, fn, args, kwargs, line, kind):
    args, kwargs = _subst(args, folder), _subst(kwargs, folder)
    before = _listing(folder)
    with pytest.raises(attn_trace.Error) as e:
        _call(fn, args, kwargs)
    assert type(e.value) is kind, (type(e.value), str(e.value))
    assert _listing(folder) == before, "the call left a file behind"
    assert e.value.message == str(e.value) and "\n" not in str(e.value)
    if line is None:
        return
    code, out, err = _cli(_subst(line, folder), folder)
    assert _listing(folder) == before, "the command left a file behind"
    assert (code, out) == (e.value.code, b"")
    assert err == f"attn-trace: {e.value}\n"


@pytest.mark.parametrize("fn,args,kwargs,line", [c[1:] for c in SAME], ids=[c[0] for c in SAME])
def test_the_message_is_the_commands(folder, fn, args, kwargs, line):
    _same(folder, fn, args, kwargs, line, attn_trace.Error)


@pytest.mark.parametrize("fn,args,kwargs,line", [c[1:] for c in UNKNOWN], ids=[c[0] for c in UNKNOWN])
def test_an_unknown_keyword_is_the_commands_unknown_flag(folder, fn, args, kwargs, line):
    _same(folder, fn, args, kwargs, line, attn_trace.ArgumentError)


# (id, function, args, kwargs, message): values no command line can hold. ArgumentError (a
# TypeError too) with code 2, naming the keyword and what to pass; never the value's repr
# (a file object's or an object's names its address).
OWN = [
    ("sentence=42", "trace", (42,), {}, r"^sentence: 42 is not text \(pass the sentence as a str\)$"),
    ("sentence=bytes", "trace", (b"my shoes",), {}, r"^sentence: a bytes value is not text"),
    ("sentence=list", "trace", (["my", "shoes"],), {}, r"^sentence: a value of type list is not text"),
    ("sentence=array", "trace", (np.array(["my"]),), {}, r"^sentence: an array is not text"),
    ("sentence=dict", "trace", ({},), {}, r"^sentence: a value of type dict is not text"),
    ("sentence=file", "trace", (CLOSED,), {}, r"^sentence: a file object is not text"),
    ("pair=42", "trace", (SHOES,), {"pair": 42}, r"^pair: 42 is not text"),
    ("pair=bytes", "trace", (SHOES,), {"pair": b"x"}, r"^pair: a bytes value is not text"),
    ("model=42", "trace", (SHOES,), {"model": 42}, r"^--model: 42 is not a path \(pass a model folder"),
    ("model=bytes", "trace", (SHOES,), {"model": b"/tmp"}, r"^--model: a bytes value is not a path"),
    ("model=file", "trace", (SHOES,), {"model": CLOSED}, r"^--model: a file object is not a path"),
    ("model=list", "trace", (SHOES,), {"model": ["a"]}, r"^--model: a value of type list is not a path"),
    ("heads=True", "trace", (SHOES,), {"heads": True}, r"^--heads: True is not text or a number \(pass what you would write after --heads\)$"),
    ("heads=False", "trace", (SHOES,), {"heads": False}, r"^--heads: False is not text or a number"),
    ("heads=np.True_", "trace", (SHOES,), {"heads": np.True_}, r"^--heads: np\.True_ is not text or a number"),
    ("heads=bytes", "trace", (SHOES,), {"heads": b"2"}, r"^--heads: a bytes value is not text or a number"),
    ("heads=dict", "trace", (SHOES,), {"heads": {}}, r"^--heads: a value of type dict is not"),
    ("heads=set", "trace", (SHOES,), {"heads": {2}}, r"^--heads: a value of type set is not"),
    ("heads=array", "trace", (SHOES,), {"heads": np.array([2])}, r"^--heads: an array is not text or a number"),
    ("heads=object", "trace", (SHOES,), {"heads": object()}, r"^--heads: a value of type object is not"),
    ("heads=complex", "trace", (SHOES,), {"heads": 1j}, r"^--heads: a value of type complex is not"),
    ("heads=file", "trace", (SHOES,), {"heads": CLOSED}, r"^--heads: a file object is not"),
    ("heads=array-like", "trace", (SHOES,), {"heads": ArrayLike()}, r"^--heads: an array is not text or a number"),
    ("knockout=open file", "trace", (SHOES,), {"knockout": OPEN}, r"^--knockout: a file object is not text"),
    ("steps=open file", "trace", (SHOES,), {"steps": OPEN}, r"^--steps: a file object is not text"),
    ("model=open file", "trace", (SHOES,), {"model": OPEN}, r"^--model: a file object is not a path"),
    ("heads=[None]", "trace", (SHOES,), {"heads": [None]}, r"^--heads: None is not text or a number"),
    ("heads=huge digits", "trace", (SHOES,), {"heads": 10**5000}, r"^--heads: an int of 16610 bits is too large"),
    ("causal=1", "trace", (SHOES,), {"causal": 1}, r"^--causal: 1 is not True or False \(pass causal=True to give --causal\)$"),
    ("causal='yes'", "trace", (SHOES,), {"causal": "yes"}, r"^--causal: 'yes' is not True or False"),
    ("causal=[]", "trace", (SHOES,), {"causal": []}, r"^--causal: a value of type list is not True or False"),
    ("metric=5", "trace", (SHOES,), {"metric": 5}, r"^--metric: 5 is not two values \(pass a pair"),
    ("metric='ab'", "trace", (SHOES,), {"metric": "ab"}, r"^--metric: 'ab' is not two values"),
    ("metric=3 items", "trace", (SHOES,), {"metric": ("a", "b", "c")}, r"^--metric: a value of type tuple is not two"),
    ("metric=(b,b)", "trace", (SHOES,), {"metric": (b"a", b"b")}, r"^--metric: a bytes value is not text"),
    ("knockout=bytes", "trace", (SHOES,), {"knockout": b"0:a->b"}, r"^--knockout: a bytes value is not text"),
    ("knockout=dict", "trace", (SHOES,), {"knockout": {"0:a->b": 1}}, r"^--knockout: a value of type dict"),
    ("knockout=set", "trace", (SHOES,), {"knockout": {"0:a->b"}}, r"^--knockout: a value of type set"),
    ("steps=[b]", "trace", (SHOES,), {"steps": [b"weights"]}, r"^--steps: a bytes value is not text"),
    ("save_trace=file", "trace", (SHOES,), {"save_trace": CLOSED}, r"^--save-trace: a file object is not"),
    ("weights=bytes", "trace", (SHOES,), {"weights": b"/tmp/w"}, r"^--weights: a bytes value is not"),
    ("weights=file", "trace", (SHOES,), {"weights": CLOSED}, r"^--weights: a file object is not"),
    ("weights={1: a}", "trace", (SHOES,), {"weights": {1: np.zeros(2)}}, r"^weights: 1 is not text \(name each tensor"),
    ("format=", "trace", (SHOES,), {"format": "json"}, r"^format=: not an option here \(use \.to_json\(\)"),
    ("completions=", "trace", (SHOES,), {"completions": "bash"}, r"^completions=: not an option here"),
    ("man=", "trace", (SHOES,), {"man": True}, r"^man=: not an option here"),
    ("help=", "trace", (SHOES,), {"help": True}, r"^help=: not an option here"),
    ("version=", "trace", (SHOES,), {"version": True}, r"^version=: not an option here"),
    ("batch=", "trace", (), {"batch": "/dev/null"}, r"^batch=: not an option here \(call attn_trace\.trace once"),
    ("key with =", "trace", (SHOES,), {"heads=3": 1}, r"^'heads=3': not an option \(the options are attn-trace's flags"),
    ("key ''", "trace", (SHOES,), {"": 1}, r"^'': not an option"),
    ("key Heads", "trace", (SHOES,), {"Heads": 2}, r"^'Heads': not an option"),
    ("max_new_tokens=None", "generate", (PROMPT, LLAMA), {"max_new_tokens": None}, r"^--generate: None is not a number of tokens"),
    ("max_new_tokens=True", "generate", (PROMPT, LLAMA), {"max_new_tokens": True}, r"^--generate: True is not text or a number"),
    ("max_new_tokens=bytes", "generate", (PROMPT, LLAMA), {"max_new_tokens": b"3"}, r"^--generate: a bytes value"),
    ("generate=", "generate", (PROMPT, LLAMA), {"generate": 3}, r"^generate=: not an option here \(pass max_new_tokens=\)$"),
    ("prompt=42", "generate", (42, LLAMA), {}, r"^sentence: 42 is not text"),
    ("prompt=bytes", "generate", (b"x", LLAMA), {}, r"^sentence: a bytes value is not text"),
    ("compare prompt=42", "compare", (42, LLAMA, LLAMA), {}, r"^prompt: 42 is not text \(pass the prompt as a str\)$"),
    ("compare prompt=bytes", "compare", (b"x", LLAMA, LLAMA), {}, r"^prompt: a bytes value is not text"),
    ("compare model_a=42", "compare", (PROMPT, 42, LLAMA), {}, r"^--model \(model_a\): 42 is not a path"),
    ("compare model_b=bytes", "compare", (PROMPT, LLAMA, b"x"), {}, r"^--model \(model_b\): a bytes value is not a path"),
    ("compare model_a=file", "compare", (PROMPT, CLOSED, LLAMA), {}, r"^--model \(model_a\): a file object is not a path"),
    ("compare quiet=7", "compare", (PROMPT, LLAMA, LLAMA), {"quiet": 7}, r"^--quiet: 7 is not True or False"),
    ("compare heads=True", "compare", (PROMPT, LLAMA, LLAMA), {"heads": True}, r"^--heads: True is not text or a number"),
    ("compare format=", "compare", (PROMPT, LLAMA, LLAMA), {"format": "json"}, r"^format=: not an option here \(the report is returned"),
    ("compare model=", "compare", (PROMPT, LLAMA, LLAMA), {"model": "x"}, r"^model=: not an option here \(pass the models as model_a"),
    ("diff a=42", "diff", (42, "{tmp}/a.json"), {}, r"^diff: a: 42 is not a path \(pass a Trace, or a trace file's path"),
    ("diff b=None", "diff", ("{tmp}/a.json", None), {}, r"^diff: b: None is not a path"),
    ("diff a=bytes", "diff", (b"{tmp}/a.json", "{tmp}/a.json"), {}, r"^diff: a: a bytes value is not a path"),
    ("diff a=file", "diff", (CLOSED, "{tmp}/a.json"), {}, r"^diff: a: a file object is not a path"),
    ("diff atol=True", "diff", ("{tmp}/a.json", "{tmp}/a.json"), {"atol": True}, r"^--atol: True is not text or a number"),
    ("diff atol=dict", "diff", ("{tmp}/a.json", "{tmp}/a.json"), {"atol": {}}, r"^--atol: a value of type dict"),
]


@pytest.mark.parametrize("fn,args,kwargs,message", [c[1:] for c in OWN], ids=[c[0] for c in OWN])
def test_a_value_no_command_line_holds_is_an_argument_error(folder, fn, args, kwargs, message):
    args, kwargs = _subst(args, folder), _subst(kwargs, folder)
    before = _listing(folder)
    with pytest.raises(attn_trace.ArgumentError, match=message) as e:
        _call(fn, args, kwargs)
    assert isinstance(e.value, TypeError) and isinstance(e.value, attn_trace.Error)
    assert e.value.code == 2 and "\n" not in str(e.value) and " at 0x" not in str(e.value)
    assert _listing(folder) == before


@pytest.mark.parametrize(
    "call",
    [
        lambda: attn_trace.trace("my \ud800 shoes"),
        lambda: attn_trace.trace(SHOES, model="\ud800"),
        lambda: attn_trace.trace(SHOES, system="\udfff"),
        lambda: attn_trace.trace(SHOES, knockout=["0:\ud800->a"]),
        lambda: attn_trace.trace(SHOES, weights={"\ud800": np.zeros(2)}),
        lambda: attn_trace.generate("\ud800", LLAMA),
        lambda: attn_trace.compare(PROMPT, LLAMA, "\ud800"),
        lambda: attn_trace.diff("\ud800", "b.json"),
        lambda: attn_trace.trace(SHOES).save("\ud800.json"),
    ],
    ids=["sentence", "model", "system", "knockout", "weights name", "prompt", "model_b", "diff", "save"],
)
def test_a_lone_surrogate_is_an_error_naming_it(call):
    # No command line can hold it (it has no UTF-8 bytes), so the message is the API's own.
    with pytest.raises(attn_trace.Error, match=r": the text holds '\\ud[89a-f][0-9a-f]{2}' at character \d+, a lone surrogate"):
        call()


@pytest.mark.parametrize(
    "path,message",
    [
        (42, r"^save: 42 is not a path"),
        (None, r"^save: None is not a path"),
        (b"t.json", r"^save: a bytes value is not a path"),
        (CLOSED, r"^save: a file object is not a path"),
    ],
    ids=["int", "None", "bytes", "file"],
)
def test_save_takes_a_path(path, message):
    with pytest.raises(attn_trace.ArgumentError, match=message):
        attn_trace.trace(SHOES).save(path)


def test_save_to_hostile_paths_is_an_error(tmp_path):
    t = attn_trace.trace(SHOES)
    for path, message in [
        ("", r"^save : the extension names no format"),
        (tmp_path / "d.json", r"Is a directory|directory"),
        (str(tmp_path / "a\0.json"), r"NUL byte"),
        (str(tmp_path / "no" / "t.json"), r"^save .*no/t\.json: "),
    ]:
        if str(path).endswith("d.json"):
            os.mkdir(path)
        with pytest.raises(attn_trace.Error, match=message) as e:
            t.save(path)
        assert e.value.code == 2 and "\n" not in str(e.value)
    assert _listing(tmp_path) == ["d.json"]
    t.save(tmp_path / "\udcff.json")  # an undecodable name is a file name like any other
    assert os.fsencode("\udcff.json") == b"\xff.json" and (tmp_path / "\udcff.json").is_file()


@pytest.mark.parametrize("layer,head", [("0", 0), (0, 1.0), (True, 0), (0, None)], ids=["str", "float", "bool", "None"])
def test_heatmap_takes_whole_numbers(layer, head):
    pytest.importorskip("matplotlib")
    with pytest.raises(attn_trace.ArgumentError, match=r"^heatmap: (layer|head) is .*, not a whole number"):
        attn_trace.trace(SHOES).heatmap(layer, head)


def test_a_nul_in_the_sentence_is_text_as_from_a_file(tmp_path):
    # The command reads it from a file or standard input (an argument cannot hold one).
    (tmp_path / "s.txt").write_bytes(b"my\0shoes")
    code, out, err = _cli(["--file", tmp_path / "s.txt", "--format", "json"], tmp_path)
    assert code == 0, err
    assert attn_trace.trace("my\0shoes").to_json().encode() == out


def test_none_and_false_leave_a_flag_off():
    base = attn_trace.trace(SHOES, heads=2).to_json()
    assert attn_trace.trace(SHOES, heads=2, causal=False, layer=None, knockout=None, metric=None).to_json() == base
    assert attn_trace.trace(SHOES, heads=2, causal=np.False_, knockout=[]).to_json() == base
    assert attn_trace.trace(SHOES, heads=np.int64(2), causal=np.True_).to_json() == attn_trace.trace(
        SHOES, heads=2, causal=True).to_json()


def test_lists_ranges_iterators_decimals_and_paths_are_values(tmp_path):
    from decimal import Decimal
    from pathlib import Path

    want = attn_trace.trace(SHOES, heads=2, steps=["weights", "context"], scale=0.5, knockout=["0:small->shoes"])
    for kw in [
        dict(steps=("weights", "context"), scale=Decimal("0.5"), knockout=("0:small->shoes",)),
        dict(steps=iter(["weights", "context"]), scale=np.float32(0.5), knockout=(k for k in ["0:small->shoes"])),
    ]:
        assert attn_trace.trace(SHOES, heads=range(2, 3), **kw).to_json() == want.to_json()
    attn_trace.trace(SHOES, save_trace=Path(tmp_path) / "t.npz")
    assert _listing(tmp_path) == ["t.npz"]
    with pytest.raises(attn_trace.ArgumentError, match=r"^--knockout: a bytes value is not text"):
        attn_trace.trace(SHOES, knockout=memoryview(b"0:a->b"))


def test_errors_pickle_with_their_code():
    # multiprocessing hands exceptions over by pickling them.
    for e in (attn_trace.Error("x: y (z)", 1), attn_trace.ArgumentError("a: b (c)", 2)):
        back = pickle.loads(pickle.dumps(e))
        assert (type(back), back.message, back.code, str(back)) == (type(e), e.message, e.code, str(e))


# ---- what a call must survive -------------------------------------------------------------

# A run whose layers take most of its time (drawing a toy model's parameters is not
# interrupted; the model checks before each layer): minutes if Ctrl-C did not stop it. A
# comparison, which keeps no attention maps for a page, so its memory stays small.
LONG = dict(d_model=16, heads=2, layers=3000, max_len=512)
LONG_SENTENCE = " ".join(f"w{i % 50}" for i in range(512))


def test_ctrl_c_stops_a_long_run(tmp_path):
    """SIGINT during a run is a KeyboardInterrupt at the next layer, not after the whole run:
    the interrupted run's page is never written, and the next call works."""
    main = threading.main_thread().ident
    page = tmp_path / "c.html"
    timer = threading.Timer(0.5, signal.pthread_kill, (main, signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            attn_trace.compare(LONG_SENTENCE, "toy", "toy", html=page, **LONG)
    finally:
        timer.cancel()
    assert not page.exists() and _listing(tmp_path) == []
    assert attn_trace.trace(SHOES).tokens[:2] == ["my", "shoes"]


def test_threads_trace_at_once_with_the_same_bytes():
    want = attn_trace.trace(SHOES, heads=2, layers=3, d_model=16).to_json()

    def one(i):
        if i % 4 == 3:
            with pytest.raises(attn_trace.Error, match="not divisible"):
                attn_trace.trace(SHOES, heads=3)
            return want
        return attn_trace.trace(SHOES, heads=2, layers=3, d_model=16).to_json()

    with ThreadPoolExecutor(6) as pool:
        assert list(pool.map(one, range(24))) == [want] * 24


def test_the_gil_is_released_while_a_trace_runs():
    """Another Python thread runs while a trace computes (a held GIL would stop it)."""
    done = threading.Event()
    ticks = []

    def long_trace():
        attn_trace.trace(LONG_SENTENCE, **{**LONG, "layers": 150, "steps": "none"})
        done.set()

    worker = threading.Thread(target=long_trace)
    worker.start()
    while not done.is_set():
        ticks.append(1)
        time.sleep(0.001)
    worker.join()
    assert len(ticks) > 30  # a GIL held for the run would allow a few, before and after it


def _child(queue):
    queue.put(attn_trace.trace(SHOES, heads=2).to_json())


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="no fork on this platform")
def test_a_forked_child_traces():
    """A child forked after a trace (multiprocessing's default on Linux) has no threads of the
    parent's pool; it makes its own rather than wait forever for them."""
    want = attn_trace.trace(SHOES, heads=2).to_json()
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_child, args=(queue,))
    child.start()
    got = queue.get(timeout=120)
    child.join(60)
    assert child.exitcode == 0 and got == want


def test_arrays_outlive_their_trace_and_generation():
    t = attn_trace.trace(SHOES, heads=2)
    w, ids = t.steps["layers.0.attn.weights"], t.steps["token_ids"]
    want = w.copy()
    g = attn_trace.generate(PROMPT, LLAMA, max_new_tokens=2, steps=["weights"])
    step = g.steps[0]["gen.1.layers.0.attn.weights"]
    step_want = step.copy()
    del t, g
    gc.collect()
    # Other work in between reuses freed memory, if the arrays did not hold it.
    [attn_trace.trace(SHOES, heads=2, seed=s) for s in range(3)]
    assert np.array_equal(w, want) and ids.dtype == np.int64
    assert np.array_equal(step, step_want)
    with ThreadPoolExecutor(2) as pool:
        assert list(pool.map(lambda a: float(a.sum()), [w, w])) == [float(want.sum())] * 2


def test_a_reloaded_module_keeps_its_error_class_and_traces():
    t = attn_trace.trace(SHOES, heads=2)
    error = attn_trace.Error
    importlib.reload(attn_trace)
    assert attn_trace.Error is error
    with pytest.raises(error, match="not divisible"):
        attn_trace.trace(SHOES, heads=3)
    assert json.loads(t.to_json())["config"]["heads"] == 2
    assert not math.isnan(float(t.steps["layers.0.attn.weights"].sum()))
