"""The float-vs-bound helper (tests/bounds.py): silent within its bounds, and outside them a
message with the worst value, its index and the bound it broke."""

import numpy as np
import pytest
import torch
from bounds import assert_within


def test_within_bounds_passes():
    x = np.array([[0.0, 0.5], [1.0, 0.25]])
    assert_within(x, above=0.0, below=1.0, what="x")
    assert_within(x, below=x, what="x against itself")
    assert_within(np.array([]), below=0.0, strict=True, what="nothing")
    assert_within(torch.ones(3, requires_grad=True), above=torch.zeros(3), what="tensor")


def test_outside_names_worst_value_and_bound():
    x = np.array([[0.0, 1.5], [3.0, 0.25]])
    with pytest.raises(
        AssertionError, match=r"x: 2 of 4 not <= .*worst 3\.0 at index \(1, 0\), bound 1\.0"
    ):
        assert_within(x, below=1.0, what="x")
    with pytest.raises(AssertionError, match=r"worst 0\.25 at index \(1, 1\), bound 0\.5"):
        assert_within(x, above=np.array([-1.0, 0.5]), what="x")  # a bound per column
    with pytest.raises(AssertionError, match=r"1 of 4 not > .*worst 0\.0 .*bound 0\.0"):
        assert_within(x, above=0.0, strict=True, what="x")
    with pytest.raises(AssertionError, match=r"worst nan at index \(1,\)"):
        assert_within(np.array([0.0, np.nan, 2.0]), below=1.0, what="NaN first")
