"""The wheel's ``attn-trace`` command: the binary's own ``main``, in Rust, in this process."""

import signal
import sys

from . import _native


def main() -> None:
    # As a native binary: Ctrl-C ends the run at once (Python would only note it between
    # bytecodes, and the run is one call into Rust).
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    sys.stdout.flush()
    sys.exit(_native.main(["attn-trace", *sys.argv[1:]]))


if __name__ == "__main__":
    main()
