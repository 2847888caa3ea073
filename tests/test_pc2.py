import struct

import numpy as np
import pytest

from neurok_core.errors import NeuROKError
from neurok_core.pc2 import HEADER, read_pc2, write_pc2


def test_round_trip_and_header_layout(tmp_path):
    rng = np.random.default_rng(0)
    frames = rng.normal(size=(5, 7, 3)).astype(np.float32)
    path = write_pc2(tmp_path / "a.pc2", frames, start_frame=3, sample_rate=1)
    raw = path.read_bytes()
    assert len(raw) == 32 + 5 * 7 * 12
    sig, ver, npts, start, rate, nsamp = struct.unpack("<12siiffi", raw[:32])
    assert (sig, ver, npts, start, rate, nsamp) == (b"POINTCACHE2\0", 1, 7, 3.0, 1.0, 5)
    # The first point of the second frame sits right after the first frame.
    np.testing.assert_array_equal(
        np.frombuffer(raw[32 + 7 * 12 : 32 + 8 * 12], "<f4"), frames[1, 0]
    )
    cache = read_pc2(path)
    np.testing.assert_array_equal(cache.frames, frames)
    assert cache.start_frame == 3.0


def test_bad_files(tmp_path):
    bad = tmp_path / "bad.pc2"
    bad.write_bytes(b"NOTACACHE" + bytes(40))
    with pytest.raises(NeuROKError, match="not a PC2"):
        read_pc2(bad)
    good = write_pc2(tmp_path / "g.pc2", np.zeros((4, 3, 3), np.float32))
    truncated = tmp_path / "t.pc2"
    truncated.write_bytes(good.read_bytes()[: HEADER.size + 20])
    with pytest.raises(NeuROKError, match="truncated"):
        read_pc2(truncated)
    with pytest.raises(NeuROKError, match="NaN"):
        write_pc2(tmp_path / "n.pc2", np.full((2, 2, 3), np.nan, np.float32))
