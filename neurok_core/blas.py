"""numpy's BLAS kernel: which one this process runs, and the one the CPU deserves.

numpy and scipy bundle OpenBLAS built with every x86-64 kernel; at load it picks one from the CPU's
model. An OpenBLAS older than the CPU (numpy 1.26's, which Blender 5.0's Python is held to) does
not know a newer model and falls back to its oldest kernel, Prescott (SSE3): a (4500 x 192)^T
(4500 x 192) product then takes 4-5x as long as with the AVX-512 kernel (SkylakeX). The choice
is made once, when the library loads, from ``OPENBLAS_CORETYPE``; so ``pick_blas_kernel`` runs
first thing in the engine's entry points (the worker, the CLI): if the loaded kernel predates
the CPU's vector units and nobody set ``OPENBLAS_CORETYPE``, it sets it and restarts the process
(``os.execve``, same arguments and pipes) before any work is done. A kernel set by the user or the
machine (``OPENBLAS_CORETYPE``, e.g. to avoid a kernel known to fail there) is always kept.

Linux only (``/proc``); elsewhere the functions report nothing and change nothing.
"""

from __future__ import annotations

import ctypes
import os
import sys
from pathlib import Path

# OpenBLAS's x86-64 kernels older than AVX2 (what an unknown CPU falls back to)
PRE_AVX2 = {
    "prescott",
    "core2",
    "penryn",
    "dunnington",
    "nehalem",
    "atom",
    "sandybridge",
    "opteron",
}
PICKED = "NEUROK_BLAS_PICKED"  # set in the restarted process: never restart twice
_CORENAME = (
    "openblas_get_corename64_",
    "scipy_openblas_get_corename64_",
    "openblas_get_corename",
    "scipy_openblas_get_corename",
)


def loaded_kernels() -> dict[str, str]:
    """The OpenBLAS libraries loaded in this process (file name -> kernel name, e.g. "SkylakeX")."""
    try:
        lines = Path("/proc/self/maps").read_text().splitlines()
    except OSError:  # not Linux, or not allowed to look
        return {}
    paths = sorted(
        {
            line.split()[-1]
            for line in lines
            if "openblas" in Path(line.split()[-1]).name.lower() and ".so" in line
        }
    )
    out = {}
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for symbol in _CORENAME:
            fn = getattr(lib, symbol, None)
            if fn is not None:
                fn.restype = ctypes.c_char_p
                out[Path(path).name] = fn().decode()
                break
    return out


def cpu_flags() -> set[str]:
    """The CPU's feature flags (Linux's /proc/cpuinfo), empty where unknown."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    for line in text.splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def suited_kernel(flags: set[str]) -> str | None:
    """The OpenBLAS kernel a CPU with these flags deserves: SkylakeX (AVX-512), Haswell (AVX2)."""
    if {"avx512f", "avx512dq", "avx512cd", "avx512bw", "avx512vl"} <= flags:
        return "SkylakeX"
    if {"avx2", "fma"} <= flags:
        return "Haswell"
    return None


def blas_report() -> str:
    """One line for engine reports: the kernel(s) numpy and scipy run, and why."""
    import numpy

    kernels = sorted(set(loaded_kernels().values())) or ["unknown"]
    line = f"numpy {numpy.__version__}, OpenBLAS kernel {'/'.join(kernels)}"
    if os.environ.get(PICKED):
        line += f" (picked for this CPU: OpenBLAS alone chose {os.environ[PICKED]})"
    elif os.environ.get("OPENBLAS_CORETYPE"):
        line += " (set by OPENBLAS_CORETYPE)"
    return line


def pick_blas_kernel(kernels: dict[str, str] | None = None) -> None:
    """Restart this process with the kernel the CPU deserves if numpy's OpenBLAS fell back to
    one older than the CPU's vector units. Call it before any work: the restart repeats the
    process from its start. Does nothing where the kernel is set already (``OPENBLAS_CORETYPE``)
    or right, off Linux, or in the restarted process itself.

    kernels: the loaded kernels, as ``loaded_kernels`` gives them (tests pass a fallen one).
    """
    if os.environ.get("OPENBLAS_CORETYPE") or os.environ.get(PICKED):
        return
    try:
        import numpy  # noqa: F401  (loads numpy's OpenBLAS, which picks its kernel)
    except ImportError:
        return  # the caller's own import says what is missing
    kernels = loaded_kernels() if kernels is None else kernels
    suited = suited_kernel(cpu_flags())
    fallen = [k for k in kernels.values() if k.lower() in PRE_AVX2]
    if not (suited and fallen) or not getattr(sys, "orig_argv", None):
        return
    sys.stdout.flush()
    sys.stderr.flush()
    env = {**os.environ, "OPENBLAS_CORETYPE": suited, PICKED: fallen[0]}
    try:
        os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], env)
    except OSError:  # cannot restart (a sandbox): go on with the kernel there is
        return
