"""Cost of skinning by loose part when a kinematic space is built, on meshes of many parts.

    python -m training.benchmarks.bench_skinning [--vertices 200000] [--parts 10 1000 20000]
        [--points 1024] [--clearance 0.0] [--repeat 3]

For each part count: ``--vertices`` points scattered in that many small clusters (each a loose
part, as leaves or bolts are), ``--points`` of them as skinning points; prints the seconds of
:func:`~neurok_core.skinning.blend_neighbors` (each vertex's 4 skinning points of its own part)
and, beside it, of the plain 4 nearest of all (what a one-part mesh costs), the minimum over
``--repeat`` runs. Also times :func:`~neurok_core.geometry.vertex_islands` on an icosphere
as a triangle soup (every vertex duplicated, welded back into one island).
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def _best(repeat: int, run, *args) -> float:
    """The least wall-clock seconds of ``run(*args)`` over ``repeat`` calls."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run(*args)
        times.append(time.perf_counter() - start)
    return min(times)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vertices", type=int, default=200_000)
    parser.add_argument("--parts", type=int, nargs="+", default=[10, 1000, 20000])
    parser.add_argument("--points", type=int, default=1024, help="skinning points")
    parser.add_argument("--clearance", type=float, default=0.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--sphere", type=int, default=7, help="icosphere subdivisions (soup)")
    args = parser.parse_args(argv)

    import trimesh

    from neurok_core.geometry import nearest_neighbors, vertex_islands
    from neurok_core.skinning import blend_neighbors

    rng = np.random.default_rng(0)
    for parts in args.parts:
        centers = rng.uniform(0.0, 1.0, (parts, 3))
        labels = rng.integers(0, parts, args.vertices)
        queries = centers[labels] + rng.normal(0.0, 0.002, (args.vertices, 3))
        pick = rng.choice(args.vertices, args.points, replace=False)
        points, point_labels = queries[pick], labels[pick]
        by_part = _best(
            args.repeat, blend_neighbors, points, point_labels, queries, labels, 4, args.clearance
        )
        plain = _best(args.repeat, nearest_neighbors, points, queries, 4)
        print(
            f"{args.vertices} vertices in {parts} parts, {args.points} skinning points: "
            f"by part {by_part:.2f} s, nearest of all {plain:.2f} s"
        )
    sphere = trimesh.creation.icosphere(subdivisions=args.sphere)
    soup = np.asarray(sphere.vertices)[np.asarray(sphere.faces)].reshape(-1, 3)
    faces = np.arange(len(soup)).reshape(-1, 3)
    seconds = _best(args.repeat, vertex_islands, soup, faces)
    count = len(np.unique(vertex_islands(soup, faces)))
    print(f"vertex_islands: {len(soup)} soup vertices -> {count} island(s) in {seconds:.2f} s")


if __name__ == "__main__":
    main()
