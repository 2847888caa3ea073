"""How much of articulated objects' part motion a checkpoint captures.

    python -m training.eval.articulation --data data/val --checkpoint neurok_core/weights/default
        [--families door,laptop] [--per-family 3] [--samples 32] [--space skin_clearance=0.1]
        [--out articulation.json]

Chamfer distances average over the whole surface, so a model can score fairly well on them
while its doors barely turn. This measures the turning itself, on every sequence with labelled
rigid parts (articulated objects): the *moving part* is the labelled part that moves farthest;
its rotation in a frame is the angle of the best rigid fit of the part from frame 0 (degrees).
For the frame where the ground truth turns it most:

- ``truth``: that largest rotation;
- ``reconstructed``: the part's rotation when the model decodes the posterior mean of that frame
  (E_VAE on ``--points`` area-uniform surface samples of frame 0 and the same material points
  on that frame, conditioned on the object's kinematic-space shape code) onto the mesh vertices
  (as the kinematic space does: skinning), and ``error``: that decode's vertex RMSE against the
  frame, in object sizes;
- ``field``: the rotation of the same decode measured on the E_VAE samples that lie on the
  part's own faces instead of its vertices. The decoder is a continuous field, so where a part
  touches another one (a door in its frame) the vertices at its edges, which the field cannot
  tell from the other part's, turn less than the part's faces do: ``field`` well above
  ``reconstructed`` means the field has the motion and the vertices lose it, both low that the
  field itself is underfit;
- ``prior_median`` / ``prior_max``: the rotation over ``--samples`` draws of the prior
  p(z | M0), the shapes the kinematic space is built around (the dynamics stay near them);
- ``in_subspace``: the share of the frame's code offset from the rest latent, |W W^+ dz| / |dz|,
  that the object's active subspace W spans (what the dynamics can move along);
- ``latent_distance``: |z - mu_cond| of that code, against ``barrier_radius``, the radius
  beyond which the simulator's barrier pushes the state back (the prior's
  ``DynamicsSettings.barrier.prior_mass`` ball, or the rest latent's distance when that is larger).

A model that captures articulation reconstructs the rotation, its prior draws span it and its
subspace holds it. Prints a table per family (medians) and writes every record to ``--out``.
A sequence that cannot be read or whose mesh the engine refuses is reported and skipped.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

from neurok_core.metrics import best_rotations

from .report import jsonable


def rotation_angles(rest: np.ndarray, moved: np.ndarray) -> np.ndarray:
    """(T,) degrees of the best rigid motions' rotations taking ``rest`` (n, 3) to each of
    ``moved`` (T, n, 3) (``metrics.best_rotations``)."""
    rot = best_rotations(rest.astype(np.float64), moved.astype(np.float64))
    cos = (np.trace(rot, axis1=1, axis2=2) - 1.0) / 2.0
    return np.degrees(np.arccos(np.clip(cos, -1.0, 1.0)))


def rotation_angle(rest: np.ndarray, moved: np.ndarray) -> float:
    """Degrees of the best rigid motion's rotation taking ``rest`` (n, 3) to ``moved`` (n, 3)."""
    return float(rotation_angles(rest, moved[None])[0])


def moving_part(seq) -> np.ndarray | None:
    """Boolean mask (N,) of the labelled part that moves farthest, or None without two parts."""
    labels = np.asarray(seq.parts)
    ids = np.unique(labels[labels >= 0])
    if len(ids) < 2:
        return None
    reach = [np.abs(seq.vertices[:, labels == p] - seq.vertices[0, labels == p]).max() for p in ids]
    return labels == ids[int(np.argmax(reach))]


def measure(
    engine, seq, *, samples: int, points: int, seed: int, space_settings=None
) -> dict | None:
    """The record of one sequence (module docstring), or None when it has no moving part
    (``space_settings``: how the kinematic space is built, default ``SpaceSettings()``)."""
    import torch

    from neurok_core.dynamics.barrier import PriorBarrier
    from neurok_core.dynamics.settings import DEFAULT_SETTINGS
    from neurok_core.dynamics.system import LatentMap
    from neurok_core.geometry import locate, sample_surface

    part = moving_part(seq)
    if part is None:
        return None
    rest = seq.vertices[0].astype(np.float64)
    truth = rotation_angles(rest[part], seq.vertices[:, part])  # (T,)
    t = int(np.argmax(truth))
    space = engine.space(rest, seq.faces, settings=space_settings, cache_dir=False)
    model, norm = space.model, space.normalization
    # the same material points on both frames, as in training (barycentric samples)
    drawn = sample_surface(rest, seq.faces, points, np.random.default_rng(seed))
    to = dict(dtype=space.dtype, device=space.device)
    pts0 = torch.as_tensor(norm.apply(locate(rest, seq.faces, drawn)), **to)[None]
    ptst = torch.as_tensor(norm.apply(locate(seq.vertices[t], seq.faces, drawn)), **to)[None]
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        mu = model.encode_posterior(pts0, ptst, space.shape)[0][0]  # (k,)
        decoded = space.decode_vertices(mu[None])[0].double().cpu().numpy()
        field = model.deform(mu[None], space.shape, pts0)[0].double().cpu().numpy()  # (P, 3)
    on_part = part[np.asarray(seq.faces)[drawn.face_ids]].all(axis=1)  # samples on its faces
    field_turn = None  # (a part too small to hold three samples)
    if on_part.sum() >= 3:
        field_turn = rotation_angle(pts0[0].double().cpu().numpy()[on_part], field[on_part])
    with torch.no_grad():
        draws = space.mu_cond + torch.randn((samples, mu.shape[0]), generator=gen).to(**to)
        prior = space.decode_vertices(draws).double().cpu().numpy()  # (S, N, 3)
    dz = mu - space.z_rest
    w = space.W
    inside = w @ torch.linalg.lstsq(w, dz[:, None]).solution[:, 0]
    size = float((rest.max(0) - rest.min(0)).max())
    rotations = rotation_angles(rest[part], prior[:, part])  # (S,)
    latent = LatentMap(rest=space.z_rest, basis=space.W, prior_mean=space.mu_cond)
    return {
        "name": seq.name,
        "frame": t,
        "truth": float(truth[t]),
        "reconstructed": rotation_angle(rest[part], decoded[part]),
        "field": field_turn,
        "error": float(np.sqrt(((decoded - seq.vertices[t]) ** 2).sum(1).mean())) / size,
        "prior_median": float(np.median(rotations)),
        "prior_max": float(np.max(rotations)),
        "in_subspace": float(inside.norm() / dz.norm().clamp_min(1e-12)),
        "latent_distance": float((mu - space.mu_cond).norm()),
        "barrier_radius": PriorBarrier.build(
            latent, DEFAULT_SETTINGS.barrier.prior_mass, 1.0
        ).radius,
        "reduced_dims": int(space.reduced_dims),
    }


COLUMNS = (
    ("truth", "truth (deg)", "{:.0f}"),
    ("reconstructed", "reconstructed (deg)", "{:.0f}"),
    ("field", "field (deg)", "{:.0f}"),
    ("error", "decode RMSE", "{:.3f}"),
    ("prior_median", "prior median (deg)", "{:.0f}"),
    ("prior_max", "prior max (deg)", "{:.0f}"),
    ("in_subspace", "in subspace", "{:.2f}"),
    ("latent_distance", "latent distance", "{:.1f}"),
)


def _median(values: list) -> float | None:
    """The median of the values that are there (None: none is)."""
    present = [v for v in values if v is not None]
    return float(np.median(present)) if present else None


def summarise(records: list[dict]) -> dict[str, dict]:
    """Per family, the median of every column and the number of sequences."""
    families: dict[str, list[dict]] = {}
    for r in records:
        families.setdefault(r["family"], []).append(r)
    return {
        fam: {
            "sequences": len(rs),
            **{k: _median([r[k] for r in rs]) for k, _, _ in COLUMNS},
        }
        for fam, rs in sorted(families.items())
    }


def table(summary: dict[str, dict]) -> str:
    head = "| family | sequences | " + " | ".join(title for _, title, _ in COLUMNS) + " |"
    lines = [head, "|" + "---|" * (len(COLUMNS) + 2)]
    for fam, row in summary.items():
        cells = ["-" if row[k] is None else fmt.format(row[k]) for k, _, fmt in COLUMNS]
        lines.append(f"| {fam} | {row['sequences']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="folder of sequences (FAMILY/*.npz)")
    parser.add_argument("--checkpoint", default=None, help="default: the bundled model")
    parser.add_argument("--families", default="", help="comma-separated (default: all)")
    parser.add_argument("--per-family", type=int, default=3)
    parser.add_argument("--samples", type=int, default=32, help="prior draws per object")
    parser.add_argument("--points", type=int, default=2048, help="surface samples for E_VAE")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    parser.add_argument(
        "--space",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="override a SpaceSettings field, e.g. skin_clearance=0.1 (repeatable)",
    )
    parser.add_argument("--out", default=None, help="JSON file for every record")
    args = parser.parse_args(argv)
    if args.per_family < 1 or args.samples < 1 or args.points < 8:
        parser.error("--per-family and --samples must be >= 1, --points >= 8")

    import torch

    from neurok_core.api import NeuROK
    from neurok_core.errors import NeuROKError
    from neurok_core.sequence import load_sequence
    from neurok_core.space import SpaceSettings

    from ..options import parse_fields
    from .ik import find_sequences

    if args.threads:
        torch.set_num_threads(args.threads)
    wanted = {f for f in args.families.split(",") if f}
    try:
        space_settings = SpaceSettings(**parse_fields(SpaceSettings, args.space, "--space"))
    except (TypeError, ValueError) as exc:
        parser.error(str(exc))
    try:
        found = find_sequences(args.data)
        engine = NeuROK.load(args.checkpoint, device="cpu")
    except NeuROKError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    started, records, counts, skipped = time.perf_counter(), [], {}, []
    for family, path in found:
        if (wanted and family not in wanted) or counts.get(family, 0) >= args.per_family:
            continue
        try:
            seq = load_sequence(path)
            if seq.category != "articulated":
                continue
            record = measure(
                engine,
                seq,
                samples=args.samples,
                points=args.points,
                seed=args.seed,
                space_settings=space_settings,
            )
        except NeuROKError as exc:
            print(f"skipped {path}: {exc}", file=sys.stderr)
            skipped.append(str(path))
            continue
        if record is None:
            continue
        counts[family] = counts.get(family, 0) + 1
        records.append({"family": family, **record})
    if not records:
        print(f"error: no articulated sequence with labelled parts in {args.data}", file=sys.stderr)
        return 2
    finite = all(math.isfinite(v) for r in records for v in r.values() if isinstance(v, float))
    summary = summarise(records)
    print(f"{engine.checkpoint} on {args.data} (medians; angles of the moving part):")
    print(table(summary))
    if skipped:
        print(f"{len(skipped)} sequence(s) skipped (see above)")
    if args.out:
        payload = {
            "checkpoint": str(engine.checkpoint),
            "data": str(args.data),
            "samples": args.samples,
            "points": args.points,
            "space": args.space,
            "seconds": round(time.perf_counter() - started, 1),
            "skipped": skipped,
            "summary": summary,
            "records": records,
        }
        Path(args.out).write_text(json.dumps(jsonable(payload), indent=1, allow_nan=False))
    if not finite:
        print("error: some measurements are NaN (see the records)", file=sys.stderr)
    return 0 if finite else 1


if __name__ == "__main__":
    sys.exit(main())
