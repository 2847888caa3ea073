"""numpy's BLAS kernel: reported, and restarted with the one the CPU deserves where numpy's
OpenBLAS fell back to a kernel older than the CPU (the engine's entry points)."""

import json
import os
import subprocess
import sys

import numpy as np  # noqa: F401  (loads OpenBLAS)
import pytest
from conftest import ROOT

from neurok_core import blas

LINUX = sys.platform.startswith("linux")


def test_the_kernel_a_cpu_deserves():
    avx512 = {"avx512f", "avx512dq", "avx512cd", "avx512bw", "avx512vl", "avx2", "fma"}
    assert blas.suited_kernel(avx512) == "SkylakeX"
    assert blas.suited_kernel({"avx2", "fma", "sse3"}) == "Haswell"
    assert blas.suited_kernel({"sse3", "avx"}) is None
    assert blas.suited_kernel(set()) is None


@pytest.mark.skipif(not LINUX, reason="reads /proc")
def test_the_loaded_kernel_is_reported():
    kernels = blas.loaded_kernels()
    assert kernels, "numpy is loaded, its OpenBLAS is not found"
    assert all(isinstance(k, str) and k for k in kernels.values())
    assert "OpenBLAS kernel" in blas.blas_report()


PROBE = """
import json, os, sys
from neurok_core import blas
if not os.environ.get(blas.PICKED):
    print("first start", flush=True)
    blas.pick_blas_kernel(kernels={fallen})
import numpy
print(json.dumps({{"argv": sys.argv[1:], "coretype": os.environ.get("OPENBLAS_CORETYPE"),
                   "picked": os.environ.get(blas.PICKED), "kernels": blas.loaded_kernels()}}))
"""


def run_probe(fallen: dict, **env) -> tuple[list[str], dict]:
    base = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", blas.PICKED)}
    code = PROBE.format(fallen=repr(fallen))
    out = subprocess.run(
        [sys.executable, "-c", code, "an-argument"],
        cwd=ROOT,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.strip().splitlines()
    return lines[:-1], json.loads(lines[-1])


@pytest.mark.skipif(not LINUX, reason="reads /proc")
def test_a_fallen_kernel_restarts_the_process_with_the_right_one():
    suited = blas.suited_kernel(blas.cpu_flags())
    before, after = run_probe({"libopenblas.so": "Prescott"})
    assert after["argv"] == ["an-argument"]
    if suited is None:  # a CPU without AVX2: Prescott-era kernels are its own
        assert after["coretype"] is None and before == ["first start"]
        return
    assert before == ["first start"]  # the restarted process is the one that finished
    assert after["coretype"] == suited and after["picked"] == "Prescott"
    assert set(after["kernels"].values()) == {suited}, after["kernels"]


@pytest.mark.skipif(not LINUX, reason="reads /proc")
def test_a_kernel_set_by_the_user_is_kept_and_a_right_one_is_not_restarted():
    before, after = run_probe({"libopenblas.so": "Prescott"}, OPENBLAS_CORETYPE="Haswell")
    assert before == ["first start"] and after["coretype"] == "Haswell" and after["picked"] is None
    before, after = run_probe({"libopenblas.so": "SkylakeX"})
    assert before == ["first start"] and after["picked"] is None


def test_the_worker_probe_reports_the_kernel():
    from neurok_core.worker import probe

    assert "OpenBLAS kernel" in probe(None, "cpu")["blas"]
