"""numpy's BLAS kernel and its cost: a (4500 x 192)^T (4500 x 192) product under each kernel.

    python -m training.benchmarks.bench_blas [--repeat 30]

Each row runs in its own process (OpenBLAS picks its kernel once, when it loads): numpy's own
choice, the engine's (``neurok_core.blas.pick_blas_kernel``, what the worker and the CLI run),
and each kernel forced by ``OPENBLAS_CORETYPE``; it prints the median milliseconds of the product
and its ratio to the newest kernel the CPU can run (SkylakeX with AVX-512, else Haswell with
AVX2); kernels newer than the CPU are left out.
One thread (``OPENBLAS_NUM_THREADS=1``), as the tests compare kernels, not cores.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

KERNELS = ("Prescott", "Haswell", "SkylakeX", "Zen")
_PROBE = """
import json, sys, time
{pick}
import numpy as np
from neurok_core.blas import loaded_kernels
a = np.random.default_rng(0).standard_normal((4500, 192))
for _ in range(5):  # warm: the first products pay for caches and clocks
    a.T @ a
times = []
for _ in range({repeat}):
    start = time.perf_counter(); a.T @ a; times.append(time.perf_counter() - start)
print(json.dumps({{"ms": 1e3 * sorted(times)[len(times) // 2], "kernels": loaded_kernels()}}))
"""


def measure(kernel: str | None, *, engine: bool = False, repeat: int = 30) -> dict:
    """Median ms of the product in a fresh process: ``kernel`` forced, or numpy's / the engine's."""
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE",)}
    env["OPENBLAS_NUM_THREADS"] = "1"
    if kernel:
        env["OPENBLAS_CORETYPE"] = kernel
    pick = "from neurok_core.blas import pick_blas_kernel; pick_blas_kernel()" if engine else ""
    code = _PROBE.format(pick=pick, repeat=repeat)
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
    )
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args(argv)
    if os.environ.get("OPENBLAS_CORETYPE"):
        print(
            f"(OPENBLAS_CORETYPE={os.environ['OPENBLAS_CORETYPE']} is set here: rows 1-2 unset it)"
        )
    rows = [("numpy's own choice", measure(None, repeat=args.repeat))]
    rows.append(("the engine's choice", measure(None, engine=True, repeat=args.repeat)))
    from neurok_core.blas import cpu_flags, suited_kernel

    best = suited_kernel(cpu_flags()) or "Prescott"
    # a kernel newer than the CPU is an illegal instruction (OpenBLAS does not check)
    runnable = {"SkylakeX": KERNELS, "Haswell": ("Prescott", "Haswell", "Zen")}
    for k in runnable.get(best, ("Prescott",)):
        rows.append((f"OPENBLAS_CORETYPE={k}", measure(k, repeat=args.repeat)))
    ref = dict(rows)[f"OPENBLAS_CORETYPE={best}"]["ms"]
    print(f"{'run':28s} {'kernel (numpy / scipy)':26s} {'ms':>7s} {'/ ' + best:>10s}")
    for name, row in rows:
        kernels = "/".join(row["kernels"].values()) or "?"
        print(f"{name:28s} {kernels:26s} {row['ms']:7.2f} {row['ms'] / ref:9.2f}x")


if __name__ == "__main__":
    main()
