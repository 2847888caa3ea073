"""Random meshes and conditions for fuzzing ``neurok simulate``, deterministic by seed.

``fuzz_case(seed)`` draws one run: a mesh of 4 to 5,000 vertices and 1 mm to 1 km (a grid, a
box, a sphere, a tetrahedron, a cylinder or two parts; stretched, turned, moved off the origin),
spoilt as real files are (duplicate faces, degenerate faces, vertices no face uses, seams of
coincident vertices), written as OBJ, PLY or STL, and the command line's conditions (forces up to
1e6 N on anchors in and out of range, pins, stiffness, damping, gravity, a ground, initial
velocities, drags, the mass, the frame rate). ``FuzzCase.write`` puts the mesh in a folder and
returns the arguments after ``neurok simulate``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import trimesh

MIN_VERTICES, MAX_VERTICES = 4, 5_000
MIN_SIZE, MAX_SIZE = 1e-3, 1e3  # metres
MAX_FORCE = 1e6  # newtons
SEAM_FACES = 40  # a seam moves at most this many faces onto copies of their corners
SPOILT_VERTICES = 3 * SEAM_FACES + 6  # the most vertices spoiling adds (seam, loose, degenerate)


@dataclass(frozen=True)
class FuzzCase:
    """One fuzzed run. vertices (N, 3) float64 and faces (F, 3) int64 as the file holds them;
    file_vertices: the vertex count a reader must give back (for an STL, its distinct
    corners, which ``vertices`` then are); options: the conditions after ``--out``."""

    seed: int
    family: str
    suffix: str  # ".obj", ".ply" or ".stl"
    vertices: np.ndarray
    faces: np.ndarray
    file_vertices: int
    options: tuple[str, ...]
    frames: int

    def write(self, folder: Path, out_suffix: str = ".npz") -> list[str]:
        """Write the mesh into ``folder``; the arguments of ``neurok simulate`` (mesh, --out,
        the conditions)."""
        mesh = Path(folder) / f"fuzz{self.seed}{self.suffix}"
        WRITERS[self.suffix](mesh, self.vertices, self.faces)
        out = Path(folder) / f"fuzz{self.seed}{out_suffix}"
        return [str(mesh), "--out", str(out), *self.options]

    def describe(self) -> str:
        """A line that names the case (for a failure's message)."""
        size = float(np.ptp(self.vertices, axis=0).max()) if len(self.vertices) else 0.0
        return (
            f"seed {self.seed}: {self.family}{self.suffix}, {self.file_vertices} vertices,"
            f" {len(self.faces)} faces, size {size:.3g} m, options {' '.join(self.options)}"
        )


def fuzz_case(seed: int) -> FuzzCase:
    """The run of ``seed`` (the same on every machine: numpy's PCG64 and trimesh's own shapes)."""
    rng = np.random.default_rng(seed)
    # the shape's vertices; the spoiling below adds at most SPOILT_VERTICES
    top = MAX_VERTICES - SPOILT_VERTICES
    target = int(round(np.exp(rng.uniform(np.log(MIN_VERTICES), np.log(top)))))
    family = str(rng.choice(list(SHAPES)))
    vertices, faces = SHAPES[family](target, rng)
    vertices = _placed(vertices, rng)
    vertices, faces = _spoilt(vertices, faces, rng)
    suffix = str(rng.choice([".obj", ".obj", ".ply", ".stl"]))
    if suffix == ".stl":
        vertices, faces = _stl_corners(vertices, faces)
    frames = int(rng.integers(2, 25))
    options = _conditions(vertices, faces, len(vertices), frames, rng)
    return FuzzCase(seed, family, suffix, vertices, faces, len(vertices), options, frames)


def _stl_corners(vertices: np.ndarray, faces: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The vertices an STL of this mesh holds: its faces' corners in float32, one per distinct
    position in order of first appearance (loose vertices are lost; coincident ones weld)."""
    corners = vertices[faces].astype(np.float32).astype(np.float64).reshape(-1, 3)
    _, first, inverse = np.unique(corners, axis=0, return_index=True, return_inverse=True)
    rank = np.empty(len(first), dtype=np.int64)
    rank[np.argsort(first)] = np.arange(len(first))
    return corners[np.sort(first)], rank[inverse.reshape(-1)].reshape(-1, 3)


# -- shapes --------------------------------------------------------------------------------------


def _grid(target: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """A sheet of nx x ny vertices (about ``target``), flat or rippled."""
    aspect = np.exp(rng.uniform(np.log(0.25), np.log(4.0)))
    nx = max(2, int(round(np.sqrt(target * aspect))))
    ny = max(2, int(round(target / nx)))
    x, y = np.meshgrid(np.linspace(0, 1, nx), np.linspace(0, ny / nx, ny), indexing="ij")
    z = rng.choice([0.0, 0.05]) * np.sin(6 * x) * np.cos(4 * y)
    vertices = np.stack([x.ravel(), y.ravel(), z.ravel()], 1)
    a = (np.arange(nx - 1)[:, None] * ny + np.arange(ny - 1)[None]).ravel()
    faces = np.concatenate(
        [np.stack([a, a + ny, a + 1], 1), np.stack([a + 1, a + ny, a + ny + 1], 1)]
    )
    return vertices, faces


def _box(target: int, rng) -> tuple[np.ndarray, np.ndarray]:
    mesh = trimesh.creation.box()
    while len(mesh.vertices) * 4 <= target:
        mesh = mesh.subdivide()
    return np.asarray(mesh.vertices), np.asarray(mesh.faces)


def _sphere(target: int, rng) -> tuple[np.ndarray, np.ndarray]:
    level = 0
    while level < 4 and 10 * 4 ** (level + 1) + 2 <= target:
        level += 1
    mesh = trimesh.creation.icosphere(subdivisions=level)
    return np.asarray(mesh.vertices), np.asarray(mesh.faces)


def _tetrahedron(target: int, rng) -> tuple[np.ndarray, np.ndarray]:
    vertices = np.array([[0.0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]])
    return vertices, np.array([[0, 2, 1], [0, 1, 3], [0, 3, 2], [1, 2, 3]])


def _cylinder(target: int, rng) -> tuple[np.ndarray, np.ndarray]:
    sections = int(np.clip(target // 2, 3, 256))
    mesh = trimesh.creation.cylinder(radius=0.2, height=1.0, sections=sections)
    return np.asarray(mesh.vertices), np.asarray(mesh.faces)


def _two_parts(target: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """Two loose parts side by side (a box and a sphere), touching or apart."""
    a_vertices, a_faces = _box(target // 2, rng)
    b_vertices, b_faces = _sphere(target // 2, rng)
    gap = rng.choice([0.0, 0.5, 3.0])
    b_vertices = 0.5 * b_vertices + [1.0 + gap, 0.0, 0.0]
    return np.concatenate([a_vertices, b_vertices]), np.concatenate(
        [a_faces, b_faces + len(a_vertices)]
    )


SHAPES = {
    "grid": _grid,
    "box": _box,
    "sphere": _sphere,
    "tetrahedron": _tetrahedron,
    "cylinder": _cylinder,
    "parts": _two_parts,
}


def _placed(vertices: np.ndarray, rng) -> np.ndarray:
    """Scaled to a size of 1 mm to 1 km, stretched up to 10:1, turned and moved off the origin."""
    size = np.exp(rng.uniform(np.log(MIN_SIZE), np.log(MAX_SIZE)))
    v = vertices - vertices.mean(0)
    v = v * np.exp(rng.uniform(np.log(0.3), np.log(3.0), size=3))
    if rng.random() < 0.5:
        v = v @ _rotation(rng).T
    v = v * (size / max(float(np.ptp(v, axis=0).max()), 1e-300))
    return v + rng.normal(0.0, rng.choice([0.0, 1.0, 10.0]) * size, size=3)


def _rotation(rng) -> np.ndarray:
    q, r = np.linalg.qr(rng.normal(size=(3, 3)))
    return q * np.sign(np.diag(r))


def _spoilt(vertices: np.ndarray, faces: np.ndarray, rng) -> tuple[np.ndarray, np.ndarray]:
    """The mesh with, each at random: duplicate faces (either winding), degenerate faces (a
    repeated corner, or three collinear corners about a new vertex), a seam of coincident
    vertices, and vertices no face uses inserted anywhere in the list (some far away, some on
    top of a used vertex), so that loose and used vertices interleave."""
    vertices, faces = vertices.copy(), faces.copy()
    if rng.random() < 0.4:
        picked = faces[rng.integers(0, len(faces), size=rng.integers(1, 6))]
        faces = np.concatenate([faces, picked[:, ::-1] if rng.random() < 0.5 else picked])
    if rng.random() < 0.4:
        face = faces[rng.integers(len(faces))]
        a, b = int(face[0]), int(face[1])
        vertices = np.concatenate([vertices, 0.5 * (vertices[[a]] + vertices[[b]])])
        degenerate = [[a, a, b], [a, len(vertices) - 1, b]]  # a repeated corner, zero area
        faces = np.concatenate([faces, degenerate])
    if rng.random() < 0.3:  # a seam: some faces move onto copies of their corners
        count = min(max(1, len(faces) // 10), SEAM_FACES)
        chosen = rng.choice(len(faces), size=count, replace=False)
        corners = np.unique(faces[chosen])
        renumber = {int(c): len(vertices) + i for i, c in enumerate(corners)}
        vertices = np.concatenate([vertices, vertices[corners]])
        faces[chosen] = np.vectorize(renumber.get)(faces[chosen])
    if rng.random() < 0.4:
        size = float(np.ptp(vertices, axis=0).max())
        count = int(rng.integers(1, 6))
        extra = vertices.mean(0) + rng.normal(0.0, rng.choice([0.5, 100.0]) * size, (count, 3))
        extra[0] = vertices[rng.integers(len(vertices))]  # a duplicate of a used vertex
        vertices, faces = _inserted(vertices, faces, extra, rng)
    return vertices, faces


def _inserted(vertices, faces, extra, rng) -> tuple[np.ndarray, np.ndarray]:
    """``extra`` (E, 3) put at random places in the vertex list, the faces renumbered."""
    total = len(vertices) + len(extra)
    slots = np.sort(rng.choice(total, size=len(extra), replace=False))
    kept = np.setdiff1d(np.arange(total), slots)  # new index of each old vertex
    out = np.empty((total, 3))
    out[kept], out[slots] = vertices, extra
    return out, kept[faces]


# -- conditions ----------------------------------------------------------------------------------


def _conditions(vertices, faces, count: int, frames: int, rng) -> tuple[str, ...]:
    """The command line's conditions of one run, in and out of what the engine accepts."""
    low, high = vertices.min(0), vertices.max(0)
    size = float((high - low).max())
    used = np.unique(faces)

    def anchor() -> str:
        """A used vertex mostly; sometimes any index (a loose one, or past the end) or a point."""
        draw = rng.random()
        if draw < 0.7:
            return str(int(rng.choice(used)))
        if draw < 0.8:
            return str(int(rng.integers(0, count + 3)))
        spread = rng.choice([0.5, 20.0])  # inside the object's box, or far outside it
        point = 0.5 * (low + high) + rng.uniform(-spread, spread, 3) * size
        return ",".join(_num(c) for c in point)

    def vector(scale: float) -> str:
        return ",".join(_num(c) for c in rng.normal(size=3) * scale)

    options = ["--frames", str(frames), "--quiet"]
    mass = 1.0
    if rng.random() < 0.3:
        mass = 10.0 ** rng.uniform(-3, 4)
        options += ["--mass", _num(mass)]
    # the push that moves the object its own size in one frame at 24 fps: the loads the engine
    # accepts lie below a few times this (``dynamics.limits``)
    sizes_per_frame = mass * size * 24.0**2
    for _ in range(int(rng.choice([0, 1, 1, 2, 3]))):
        if rng.random() < 0.6:  # near what the engine takes, either side of its limit
            strength = min(MAX_FORCE, sizes_per_frame * 10.0 ** rng.uniform(-4.0, 1.0))
        else:
            strength = MAX_FORCE * 10.0 ** rng.uniform(-9.0, 0.0)
        force = f"{anchor()}:{vector(1.0)}:{_num(strength)}"
        if rng.random() < 0.3:  # a frame range, now and then past the animation's end
            start = int(rng.integers(0, frames - 1))
            end = int(rng.integers(start + 1, frames + (5 if rng.random() < 0.2 else 1)))
            force += f":{start}-{end}"
        options += ["--force", force]
    if rng.random() < 0.4:
        draw = rng.random()
        if draw < 0.6:
            pins = rng.choice(used, size=min(len(used), int(rng.integers(1, 6))), replace=False)
            options += ["--pin", ",".join(str(int(p)) for p in pins)]
        elif draw < 0.9:
            height = low[2] + rng.choice([0.0, 0.1, 0.5, 1.2]) * (high[2] - low[2])
            options += ["--pin-below", _num(height)]
        else:
            options += ["--pin", str(count + int(rng.integers(0, 3)))]  # out of range
    if rng.random() < 0.5:
        options += ["--stiffness", _num(rng.choice([0.0, 10.0 ** rng.uniform(-2, 2)]))]
    if rng.random() < 0.5:
        options += ["--damping", _num(rng.choice([0.0, 10.0 ** rng.uniform(-3, 1)]))]
    draw = rng.random()
    if draw < 0.3:
        options += ["--no-gravity"]
    elif draw < 0.6:
        options += ["--gravity", vector(10.0 ** rng.uniform(-2, 2))]
    if rng.random() < 0.4:  # below the object, touching it, or through it (a refusal)
        options += ["--ground", _num(low[2] - rng.choice([0.5, 0.01, 0.0, -0.3]) * size)]
        if rng.random() < 0.5:
            options += ["--friction", _num(rng.uniform(0.0, 2.0))]
    if rng.random() < 0.15:
        options += ["--velocity", f"{anchor()}:{vector(size * 10.0 ** rng.uniform(-2, 2))}"]
    if rng.random() < 0.15:
        target = 0.5 * (low + high) + rng.normal(size=3) * size
        frame = int(rng.integers(1, frames + 2))
        options += ["--drag", f"{anchor()}:{','.join(_num(c) for c in target)}:{frame}"]
    if rng.random() < 0.15:
        options += ["--fps", _num(rng.choice([6.0, 30.0, 120.0]))]
    return tuple(options)


def _num(value: float) -> str:
    """A float as the command line takes it (any exponent, negative numbers included)."""
    return f"{float(value):.6g}"


# -- files ---------------------------------------------------------------------------------------


def write_obj(path: Path, vertices: np.ndarray, faces: np.ndarray) -> None:
    lines = [f"v {x!r} {y!r} {z!r}" for x, y, z in vertices.tolist()]
    lines += [f"f {a + 1} {b + 1} {c + 1}" for a, b, c in faces.tolist()]
    path.write_text("\n".join(lines) + "\n")


def write_ply(path: Path, vertices: np.ndarray, faces: np.ndarray) -> None:
    header = [
        "ply",
        "format ascii 1.0",
        f"element vertex {len(vertices)}",
        "property double x",
        "property double y",
        "property double z",
        f"element face {len(faces)}",
        "property list uchar int vertex_indices",
        "end_header",
    ]
    body = [f"{x!r} {y!r} {z!r}" for x, y, z in vertices.tolist()]
    body += [f"3 {a} {b} {c}" for a, b, c in faces.tolist()]
    path.write_text("\n".join(header + body) + "\n")


def write_stl(path: Path, vertices: np.ndarray, faces: np.ndarray) -> None:
    """Binary STL: a zero normal and three float32 corners per facet."""
    corners = vertices[faces].astype(np.float32)  # (F, 3, 3)
    records = [struct.pack("<12fH", 0.0, 0.0, 0.0, *tri.ravel().tolist(), 0) for tri in corners]
    path.write_bytes(b"\0" * 80 + struct.pack("<I", len(faces)) + b"".join(records))


WRITERS = {".obj": write_obj, ".ply": write_ply, ".stl": write_stl}


if __name__ == "__main__":  # python tests/fuzz_meshes.py SEED FOLDER: a case to reproduce
    import sys

    seed, folder = int(sys.argv[1]), Path(sys.argv[2])
    folder.mkdir(parents=True, exist_ok=True)
    case = fuzz_case(seed)
    print(case.describe())
    print(" ".join([".venv/bin/neurok", "simulate", *case.write(folder)]))
