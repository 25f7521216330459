#!/usr/bin/env python3
"""Evict files from the page cache (posix_fadvise POSIX_FADV_DONTNEED), so that the next read
comes from the disk: `python3 evict.py FILE...`. For cold-cache benchmarks (bench_decoders.sh
with COLD=1). Pages another process has mapped, or dirty pages, may stay; `fincore FILE`
shows what is left."""

import os
import sys

for path in sys.argv[1:]:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
