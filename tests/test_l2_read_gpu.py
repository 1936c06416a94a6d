"""l2_read requests every byte of its buffer from the L2 exactly once per pass, for every word
width, load count and block size, also where the last rows run past the buffer's end (the
kernel's per-load tested path) - counted by the L2's own sector counter."""

import math

import numpy as np
import pytest

import l2persist
from l2persist import kernels as K

pytestmark = pytest.mark.gpu


def _words(threads, loads):
    """A word count whose rows fill 4 chunks but for the last two row slots, the last row
    partial: block 0 takes the all-rows-whole path, blocks 1-3 the tested one."""
    return threads * (4 * loads - 3) + 5


@pytest.mark.parametrize("width, loads, threads", [
    (8, 64, 1024), (8, 32, 1024), (8, 8, 96), (16, 32, 1024), (16, 8, 512), (16, 64, 64)])
def test_l2_read_requests_every_sector_once_per_pass(width, loads, threads):
    nbytes = _words(threads, loads) * width
    sectors = math.ceil(nbytes / 32)
    slack = 4 + sectors // 500  # one missed or doubled row is at least 24 sectors, > 3 %
    with l2persist.zeros(nbytes, np.uint8) as src:
        # One pass, default loads: no block reads a word twice, so the L1 cannot serve one.
        one = l2persist.measure(
            lambda: K.l2_read(src, 1, width=width, loads=loads, threads=threads),
            ["l2_read_sectors"])
        # Three passes through ld.global.cg (L2 only): blocks of later passes re-read words.
        three = l2persist.measure(
            lambda: K.l2_read(src, 3, load="cg", width=width, loads=loads, threads=threads),
            ["l2_read_sectors"])
    assert abs(one["l2_read_sectors"] - sectors) <= slack, (one["l2_read_sectors"], sectors)
    assert abs(three["l2_read_sectors"] - 3 * sectors) <= 3 * slack, \
        (three["l2_read_sectors"], 3 * sectors)
