"""The simulated motion as a rig: the skinned space's bones, their motion per frame, the weights.

A skinned kinematic space (design section 10) moves every vertex by dual-quaternion blending of
B rigid bone motions with fixed weights, so its result is exactly a skeleton animation:

    x_i(t) = DLB_i(t) applied to x_i(0),    DLB_i(t) = DLB(w_i1..w_iK; M_b(t) for b in bones_i)

with M_b(t): x -> R_b(t) x + t_b(t) a rigid motion in the caller's frame (metres, the mesh's
coordinates), already composed with the bone's rest correction (M_b(0) is the identity) and
``bones_i`` / ``w_i`` the vertex's K heaviest bones and their weights (summing to one). A DCC's
armature with one root bone per engine bone, its head at the bone's centre, dual-quaternion
("preserve volume") skinning and these weights plays the same motion; :meth:`BoneRig.skin` is
the reference it is checked against.

Files: :meth:`BoneRig.arrays` go into the result ``.npz`` (prefix ``rig_``);
:meth:`BoneRig.save_json` writes a plain JSON any tool can read (bones, per-frame transforms,
sparse weights).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .errors import NeuROKError

RIG_FORMAT = "neurok-rig"
RIG_VERSION = 1
ARRAY_PREFIX = "rig_"
BLENDS = ("dqs", "lbs")  # dual-quaternion (Preserve Volume) or linear blend skinning


def bone_name(index: int) -> str:
    """The name of bone ``index`` in every file and in the Blender armature."""
    return f"NeuROK.{index:03d}"


@dataclass
class BoneRig:
    """heads: (B, 3) bone centres at rest; rotations: (T, B, 4) unit quaternions (w, x, y, z);
    translations: (T, B, 3): bone b moves a rest point x to R_b x + t_b at frame t, in the
    caller's frame (float64); vertex_bones: (N, K) int32 bone of each vertex's K weights;
    vertex_weights: (N, K) float32, rows summing to 1 (zeros where a vertex has fewer bones)."""

    heads: np.ndarray
    rotations: np.ndarray
    translations: np.ndarray
    vertex_bones: np.ndarray
    vertex_weights: np.ndarray
    blend: str = "dqs"

    def __post_init__(self) -> None:
        if self.blend not in BLENDS:
            raise NeuROKError(f"rig blend must be one of {', '.join(BLENDS)}, got {self.blend!r}")

    @property
    def num_bones(self) -> int:
        return int(self.heads.shape[0])

    @property
    def num_frames(self) -> int:
        return int(self.rotations.shape[0])

    @property
    def names(self) -> list[str]:
        return [bone_name(b) for b in range(self.num_bones)]

    def matrices(self, frame: int) -> np.ndarray:
        """(B, 4, 4) homogeneous transforms of the bones at ``frame``."""
        out = np.zeros((self.num_bones, 4, 4))
        out[:, :3, :3] = quat_to_matrix(self.rotations[frame])
        out[:, :3, 3] = self.translations[frame]
        out[:, 3, 3] = 1.0
        return out

    def skin(self, rest: np.ndarray, frame: int) -> np.ndarray:
        """Vertices (N, 3) float64 of ``rest`` (N, 3) at ``frame``: dual-quaternion linear
        blending of the bones with the vertex weights, each vertex's DQs brought to the
        hemisphere of its heaviest bone (as the engine decodes its vertices)."""
        rest = np.asarray(rest, dtype=np.float64)
        if self.blend == "lbs":
            moved = np.einsum("bij,nj->nbi", quat_to_matrix(self.rotations[frame]), rest)
            moved = moved + self.translations[frame][None]  # (N, B, 3)
            w = self.vertex_weights.astype(np.float64)
            picked = moved[np.arange(len(rest))[:, None], self.vertex_bones]  # (N, K, 3)
            return (w[..., None] * picked).sum(1)
        real = self.rotations[frame]  # (B, 4)
        dual = 0.5 * quat_mul(
            np.concatenate([np.zeros((len(real), 1)), self.translations[frame]], 1), real
        )
        idx, w = self.vertex_bones, self.vertex_weights.astype(np.float64)  # (N, K)
        r, d = real[idx], dual[idx]  # (N, K, 4)
        pivot = r[np.arange(len(idx)), w.argmax(1)]  # (N, 4)
        signed = np.where((r * pivot[:, None]).sum(-1) < 0, -w, w)  # (N, K)
        br, bd = (signed[..., None] * r).sum(1), (signed[..., None] * d).sum(1)  # (N, 4)
        norm = np.linalg.norm(br, axis=1, keepdims=True)
        br, bd = br / norm, bd / norm
        rotated = quat_apply(br, rest)
        conj = br * np.array([1.0, -1.0, -1.0, -1.0])
        t = 2.0 * quat_mul(bd, conj)[:, 1:]
        return rotated + t

    def arrays(self) -> dict[str, np.ndarray]:
        """The arrays to store in a result ``.npz`` (keys prefixed ``rig_``)."""
        return {
            ARRAY_PREFIX + "heads": self.heads.astype(np.float64),
            ARRAY_PREFIX + "rotations": self.rotations.astype(np.float64),
            ARRAY_PREFIX + "translations": self.translations.astype(np.float64),
            ARRAY_PREFIX + "vertex_bones": self.vertex_bones.astype(np.int32),
            ARRAY_PREFIX + "vertex_weights": self.vertex_weights.astype(np.float32),
            ARRAY_PREFIX + "blend": np.str_(self.blend),
        }

    @classmethod
    def from_arrays(cls, data) -> BoneRig | None:
        """The rig in ``data`` (a mapping such as an opened ``.npz``), or None if it has none."""
        names = getattr(data, "files", None) or list(data.keys())
        if ARRAY_PREFIX + "heads" not in names:
            return None
        return cls(
            heads=np.asarray(data[ARRAY_PREFIX + "heads"]),
            rotations=np.asarray(data[ARRAY_PREFIX + "rotations"]),
            translations=np.asarray(data[ARRAY_PREFIX + "translations"]),
            vertex_bones=np.asarray(data[ARRAY_PREFIX + "vertex_bones"]),
            vertex_weights=np.asarray(data[ARRAY_PREFIX + "vertex_weights"]),
            blend=str(data[ARRAY_PREFIX + "blend"]) if ARRAY_PREFIX + "blend" in names else "dqs",
        )

    def to_json(self, times: np.ndarray | None = None) -> dict[str, Any]:
        """A plain description: ``bones`` (name, head), ``frames`` (per frame: time and, per bone,
        ``[qw, qx, qy, qz, tx, ty, tz]``), ``weights`` (per vertex: [[bone, weight], ...])."""
        keep = self.vertex_weights > 0
        weights = [
            [[int(b), round(float(w), 6)] for b, w in zip(bones[k], ws[k], strict=True)]
            for bones, ws, k in zip(self.vertex_bones, self.vertex_weights, keep, strict=True)
        ]
        frames = []
        for t in range(self.num_frames):
            pose = np.concatenate([self.rotations[t], self.translations[t]], 1)  # (B, 7)
            entry: dict[str, Any] = {"bones": np.round(pose, 9).tolist()}
            if times is not None:
                entry["time"] = float(times[t])
            frames.append(entry)
        return {
            "format": RIG_FORMAT,
            "version": RIG_VERSION,
            "convention": "x' = R(q) x + t, q = (w, x, y, z), metres in the mesh's frame; "
            + _BLEND_WORDS[self.blend],
            "blend": self.blend,
            "bones": [
                {"name": n, "head": [float(c) for c in h]}
                for n, h in zip(self.names, self.heads, strict=True)
            ],
            "frames": frames,
            "weights": weights,
        }

    def save_json(self, path: str | os.PathLike, times: np.ndarray | None = None) -> Path:
        """Write :meth:`to_json` atomically."""
        path = Path(path)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(self.to_json(times)), encoding="utf-8")
        os.replace(tmp, path)
        return path

    @classmethod
    def load_json(cls, path: str | os.PathLike) -> BoneRig:
        """Read a file written by :meth:`save_json`."""
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
            if data.get("format") != RIG_FORMAT:
                raise ValueError(f"format {data.get('format')!r} is not {RIG_FORMAT!r}")
            heads = np.array([b["head"] for b in data["bones"]], dtype=np.float64).reshape(-1, 3)
            poses = np.array([f["bones"] for f in data["frames"]], dtype=np.float64)  # (T, B, 7)
            k = max((len(w) for w in data["weights"]), default=1)
            bones = np.zeros((len(data["weights"]), k), dtype=np.int32)
            weights = np.zeros((len(data["weights"]), k), dtype=np.float32)
            for i, row in enumerate(data["weights"]):
                for j, (b, w) in enumerate(row):
                    bones[i, j], weights[i, j] = b, w
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise NeuROKError(f"{path}: not a readable NeuROK rig ({exc})") from exc
        blend = data.get("blend", "dqs")
        return cls(heads, poses[..., :4], poses[..., 4:], bones, weights, blend)


_BLEND_WORDS = {
    "dqs": "vertices blend their bones by dual-quaternion skinning",
    "lbs": "vertices blend their bones by linear blend skinning",
}


# -- quaternions in NumPy (w, x, y, z), float64 ---------------------------------------------------
def quat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton products (..., 4) of a and b (..., 4)."""
    aw, av = a[..., :1], a[..., 1:]
    bw, bv = b[..., :1], b[..., 1:]
    w = aw * bw - (av * bv).sum(-1, keepdims=True)
    v = aw * bv + bw * av + np.cross(av, bv)
    return np.concatenate([w, v], -1)


def quat_apply(q: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Rotate points p (..., 3) by unit quaternions q (..., 4)."""
    w, v = q[..., :1], q[..., 1:]
    return p + 2.0 * np.cross(v, np.cross(v, p) + w * p)


def quat_to_matrix(q: np.ndarray) -> np.ndarray:
    """(..., 3, 3) rotation matrices of unit quaternions (..., 4)."""
    w, x, y, z = np.moveaxis(q, -1, 0)
    return np.stack(
        [
            np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
            np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
            np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1),
        ],
        -2,
    )


def quats_from_matrices(m: np.ndarray) -> np.ndarray:
    """:func:`quat_from_matrix` over a stack of rotations (..., 3, 3) -> (..., 4), vectorised
    (the same branch of Shepperd's method for each, w >= 0)."""
    m = np.asarray(m, dtype=np.float64)
    shape = m.shape[:-2]
    m = m.reshape(-1, 3, 3)
    trace = m[:, 0, 0] + m[:, 1, 1] + m[:, 2, 2]
    diag = np.stack([trace, m[:, 0, 0], m[:, 1, 1], m[:, 2, 2]], 1)
    k = diag.argmax(1)
    q = np.zeros((len(m), 4))
    w = k == 0
    r = 0.5 * np.sqrt(np.maximum(1.0 + trace[w], 0.0))
    q[w, 0] = r
    q[w, 1] = (m[w, 2, 1] - m[w, 1, 2]) / (4 * r)
    q[w, 2] = (m[w, 0, 2] - m[w, 2, 0]) / (4 * r)
    q[w, 3] = (m[w, 1, 0] - m[w, 0, 1]) / (4 * r)
    for kk in (1, 2, 3):
        sel = k == kk
        if not sel.any():
            continue
        i, j, l = kk - 1, kk % 3, (kk + 1) % 3
        mm = m[sel]
        s = 0.5 * np.sqrt(np.maximum(1.0 + mm[:, i, i] - mm[:, j, j] - mm[:, l, l], 0.0))
        q[sel, 1 + i] = s
        q[sel, 0] = (mm[:, l, j] - mm[:, j, l]) / (4 * s)
        q[sel, 1 + j] = (mm[:, j, i] + mm[:, i, j]) / (4 * s)
        q[sel, 1 + l] = (mm[:, l, i] + mm[:, i, l]) / (4 * s)
    q = np.where(q[:, :1] < 0, -q, q)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    return q.reshape(*shape, 4)


def quat_from_matrix(m: np.ndarray) -> np.ndarray:
    """The unit quaternion (4,) (w >= 0) of a rotation matrix (3, 3) (Shepperd's method: the
    largest of w, x, y, z is taken from the diagonal, the others from the off-diagonals)."""
    m = np.asarray(m, dtype=np.float64)
    trace = np.trace(m)
    diag = np.array([trace, m[0, 0], m[1, 1], m[2, 2]])
    k = int(diag.argmax())
    if k == 0:
        w = 0.5 * np.sqrt(max(1.0 + trace, 0.0))
        q = [
            w,
            (m[2, 1] - m[1, 2]) / (4 * w),
            (m[0, 2] - m[2, 0]) / (4 * w),
            (m[1, 0] - m[0, 1]) / (4 * w),
        ]
    else:
        i, j, l = k - 1, k % 3, (k + 1) % 3
        s = 0.5 * np.sqrt(max(1.0 + m[i, i] - m[j, j] - m[l, l], 0.0))
        q = np.zeros(4)
        q[1 + i] = s
        q[0] = (m[l, j] - m[j, l]) / (4 * s)
        q[1 + j] = (m[j, i] + m[i, j]) / (4 * s)
        q[1 + l] = (m[l, i] + m[i, l]) / (4 * s)
    q = np.asarray(q, dtype=np.float64)
    q = q / np.linalg.norm(q)
    return -q if q[0] < 0 else q
