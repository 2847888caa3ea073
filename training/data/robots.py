"""A dev evaluation set from real assets: the articulated robots shipped in ``pybullet_data``.

    python -m training.data.robots --out DIR [--frames 32] [--seed 0] [--per-robot 2]

Each robot of ``ROBOTS`` is loaded with pybullet in DIRECT mode with a fixed base, its visual
shapes (``getVisualShapeData``: meshes loaded with trimesh, scaled; boxes, spheres, cylinders and
capsules built with ``trimesh.creation``) are gathered per link in the link's URDF frame, and the
robot is posed by forward kinematics (``resetJointState`` then ``getLinkStates``: the world frame
of each link) along smooth random joint trajectories within the joint limits
(``trajectories.joint_trajectory``: minimum-jerk moves; continuous joints spin). Frame 0 is the
rest pose (every joint at 0, clipped into its limits).

Output per sequence: the 4D format of design section 5 with category "articulated",
source "pybullet_data:<urdf path>", parts = link index + 1 per vertex (0 is the fixed base, so no
label is -1). Meshes are welded (duplicate positions merged), zero-area triangles dropped, and
robots above ``max_vertices`` are simplified by vertex clustering per link (vertices snapped to
a grid whose cell is chosen by bisection so the total fits). ``closed`` is True only when every
link surface is watertight and coherently oriented. A ``manifest.json`` lists every file with
its robot, vertex, face, link and joint counts.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pybullet as p
import pybullet_data
import trimesh
from scipy.spatial.transform import Rotation

from neurok_core.errors import MeshError
from neurok_core.sequence import Sequence4D, save_sequence

from .elastic import is_closed_oriented
from .trajectories import joint_trajectory


@dataclass(frozen=True)
class RobotAsset:
    """A URDF inside ``pybullet_data``, the rotation (xyz Euler, rad) that makes it Z-up and the
    scale that makes it life-size (pybullet's ``globalScaling``)."""

    name: str
    urdf: str
    up: tuple[float, float, float] = (0.0, 0.0, 0.0)
    scale: float = 1.0


ROBOTS = (
    RobotAsset("kuka_iiwa", "kuka_iiwa/model.urdf"),
    RobotAsset("franka_panda", "franka_panda/panda.urdf"),
    RobotAsset("xarm6", "xarm/xarm6_robot.urdf"),
    RobotAsset("xarm6_gripper", "xarm/xarm6_with_gripper.urdf"),
    RobotAsset("r2d2", "r2d2.urdf"),
    RobotAsset("humanoid", "humanoid/humanoid.urdf", up=(np.pi / 2, 0.0, 0.0), scale=0.25),
    RobotAsset("husky", "husky/husky.urdf"),
    RobotAsset("a1", "a1/a1.urdf"),
    RobotAsset("aliengo", "aliengo/aliengo.urdf"),
    RobotAsset("laikago", "laikago/laikago_toes_zup.urdf"),
    RobotAsset("mini_cheetah", "mini_cheetah/mini_cheetah.urdf"),
    RobotAsset("minitaur", "quadruped/minitaur.urdf"),
    RobotAsset("racecar", "racecar/racecar.urdf"),
    RobotAsset("bike", "bicycle/bike.urdf"),
    RobotAsset("pr2_gripper", "pr2_gripper.urdf"),
    RobotAsset("pendulum5", "pendulum5.urdf"),
)

MAX_VERTICES = 20_000


@contextlib.contextmanager
def _silence_native_output() -> Iterator[None]:
    """Mute pybullet's C-level prints (URDF warnings) by redirecting file descriptors 1 and 2."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, devnull):
            os.close(fd)


def _pose_matrix(pos, quat_xyzw) -> np.ndarray:
    """4x4 rigid transform from a position and a pybullet (x, y, z, w) quaternion."""
    m = np.eye(4)
    m[:3, :3] = Rotation.from_quat(quat_xyzw).as_matrix()
    m[:3, 3] = pos
    return m


def _primitive(geom: int, dims) -> trimesh.Trimesh | None:
    """A primitive visual shape centred on its frame (None when it has no extent).

    pybullet's dims: box full extents; sphere (radius,); cylinder and capsule (length, radius).
    """
    needed = {p.GEOM_BOX: dims[:3], p.GEOM_SPHERE: dims[:1], p.GEOM_CYLINDER: dims[:2]}
    if min(needed.get(geom, dims[1:2])) <= 0:
        return None
    if geom == p.GEOM_BOX:
        return trimesh.creation.box(extents=dims[:3])
    if geom == p.GEOM_SPHERE:
        return trimesh.creation.icosphere(subdivisions=2, radius=dims[0])
    if geom == p.GEOM_CYLINDER:
        return trimesh.creation.cylinder(radius=dims[1], height=dims[0], sections=24)
    if geom == p.GEOM_CAPSULE:
        return trimesh.creation.capsule(height=dims[0], radius=dims[1], count=[12, 12])
    raise MeshError(f"unsupported visual geometry type {geom}")


def _load_mesh(path: str, cache: dict) -> trimesh.Trimesh:
    if path not in cache:
        if not os.path.isfile(path):
            raise MeshError(f"visual mesh {path} is missing")
        mesh = trimesh.load(path, force="mesh", process=False)
        cache[path] = trimesh.Trimesh(mesh.vertices, mesh.faces, process=True)  # weld seams
    return cache[path]


@dataclass
class LinkGeometry:
    """The visual surface of one link in its URDF frame: vertices (n, 3), faces (m, 3)."""

    link: int  # pybullet link index, -1 for the base
    vertices: np.ndarray
    faces: np.ndarray


def link_geometry(body: int, client: int) -> list[LinkGeometry]:
    """Gather every visual shape of ``body`` per link, in the link's URDF frame."""
    cache: dict = {}
    per_link: dict[int, list[trimesh.Trimesh]] = {}
    for shape in p.getVisualShapeData(body, physicsClientId=client):
        link, geom, dims, filename, pos, orn = shape[1], shape[2], shape[3], shape[4], *shape[5:7]
        if geom == p.GEOM_MESH:
            mesh = _load_mesh(filename.decode(), cache).copy()
            mesh.apply_scale(np.asarray(dims[:3]))
        elif geom == p.GEOM_PLANE:
            continue
        else:
            mesh = _primitive(geom, dims)
            if mesh is None:
                continue
        mesh.apply_transform(_pose_matrix(pos, orn))
        per_link.setdefault(link, []).append(mesh)
    out = []
    for link in sorted(per_link):
        merged = trimesh.util.concatenate(per_link[link])
        out.append(LinkGeometry(link, np.asarray(merged.vertices), np.asarray(merged.faces)))
    return out


def cluster_vertices(
    vertices: np.ndarray, faces: np.ndarray, cell: float
) -> tuple[np.ndarray, np.ndarray]:
    """Vertex clustering: snap vertices to a grid of ``cell`` metres, average each cell's members.

    Returns (vertices (m, 3), faces (k, 3)) without collapsed or duplicate triangles.
    """
    keys = np.floor(vertices / cell).astype(np.int64)  # (n, 3)
    _, label, counts = np.unique(keys, axis=0, return_inverse=True, return_counts=True)
    label = label.reshape(-1)
    centres = np.zeros((len(counts), 3))
    np.add.at(centres, label, vertices)
    centres /= counts[:, None]
    f = label[faces]  # (F, 3)
    f = f[(f[:, 0] != f[:, 1]) & (f[:, 1] != f[:, 2]) & (f[:, 0] != f[:, 2])]
    _, first = np.unique(np.sort(f, axis=1), axis=0, return_index=True)
    f = f[np.sort(first)]
    used, f = np.unique(f, return_inverse=True)
    return centres[used], f.reshape(-1, 3)


def _drop_small_faces(v: np.ndarray, f: np.ndarray, min_area: float):
    area = 0.5 * np.linalg.norm(np.cross(v[f[:, 1]] - v[f[:, 0]], v[f[:, 2]] - v[f[:, 0]]), axis=1)
    f = f[area > min_area]
    used, f = np.unique(f, return_inverse=True)
    return v[used], f.reshape(-1, 3)


def simplify_links(links: list[LinkGeometry], max_vertices: int) -> list[LinkGeometry]:
    """Cluster every link with one grid cell, the largest-detail cell that fits the budget."""
    total = sum(len(g.vertices) for g in links)
    if total <= max_vertices:
        return links
    allv = np.concatenate([g.vertices for g in links])
    hi = float(np.linalg.norm(allv.max(0) - allv.min(0)))  # one cell: certainly fits
    lo = 0.0
    best = None
    for _ in range(24):
        cell = 0.5 * (lo + hi) if lo > 0 else hi / 64.0
        out = [LinkGeometry(g.link, *cluster_vertices(g.vertices, g.faces, cell)) for g in links]
        if sum(len(g.vertices) for g in out) <= max_vertices:
            best, hi = out, cell
        else:
            lo = cell
        if lo > 0 and hi / lo < 1.05:
            break
    if best is None:
        raise MeshError(f"cannot simplify the robot below {max_vertices} vertices")
    return [g for g in best if len(g.faces)]


@dataclass
class LoadedRobot:
    """A robot in a pybullet client: movable joints, their limits, its link surfaces."""

    asset: RobotAsset
    client: int
    body: int
    joints: np.ndarray  # (J,) pybullet joint indices
    lower: np.ndarray  # (J,) -inf for continuous joints
    upper: np.ndarray  # (J,)
    links: list[LinkGeometry]

    @property
    def rest(self) -> np.ndarray:
        return np.clip(np.zeros(len(self.joints)), self.lower, self.upper)


def load_robot(asset: RobotAsset, *, max_vertices: int = MAX_VERTICES) -> LoadedRobot:
    """Connect a DIRECT client and load ``asset`` with a fixed base (disconnect with ``close``)."""
    path = os.path.join(pybullet_data.getDataPath(), asset.urdf)
    if not os.path.isfile(path):
        raise MeshError(f"{asset.urdf} is not in pybullet_data ({path})")
    with _silence_native_output():
        client = p.connect(p.DIRECT)
        orn = p.getQuaternionFromEuler(asset.up)
        body = p.loadURDF(
            path,
            [0, 0, 0],
            orn,
            useFixedBase=True,
            globalScaling=asset.scale,
            physicsClientId=client,
        )
    joints, lower, upper = [], [], []
    for j in range(p.getNumJoints(body, physicsClientId=client)):
        info = p.getJointInfo(body, j, physicsClientId=client)
        kind, lo, hi = info[2], info[8], info[9]
        if kind == p.JOINT_REVOLUTE and hi < lo:  # continuous: unlimited
            lo, hi = -np.inf, np.inf
        elif kind not in (p.JOINT_REVOLUTE, p.JOINT_PRISMATIC) or not hi > lo:
            continue  # fixed, spherical, unbounded slider or a zero range
        joints.append(j)
        lower.append(lo)
        upper.append(hi)
    links = simplify_links(link_geometry(body, client), max_vertices)
    scale = max(float(np.linalg.norm(np.ptp(g.vertices, axis=0))) for g in links)
    links = [
        LinkGeometry(g.link, *_drop_small_faces(g.vertices, g.faces, 1e-10 * scale**2))
        for g in links
    ]
    links = [g for g in links if len(g.faces)]
    return LoadedRobot(
        asset, client, body, np.array(joints, int), np.array(lower), np.array(upper), links
    )


def close(robot: LoadedRobot) -> None:
    p.disconnect(physicsClientId=robot.client)


def _link_frames(robot: LoadedRobot) -> dict[int, np.ndarray]:
    """World 4x4 frame of every link that has geometry (URDF link frames, not inertial ones)."""
    c, b = robot.client, robot.body
    frames = {}
    base_pos, base_orn = p.getBasePositionAndOrientation(b, physicsClientId=c)
    inertial = p.getDynamicsInfo(b, -1, physicsClientId=c)[3:5]  # base inertial frame
    frames[-1] = _pose_matrix(base_pos, base_orn) @ np.linalg.inv(_pose_matrix(*inertial))
    links = [g.link for g in robot.links if g.link >= 0]
    if links:
        states = p.getLinkStates(b, links, computeForwardKinematics=True, physicsClientId=c)
        for link, state in zip(links, states, strict=True):
            frames[link] = _pose_matrix(state[4], state[5])
    return frames


def pose_sequence(robot: LoadedRobot, q: np.ndarray) -> np.ndarray:
    """Vertices (T, N, 3) at joint positions q (T, J), links in ``robot.links`` order."""
    out = []
    for qt in q:
        for j, value in zip(robot.joints, qt, strict=True):
            p.resetJointState(robot.body, int(j), float(value), physicsClientId=robot.client)
        frames = _link_frames(robot)
        verts = [g.vertices @ frames[g.link][:3, :3].T + frames[g.link][:3, 3] for g in robot.links]
        out.append(np.concatenate(verts))
    return np.stack(out)


def robot_sequence(robot: LoadedRobot, rng: np.random.Generator, frames: int, name: str):
    """One Sequence4D of ``robot`` along a random smooth joint trajectory."""
    if len(robot.joints) == 0:
        raise MeshError(f"{robot.asset.name} has no movable joint")
    q = joint_trajectory(rng, robot.rest, robot.lower, robot.upper, frames)  # (T, J)
    verts = pose_sequence(robot, q)
    offsets = np.cumsum([0] + [len(g.vertices) for g in robot.links])
    faces = np.concatenate([g.faces + o for g, o in zip(robot.links, offsets, strict=False)])
    parts = np.concatenate([np.full(len(g.vertices), g.link + 1) for g in robot.links])
    return Sequence4D(
        vertices=verts.astype(np.float32),
        faces=faces.astype(np.int32),
        parts=parts.astype(np.int32),
        closed=all(is_closed_oriented(g.faces) for g in robot.links),
        category="articulated",
        source=f"pybullet_data:{robot.asset.urdf}",
        name=name,
    )


def build_robot_set(
    out_dir: str | os.PathLike,
    frames: int = 32,
    seed: int = 0,
    sequences_per_robot: int = 2,
    *,
    robots: tuple[RobotAsset, ...] = ROBOTS,
    max_vertices: int = MAX_VERTICES,
    progress: bool = True,
) -> dict:
    """Write ``sequences_per_robot`` sequences of each robot and a ``manifest.json``.

    Sequence k of a robot uses ``SeedSequence(seed, spawn_key=(crc32(name), k))``. Returns the
    manifest (also written to ``out_dir/manifest.json``).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    entries = []
    for asset in robots:
        robot = load_robot(asset, max_vertices=max_vertices)
        try:
            for k in range(sequences_per_robot):
                name = f"{asset.name}_{k:02d}"
                ss = np.random.SeedSequence(seed, spawn_key=(zlib.crc32(asset.name.encode()), k))
                seq = robot_sequence(robot, np.random.default_rng(ss), frames, name)
                save_sequence(seq, out / f"{name}.npz")
                entries.append(
                    {
                        "file": f"{name}.npz",
                        "name": name,
                        "robot": asset.name,
                        "source": seq.source,
                        "vertices": seq.num_vertices,
                        "faces": int(len(seq.faces)),
                        "links": len(robot.links),
                        "joints": int(len(robot.joints)),
                        "frames": seq.num_frames,
                        "closed": bool(seq.closed),
                    }
                )
                if progress:
                    print(f"{name}: {seq.num_vertices} vertices, {len(robot.links)} links")
        finally:
            close(robot)
    manifest = {
        "kind": "pybullet_data robots (dev evaluation set)",
        "frames": frames,
        "seed": seed,
        "sequences_per_robot": sequences_per_robot,
        "max_vertices": max_vertices,
        "count": len(entries),
        "sequences": entries,
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return manifest


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="output folder")
    ap.add_argument("--frames", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--per-robot", type=int, default=2, help="sequences per robot")
    ap.add_argument("--max-vertices", type=int, default=MAX_VERTICES)
    ap.add_argument("--robots", default="", help="comma-separated names (default: all)")
    args = ap.parse_args(argv)
    robots = ROBOTS
    if args.robots:
        known = {r.name: r for r in ROBOTS}
        unknown = [n for n in args.robots.split(",") if n not in known]
        if unknown:
            ap.error(f"unknown robots {unknown}; known: {sorted(known)}")
        robots = tuple(known[n] for n in args.robots.split(","))
    m = build_robot_set(
        args.out,
        args.frames,
        args.seed,
        args.per_robot,
        robots=robots,
        max_vertices=args.max_vertices,
    )
    print(f"wrote {m['count']} sequences to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
