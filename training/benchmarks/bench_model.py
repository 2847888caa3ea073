"""Speed of the NeuROK networks on this machine, per model preset.

    python -m training.benchmarks.bench_model [--presets tiny default] [--seconds 5] [--threads N]

Prints, per preset: the parameter count; training samples/s (forward + backward + Adam step on
random point pairs at the preset's ``num_points``, after warm-up); decoder throughput in query
points/s (no grad); and the cost of the derivatives the dynamics need for 512 query points:
``jacfwd`` of the decoded positions with respect to z, one JVP, and one nested JVP
(``D^2F[v, v]``). The numbers depend on the load of the machine and on ``torch.get_num_threads()``.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

import torch

from neurok_core.model import ModelConfig, NeuROKModel


def _rate(step: Callable[[], None], seconds: float, *, warmup: int = 2) -> tuple[float, float]:
    """(calls per wall-clock second, process CPU seconds per call) of ``step``, run for about
    ``seconds`` after ``warmup`` calls. CPU time per call is less sensitive to other processes
    than the wall-clock rate (with one thread, 1 / cpu time is the rate on an idle core)."""
    for _ in range(warmup):
        step()
    calls, start, cpu_start = 0, time.perf_counter(), time.process_time()
    while True:
        step()
        calls += 1
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return calls / elapsed, (time.process_time() - cpu_start) / calls


def random_pairs(batch: int, points: int, generator: torch.Generator) -> tuple:
    """Rest points in the unit box and a rotated, shifted, jittered copy: (B, P, 3) each."""
    rest = torch.rand(batch, points, 3, generator=generator) - 0.5
    angle = torch.rand(batch, 1, generator=generator)
    c, s = torch.cos(angle), torch.sin(angle)
    x, y, z = rest.unbind(-1)
    deformed = torch.stack((c * x - s * y, s * x + c * y, z), dim=-1) + 0.1
    deformed = deformed + 0.01 * torch.randn(rest.shape, generator=generator)
    return rest, deformed


def bench_preset(name: str, *, seconds: float, batch_size: int, queries: int) -> dict:
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    config = ModelConfig.preset(name)
    model = NeuROKModel(config)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    rest, deformed = random_pairs(batch_size, config.num_points, gen)

    def train_step() -> None:
        optimizer.zero_grad(set_to_none=True)
        model.loss(rest, deformed)["loss"].backward()
        optimizer.step()

    steps_per_s, cpu_per_step = _rate(train_step, seconds)
    result = {"preset": name, "parameters": model.num_parameters()}
    result["train_samples_per_s"] = steps_per_s * batch_size
    result["train_cpu_ms_per_sample"] = 1000.0 * cpu_per_step / batch_size

    model.eval()
    with torch.no_grad():
        shape = model.encode_shape(rest[:1])
        z = shape.mu_cond.clone()  # (1, k)
        query = torch.rand(1, queries, 3, generator=gen) - 0.5
        calls_per_s, _ = _rate(lambda: model.deform(z, shape, query), seconds / 2)
    result["decode_points_per_s"] = calls_per_s * queries

    q512 = query[:, :512]

    def positions(latent: torch.Tensor) -> torch.Tensor:
        return model.deform(latent, shape, q512)  # (1, 512, 3)

    direction = torch.randn(z.shape, generator=gen)

    def second_derivative() -> torch.Tensor:
        def tangent(latent: torch.Tensor) -> torch.Tensor:
            return torch.func.jvp(positions, (latent,), (direction,))[1]

        return torch.func.jvp(tangent, (z,), (direction,))[1]

    with torch.no_grad():
        for key, fn in (
            ("jacfwd_512_ms", lambda: torch.func.jacfwd(positions)(z)),
            ("jvp_512_ms", lambda: torch.func.jvp(positions, (z,), (direction,))),
            ("nested_jvp_512_ms", second_derivative),
        ):
            rate, _ = _rate(fn, seconds / 4, warmup=1)
            result[key] = 1000.0 / rate
    return result


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--presets", nargs="+", default=["tiny", "default"])
    parser.add_argument("--seconds", type=float, default=5.0, help="timed seconds per measurement")
    parser.add_argument("--batch-size", type=int, default=16, help="shapes per training step")
    parser.add_argument("--queries", type=int, default=4096, help="query points per decode")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads first")
    args = parser.parse_args(argv)
    if args.threads is not None:
        torch.set_num_threads(args.threads)

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, float32, CPU; "
        f"load average {load:.1f} on {os.cpu_count()} CPUs (other work slows every figure)"
    )
    results = []
    for name in args.presets:
        r = bench_preset(
            name, seconds=args.seconds, batch_size=args.batch_size, queries=args.queries
        )
        results.append(r)
        print(
            f"{name:>8}: {r['parameters']:>9,d} params | train {r['train_samples_per_s']:7.1f} "
            f"samples/s (batch {args.batch_size}; {r['train_cpu_ms_per_sample']:.1f} CPU "
            f"ms/sample) | decode {r['decode_points_per_s']:10,.0f} points/s | 512 points: "
            f"jacfwd {r['jacfwd_512_ms']:6.1f} ms, jvp {r['jvp_512_ms']:5.1f} ms, "
            f"nested jvp {r['nested_jvp_512_ms']:5.1f} ms"
        )
    return results


if __name__ == "__main__":
    main()
