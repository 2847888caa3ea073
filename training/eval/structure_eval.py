"""How well :func:`~neurok_core.structure.find_structure` finds what moves how.

    python -m training.eval.structure_eval [--per-family 4] [--families laptop,door]
        [--seed 44] [--robots kuka_iiwa,r2d2] [--typing learned|geometry|both] [--out FILE]

Objects with known joints, built directly through the data generator's API
(``training.data.articulated.ARTICULATED``): every articulated family, ``--per-family``
objects each from the validation stream of ``--seed`` (``generate.sequence_rng(seed, "val",
i)``, so none is a training sequence), each at its rest pose, the generator's link of each
vertex the true part; optionally the pybullet robots of ``--robots`` at their rest pose (links
joined by fixed URDF joints are one true part). No pins: every part moves.

Figures (truth: the generator's joints; revolute and continuous -> "hinge", prismatic ->
"slider", each about its axis at the rest pose):

- **joint type accuracy**: each found part is given the true link holding most of its
  vertices; the found joints between parts of a true joint's two links are its candidates, the
  most confident one its prediction (none: "missing", wrong);
- **axis error** (degrees): the angle between a true hinge's or slider's axis and the predicted
  one's (as lines), where the prediction has an axis; the median over them;
- **parts ARI**: the adjusted Rand index (Hubert and Arabie 1985) of the found parts against
  the true links per vertex; ``bodies ARI``: the same with the parts that "fixed" joints join
  made one (:meth:`~neurok_core.structure.Structure.bodies`);
- **same-link joints fixed**: of the found joints between two parts of one true link, the share
  typed "fixed" (they are bolted together).

Prints a table by family and writes every object's record and the totals to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from dataclasses import dataclass

import numpy as np

from neurok_core.structure import Structure, find_structure

TRUE_TYPE = {"revolute": "hinge", "continuous": "hinge", "prismatic": "slider"}
# how much of the relative motion a joint type takes away (less: more): of several found joints
# between two bodies, the most constraining one decides how they move (a weld anywhere welds)
CONSTRAINT = {"fixed": 0, "hinge": 1, "slider": 1, "ball": 2, "contact": 3}


@dataclass(frozen=True)
class TrueJoint:
    """A joint of the truth: ``type`` ("hinge", "slider"), the links ``parent``, ``child``, the
    ``axis`` (3,) unit vector at the rest pose (world)."""

    type: str
    parent: int
    child: int
    axis: np.ndarray


@dataclass(frozen=True)
class Case:
    """One object with its truth: vertices (N, 3) metres at rest, faces (F, 3), links (N,)
    int64 the true part of each vertex, its true joints."""

    name: str
    family: str
    vertices: np.ndarray
    faces: np.ndarray
    links: np.ndarray
    joints: tuple[TrueJoint, ...]


def adjusted_rand_index(a: np.ndarray, b: np.ndarray) -> float:
    """The adjusted Rand index of two labellings ``a``, ``b`` (N,) int (Hubert and Arabie,
    "Comparing partitions", 1985): (sum_ij C(n_ij, 2) - E) / (0.5 (sum_i C(a_i, 2) +
    sum_j C(b_j, 2)) - E), E = sum_i C(a_i, 2) sum_j C(b_j, 2) / C(n, 2), with n_ij the
    contingency table and a_i, b_j its row and column sums. 1 for identical partitions (and
    for two trivial ones), about 0 for independent ones."""
    a, b = np.unique(a, return_inverse=True)[1], np.unique(b, return_inverse=True)[1]
    n = len(a)
    table = np.zeros((a.max() + 1, b.max() + 1))  # (A, B)
    np.add.at(table, (a, b), 1.0)

    def pairs(x):
        return float((x * (x - 1) / 2).sum())

    index = pairs(table)
    rows, cols = pairs(table.sum(1)), pairs(table.sum(0))
    expected = rows * cols / max(n * (n - 1) / 2, 1.0)
    top = 0.5 * (rows + cols) - expected
    if top == 0.0:  # both partitions trivial (one part each, or each vertex alone)
        return 1.0
    return (index - expected) / top


def line_angle(a: np.ndarray, b: np.ndarray) -> float:
    """Degrees between the lines along ``a`` and ``b`` (3,) (0 to 90)."""
    c = abs(float(np.dot(a, b))) / (np.linalg.norm(a) * np.linalg.norm(b))
    return float(np.degrees(np.arccos(min(c, 1.0))))


def articulated_cases(families, per_family: int, seed: int, stream: str = "val"):
    """:class:`Case` s of the articulated ``families`` (every one when empty), ``per_family``
    each from the generator's ``stream`` of ``seed``, at rest (module docstring)."""
    from training.data.articulated import ARTICULATED
    from training.data.generate import sequence_rng
    from training.data.primitives import rotation

    for name in families or sorted(ARTICULATED):
        for i in range(per_family):
            art = ARTICULATED[name](sequence_rng(seed, stream, i), 2)
            transforms = art.tree.link_transforms(art.rest[None])[0]  # (L, 4, 4)
            yaw = rotation((0.0, 0.0, 1.0), art.yaw)
            joints = tuple(
                TrueJoint(
                    TRUE_TYPE[j.kind],
                    j.parent,
                    j.child,
                    yaw @ transforms[j.parent, :3, :3] @ j.axis,
                )
                for j in art.tree.joints
            )
            vertices = art.pose(art.rest[None])[0]
            yield Case(f"{name}_{i}", name, vertices, art.faces, art.links, joints)


def robot_cases(names):
    """:class:`Case` s of the pybullet robots ``names`` at rest (module docstring): a link's
    true part is the link it hangs from by fixed URDF joints (the base: -1); each movable joint
    turns about (or slides along) its URDF axis in its child link's frame."""
    import pybullet as p

    from training.data.robots import ROBOTS, close, load_robot, pose_sequence

    for asset in (r for r in ROBOTS if r.name in names):
        robot = load_robot(asset)
        try:
            c, body = robot.client, robot.body
            vertices = pose_sequence(robot, robot.rest[None])[0]  # the joints reset to rest
            offsets = np.cumsum([0] + [len(g.vertices) for g in robot.links])
            faces = np.concatenate(
                [g.faces + o for g, o in zip(robot.links, offsets[:-1], strict=True)]
            )
            infos = [
                p.getJointInfo(body, j, physicsClientId=c)
                for j in range(p.getNumJoints(body, physicsClientId=c))
            ]
            moving = set(int(j) for j in robot.joints)

            def owner(link: int, infos=infos, moving=moving) -> int:
                while link >= 0 and link not in moving:  # up the fixed joints
                    link = int(infos[link][16])
                return link

            joints = []
            for j in sorted(moving):
                info = infos[j]
                frame = p.getLinkState(body, j, physicsClientId=c)[5]
                rot = np.asarray(p.getMatrixFromQuaternion(frame)).reshape(3, 3)
                axis = rot @ np.asarray(info[13], dtype=np.float64)
                kind = "prismatic" if info[2] == p.JOINT_PRISMATIC else "revolute"
                truth = TrueJoint(
                    TRUE_TYPE[kind], owner(int(info[16])), j, axis / np.linalg.norm(axis)
                )
                joints.append(truth)
            links = np.concatenate([np.full(len(g.vertices), owner(g.link)) for g in robot.links])
            yield Case(asset.name, "robot", vertices, faces, links, tuple(joints))
        finally:
            close(robot)


def evaluate_case(case: Case, typing: str = "learned", typer=None) -> dict:
    """The figures of one object (module docstring); ``typing``: the joints typed by ``typer``
    (default the bundled joint typer) in ``retype``'s mode "learned" (``find_structure``'s
    default) or "both", or by "geometry" alone (``find_structure(learned=False)``)."""
    started = time.perf_counter()
    learned = typing != "geometry"
    mode = typing if learned else "learned"
    structure = find_structure(case.vertices, case.faces, learned=learned, typer=typer, mode=mode)
    seconds = time.perf_counter() - started
    link_of = _part_links(structure, case.links)
    records = []
    for t in case.joints:
        pair = {t.parent, t.child}
        found = [
            j
            for j in structure.joints
            if {_link(link_of, j.part_a), _link(link_of, j.part_b)} == pair
        ]
        best = min(found, key=lambda j: (CONSTRAINT[j.type], -j.confidence)) if found else None
        record = {"truth": t.type, "predicted": best.type if best else "missing"}
        if best is not None and best.axis is not None:
            record["axis_error"] = line_angle(t.axis, np.asarray(best.axis))
        records.append(record)
    same = [
        j.type for j in structure.joints if j.part_b >= 0 and link_of[j.part_a] == link_of[j.part_b]
    ]
    return {
        "name": case.name,
        "family": case.family,
        "vertices": int(len(case.vertices)),
        "parts": len(structure.parts),
        "links": int(len(np.unique(case.links))),
        "joints": records,
        "same_link_joints": same,
        "parts_ari": adjusted_rand_index(structure.labels, case.links),
        "bodies_ari": adjusted_rand_index(structure.bodies(), case.links),
        "seconds": seconds,
    }


def _part_links(structure: Structure, links: np.ndarray) -> np.ndarray:
    """(P,) the true link holding most of each found part's vertices."""
    count = len(structure.parts)
    _, link = np.unique(links, return_inverse=True)
    table = np.zeros((count, link.max() + 1))
    np.add.at(table, (structure.labels, link), 1.0)
    return np.unique(links)[table.argmax(1)]


def _link(link_of: np.ndarray, part: int) -> int | None:
    return None if part < 0 else int(link_of[part])


def summarise(records: list[dict]) -> dict:
    """Totals over ``records``: joint type accuracy, median axis error (deg), mean ARIs, the
    same-link joints' fixed share, the confusion of true and predicted types."""
    joints = [j for r in records for j in r["joints"]]
    errors = [j["axis_error"] for j in joints if "axis_error" in j]
    same = [t for r in records for t in r["same_link_joints"]]
    return {
        "objects": len(records),
        "joints": len(joints),
        "type_accuracy": float(np.mean([j["truth"] == j["predicted"] for j in joints]))
        if joints
        else float("nan"),
        "axis_error_median": float(np.median(errors)) if errors else float("nan"),
        "axes_measured": len(errors),
        "parts_ari": float(np.mean([r["parts_ari"] for r in records])),
        "bodies_ari": float(np.mean([r["bodies_ari"] for r in records])),
        "same_link_fixed": float(np.mean([t == "fixed" for t in same])) if same else float("nan"),
        "same_link_joints": len(same),
        "seconds_median": float(np.median([r["seconds"] for r in records])),
        "confusion": dict(Counter(f"{j['truth']}->{j['predicted']}" for j in joints)),
    }


def table(records: list[dict]) -> str:
    """A text table of :func:`summarise` by family, then over all."""
    head = (
        f"{'family':16} {'obj':>3} {'joints':>6} {'type acc':>8} {'axis deg':>8} "
        f"{'parts ARI':>9} {'bodies ARI':>10} {'same fixed':>10}"
    )
    lines = [head, "-" * len(head)]
    groups = sorted({r["family"] for r in records}) + ["generated", "all"]
    for g in groups:
        chosen = [r for r in records if g in ("all", r["family"])]
        if g == "generated":  # the generator's objects, the robots left out
            chosen = [r for r in records if r["family"] != "robot"]
        s = summarise(chosen)
        lines.append(
            f"{g:16} {s['objects']:3d} {s['joints']:6d} {s['type_accuracy']:8.2f} "
            f"{s['axis_error_median']:8.1f} {s['parts_ari']:9.3f} {s['bodies_ari']:10.3f} "
            f"{s['same_link_fixed']:10.2f}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-family", type=int, default=4)
    parser.add_argument("--families", default="", help="comma-separated (default: all)")
    parser.add_argument("--seed", type=int, default=44)
    parser.add_argument("--robots", default="", help="comma-separated pybullet robot names")
    parser.add_argument("--out", default=None, help="records and totals (.json)")
    parser.add_argument(
        "--typing",
        choices=("learned", "geometry", "both"),
        default="learned",
        help="joint types: the bundled typer's where a joint is familiar to it "
        "(find_structure's default), geometry's alone (find_structure(learned=False)), or "
        "the typer's where it is surer than geometry (both)",
    )
    args = parser.parse_args(argv)
    families = [f for f in args.families.split(",") if f]
    cases = list(articulated_cases(families, args.per_family, args.seed))
    robots = [r for r in args.robots.split(",") if r]
    if robots:
        cases += list(robot_cases(robots))
    records = []
    for case in cases:
        records.append(evaluate_case(case, typing=args.typing))
        r = records[-1]
        print(
            f"{r['name']}: {r['parts']} parts / {r['links']} links, "
            + ", ".join(f"{j['truth']}->{j['predicted']}" for j in r["joints"])
            + f" ({r['seconds']:.2f} s)",
            file=sys.stderr,
        )
    print(table(records))
    totals = summarise(records)
    print("confusion:", json.dumps(totals["confusion"]))
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"args": vars(args), "totals": totals, "records": records}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
