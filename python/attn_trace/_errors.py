"""The module's exceptions: ``Error``, what the command refuses or fails at, and
``ArgumentError``, a Python value that no command line could hold."""

from __future__ import annotations


class Error(Exception):
    """A run the command would refuse or fail: ``str(e)`` is the command's one-line message
    (without its ``attn-trace:`` prefix) and ``e.code`` its exit code: 2 for a usage error
    (a bad option, value or input file), 1 for any other failure."""

    def __init__(self, message: str, code: int = 2):
        super().__init__(message)
        self.message = message
        self.code = code

    def __reduce__(self):
        # Pickled with its code (multiprocessing hands exceptions over so), not just its args.
        return (type(self), (self.message, self.code))


class ArgumentError(Error, TypeError):
    """A keyword argument the command line has no spelling for (``heads=True``, bytes, a file
    object, an array, a keyword that is no option): an ``Error`` with code 2, and a
    ``TypeError``, as Python's own argument errors are. Where the command has an equivalent
    (an unknown flag), the message is the command's."""


# Shown as attn_trace.Error in tracebacks, where users catch them.
Error.__module__ = ArgumentError.__module__ = "attn_trace"
