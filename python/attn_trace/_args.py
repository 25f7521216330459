"""Keyword arguments as the command line they stand for.

Every value becomes the text a command line would hold (``heads=2`` is ``--heads=2``,
``scale=float("nan")`` is ``--scale=nan``, ``heads=10**30`` is ``--heads=1000…``), so the
command's own parser and checks judge it and a refusal is the command's, word for word. A
value no command line could hold is refused here, before anything runs, as ``ArgumentError``
(an ``Error`` with code 2 that is also a ``TypeError``): True or False for a value, None where
a value is needed, bytes, a file object, an array, a dict or any other object whose ``str``
is not what the user meant (``str(b"my")`` is ``"b'my'"``, a file object's names its address).
Text holding a lone surrogate (``"\\ud800"``), which no file name or argument can encode, is
an ``Error`` too; the surrogates Python uses for undecodable bytes (``"\\udcff"``, from
``os.listdir``) stand for those bytes, as on the command line.
"""

from __future__ import annotations

import decimal
import io
import numbers
import os
import re
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from ._errors import ArgumentError, Error

# A keyword that can name a flag: one the parser may judge (`hedas` → `--hedas`, which the
# command refuses with its suggestion). Anything else could smuggle a value (`heads=3`).
_KEY = re.compile(r"[a-z][a-z0-9_]*\Z")


def what(v: Any) -> str:
    """A value as a message names it: a short repr for text, numbers, True, False and None
    (never an object's repr, which can hold an address), else what it is."""
    if v is None or isinstance(v, (bool, np.bool_, int, float)):
        shown = repr(v) if not isinstance(v, int) or v.bit_length() < 64 else f"an int of {v.bit_length()} bits"
        return shown if len(shown) <= 40 else f"a {type(v).__name__}"
    if isinstance(v, str):
        return repr(v) if len(v) <= 30 else f"a str of {len(v)} characters"
    if isinstance(v, (bytes, bytearray, memoryview)):
        return "a bytes value"
    if isinstance(v, io.IOBase) or hasattr(v, "readline"):
        return "a file object"
    if isinstance(v, np.ndarray) or hasattr(v, "__array__") or hasattr(v, "__dlpack__"):
        return "an array"
    return f"a value of type {type(v).__name__}"


def checked(where: str, s: str) -> str:
    """`s`, if it can be an argument: a lone surrogate is no character and has no bytes."""
    try:
        os.fsencode(s)
    except UnicodeEncodeError as e:
        raise Error(
            f"{where}: the text holds {s[e.start]!r} at character {e.start}, a lone surrogate, which is no "
            "character and no file name can hold (pass valid Unicode text)", 2) from None
    return s


def text(where: str, v: Any, hint: str) -> str:
    """One value as the command line's text: a str as it is, a number in Python's own
    spelling (which Rust reads back exactly: 1e-05, nan, inf), a path as its text."""
    if isinstance(v, os.PathLike):
        v = os.fspath(v)
    if isinstance(v, str):
        return checked(where, v)
    if isinstance(v, decimal.Decimal):
        return str(v)  # 0.5, NaN, Infinity, 1E+30: as Rust reads them
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Real):
        raise ArgumentError(f"{where}: {what(v)} is not text or a number ({hint})", 2)
    if isinstance(v, numbers.Integral):
        try:
            return str(int(v))
        except ValueError:  # beyond sys.get_int_max_str_digits: no flag takes such a number
            raise ArgumentError(f"{where}: {what(int(v))} is too large for any option ({hint})", 2) from None
    try:
        return repr(float(v))
    except (OverflowError, ValueError):
        raise ArgumentError(f"{where}: {what(v)} is not a float ({hint})", 2) from None


def words(where: str, v: Any, hint: str) -> str:
    """A sentence or prompt: text only (42 or b"my shoes" is not what the user meant)."""
    if not isinstance(v, str):
        raise ArgumentError(f"{where}: {what(v)} is not text ({hint})", 2)
    return checked(where, v)


def path(where: str, v: Any, hint: str) -> str:
    """A file or model the caller names: a str or an os.PathLike whose path is text."""
    if isinstance(v, os.PathLike):
        v = os.fspath(v)
    if not isinstance(v, str):
        raise ArgumentError(f"{where}: {what(v)} is not a path ({hint})", 2)
    return checked(where, v)


def flag(where: str, key: str, v: Any) -> bool:
    """A flag's keyword: True gives it; False and None leave it off."""
    if v is None or v is False or v is np.False_:
        return False
    if v is True or v is np.True_:
        return True
    raise ArgumentError(f"{where}: {what(v)} is not True or False (pass {key}=True to give {where})", 2)


def command_line(options: dict, kinds: dict, refused: dict, help_cmd: str) -> list:
    """The flags the keyword arguments stand for, in their order. `kinds` maps a keyword to
    `flag`, `value`, `append` or `pair` (from clap's definition); `refused` maps a keyword to
    why it is not one here. A keyword that names no flag is handed on as `--its-name`, for
    the command's parser to refuse with the command's message."""
    argv = []
    for key, value in options.items():
        if key in refused:
            raise ArgumentError(f"{key}=: not an option here ({refused[key]})", 2)
        kind = kinds.get(key)
        flag_ = "--" + key.replace("_", "-")
        if kind is None:
            if not _KEY.match(key):
                raise ArgumentError(f"{key!r}: not an option (the options are {help_cmd}'s flags, with _ for -: "
                                    f"see {help_cmd} --help)", 2)
            argv.append(flag_)
            continue
        hint = f"pass what you would write after {flag_}"
        if kind == "flag":
            if flag(flag_, key, value):
                argv.append(flag_)
        elif value is None:
            continue
        elif kind == "append":
            single = isinstance(value, (str, numbers.Real, os.PathLike, decimal.Decimal)) and not isinstance(value, bool)
            items = [value] if single else _items(flag_, value, hint)
            argv.extend(f"{flag_}={text(flag_, v, hint)}" for v in items)
        elif kind == "pair":
            items = list(value) if isinstance(value, (list, tuple)) else []  # (a, b), exactly
            if len(items) != 2:
                raise ArgumentError(f"{flag_}: {what(value)} is not two values (pass a pair, e.g. "
                                    f"{key}=({' Paris'!r}, {' London'!r}))", 2)
            argv.extend([flag_, text(flag_, items[0], hint), text(flag_, items[1], hint)])
        elif _listed(value):
            argv.append(f"{flag_}=" + ",".join(text(flag_, v, hint) for v in value))
        else:
            argv.append(f"{flag_}={text(flag_, value, hint)}")
    return argv


def _listed(value: Any) -> bool:
    """Whether `value` is a list of values (a list, tuple, range or iterator): not text, bytes
    or a file object (which iterates over its lines, if it is open)."""
    if isinstance(value, (str, bytes, bytearray, memoryview, io.IOBase)) or hasattr(value, "readline"):
        return False
    return isinstance(value, (Sequence, Iterator))


def _items(where: str, value: Any, hint: str) -> list:
    """A list's, tuple's, range's or iterator's items; not a set's (it has no order), a dict's
    (its keys are not what was meant), an array's or the bytes of a bytes value."""
    if _listed(value):
        return list(value)
    raise ArgumentError(f"{where}: {what(value)} is not text, a number or a list of them ({hint})", 2)
