"""Float-vs-bound checks over arrays whose failure names the worst value and the bound it broke."""

from __future__ import annotations

import operator

import numpy as np

_OPS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}


def _numpy(x):
    return x.detach().cpu().numpy() if hasattr(x, "detach") else x  # a torch tensor


def assert_within(values, *, below=None, above=None, strict: bool = False, what: str) -> None:
    """Assert ``above <= values <= below`` entry by entry (``<`` and ``>`` when ``strict``).

    ``values`` is a scalar, a numpy array or a tensor; ``below`` and ``above`` (either may be
    left out) broadcast against it. The comparisons are the plain ones, in the operands' own
    dtypes, so a NaN breaks any bound. On failure the AssertionError names ``what``, how many
    entries broke the bound, the worst of them (the furthest past it; a NaN first), its index
    and the bound at that index.
    """
    __tracebackhide__ = True  # pytest shows the failure at the caller's line
    v = np.asarray(_numpy(values))
    for bound, op, sign in ((below, "<", 1.0), (above, ">", -1.0)):
        if bound is None:
            continue
        op += "" if strict else "="
        bound = _numpy(bound)
        ok = np.asarray(_OPS[op](v, bound))  # as the plain comparison: a scalar keeps v's dtype
        if ok.all():
            continue
        vb, bb = np.broadcast_arrays(v, np.asarray(bound))
        with np.errstate(invalid="ignore", over="ignore"):
            past = sign * (vb.astype(float) - bb.astype(float))  # > 0: past the bound
        past = np.where(ok, -np.inf, np.where(np.isnan(past), np.inf, past))
        i = np.unravel_index(int(np.argmax(past)), ok.shape)
        raise AssertionError(
            f"{what}: {int((~ok).sum())} of {ok.size} not {op} the bound; worst "
            f"{float(vb[i])!r} at index {tuple(int(k) for k in i)}, bound {float(bb[i])!r}"
        )
