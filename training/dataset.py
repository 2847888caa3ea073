"""Training pairs (M0, M_t) from a folder of 4D sequences, with augmentation and a batch sampler.

An item is ``P`` material points sampled area-uniformly on the rest mesh M0 (frame 0) and the
positions of the same points on a frame M_t of the same sequence (barycentric coordinates carry
over, since the topology is shared), both in the normalised frame of M0 (design section 6: the
bounding-box centre of M0 at the origin, its longest side 1).

Items are addressed by an integer key: sequence ``key % S`` of the ``S`` sequences, with every
random choice (frame, surface points, augmentation) drawn from ``default_rng([seed, key])``. An
item is therefore a pure function of its key: the same on every worker, rank and rerun, which is
what makes a resumed training continue exactly and a validation set fixed. ``PairBatchSampler``
hands out keys ``epoch * S + i`` (a fresh permutation of the sequences per epoch, split between
the DDP ranks), so every epoch visits each sequence once with new frames and augmentation.

Loaded sequences are cached per process (LRU, bounded in megabytes), so an ``.npz`` is read once
per worker as long as the data fit the budget (the generated sets are a few MB per sequence).
"""

from __future__ import annotations

import json
import math
import os
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from scipy.spatial import ConvexHull, QhullError, cKDTree

from neurok_core.errors import SequenceError
from neurok_core.geometry import (
    Normalization,
    SurfaceSamples,
    face_areas,
    locate,
    vertex_islands,
)
from neurok_core.sequence import load_sequence

MANIFEST = "manifest.json"
RIGID_PART_CATEGORIES = ("articulated", "multibody")  # whose part labels are rigid bodies


@dataclass(frozen=True, kw_only=True)
class Augmentation:
    """Random similarity-plus-stretch applied to both frames before normalisation.

    ``A = R_x(a) R_y(b) R_z(theta) diag(s)``: a stretch ``s_i = exp(U(log lo, log hi))`` along
    each axis of the object, a rotation ``theta ~ U(0, 2 pi)`` about the up axis Z and small tilts
    ``a, b ~ U(-tilt, tilt)`` about X and Y (gravity stays roughly down). Both frames get the same
    ``A``, so correspondences are kept; the result is then re-normalised in M0's frame.

    Note: a stretch that is not uniform turns a rigid part motion ``R_j`` into the affine
    ``S R_j S^-1``, so the range is kept moderate (a lid lengthens by at most hi/lo while it turns).
    """

    rotate: bool = True
    max_tilt_deg: float = 10.0
    scale_range: tuple[float, float] = (0.8, 1.25)

    def __post_init__(self) -> None:
        lo, hi = self.scale_range
        if not 0.0 < lo <= hi:
            raise ValueError(f"scale_range must satisfy 0 < lo <= hi, got {self.scale_range}")
        if not 0.0 <= self.max_tilt_deg < 90.0:
            raise ValueError(f"max_tilt_deg must be in [0, 90), got {self.max_tilt_deg}")

    def sample(self, rng: np.random.Generator) -> np.ndarray:
        """A random linear map A (3, 3) float64 (points transform as ``x @ A.T``)."""
        lo, hi = self.scale_range
        stretch = np.exp(rng.uniform(math.log(lo), math.log(hi), size=3))  # (3,)
        theta = rng.uniform(0.0, 2.0 * math.pi) if self.rotate else 0.0
        tilt = math.radians(self.max_tilt_deg)
        a, b = rng.uniform(-tilt, tilt, size=2) if self.rotate else (0.0, 0.0)
        rotation = _rot(0, a) @ _rot(1, b) @ _rot(2, theta)  # (3, 3)
        return rotation * stretch[None, :]  # R diag(s)


def _rot(axis: int, angle: float) -> np.ndarray:
    """Rotation matrix (3, 3) by ``angle`` radians about coordinate axis 0, 1 or 2."""
    c, s = math.cos(angle), math.sin(angle)
    i, j = [k for k in range(3) if k != axis]
    m = np.eye(3)
    m[i, i], m[i, j], m[j, i], m[j, j] = c, -s, s, c
    return m


@dataclass(frozen=True)
class SequenceEntry:
    """One sequence file of a dataset folder (``family``/``category`` may be unknown: "")."""

    path: Path
    family: str
    category: str


@dataclass(frozen=True, eq=False)
class _Loaded:
    """A sequence as the sampler needs it: vertices (T, N, 3) float32, faces (F, 3) int64,
    the area CDF of the rest mesh (F,) float64, the rest normalisation, and the rest vertices
    that can be extreme under a linear map (H, 3) float64 (its convex hull's: the bounding box of
    ``hull @ A.T`` is that of all rest vertices, at a fraction of the cost)."""

    vertices: np.ndarray
    faces: np.ndarray
    area_cdf: np.ndarray
    normalization: Normalization
    hull: np.ndarray
    face_parts: np.ndarray  # (F,) int64 rigid part of each face, -1 where none
    face_islands: np.ndarray  # (F,) int64 loose part (connected faces) of each face

    @property
    def nbytes(self) -> int:
        arrays = (
            self.vertices,
            self.faces,
            self.area_cdf,
            self.hull,
            self.face_parts,
            self.face_islands,
        )
        return sum(a.nbytes for a in arrays)


def list_sequences(
    root: str | os.PathLike,
    *,
    families: Sequence[str] | None = None,
    categories: Sequence[str] | None = None,
) -> tuple[list[SequenceEntry], dict]:
    """The sequence files under ``root`` and the folder's manifest (``{}`` without one).

    With a ``manifest.json`` (written by ``python -m training.data generate``) its ``sequences``
    records are used; otherwise every ``*.npz`` below ``root`` (the family is the parent folder's
    name, the category is read from the file when a category filter asks for it).
    Raises ``SequenceError`` if the folder is missing or nothing matches the filters.
    """
    root = Path(root)
    if not root.is_dir():
        raise SequenceError(
            f"{root}: no such data folder; generate one with "
            "`python -m training.data generate --out DIR --count N`"
        )
    manifest: dict = {}
    entries: list[SequenceEntry] = []
    if (root / MANIFEST).is_file():
        try:
            manifest = json.loads((root / MANIFEST).read_text())
            records = manifest["sequences"]
            entries = [
                SequenceEntry(root / r["file"], r.get("family", ""), r.get("category", ""))
                for r in records
            ]
        except (ValueError, KeyError, TypeError) as exc:
            raise SequenceError(
                f"{root / MANIFEST}: unreadable manifest ({exc}); delete it to "
                "list the .npz files instead"
            ) from exc
        missing = [str(e.path) for e in entries if not e.path.is_file()]
        if missing:
            raise SequenceError(
                f"{root}: {len(missing)} files of the manifest are missing, e.g. "
                f"{missing[0]}; rerun the generate command to complete the set"
            )
    else:
        paths = sorted(p for p in root.rglob("*.npz") if not p.name.endswith(".tmp.npz"))
        entries = [SequenceEntry(p, p.parent.name if p.parent != root else "", "") for p in paths]
        if categories:
            entries = [SequenceEntry(e.path, e.family, _read_category(e.path)) for e in entries]
    if families:
        entries = [e for e in entries if e.family in set(families)]
    if categories:
        entries = [e for e in entries if e.category in set(categories)]
    if not entries:
        filters = (
            f" (families={families}, categories={categories})" if families or categories else ""
        )
        raise SequenceError(f"{root}: no sequence files{filters}")
    return entries, manifest


def _read_category(path: Path) -> str:
    try:
        with np.load(path, allow_pickle=False) as data:
            return str(data["category"])
    except (OSError, ValueError, KeyError) as exc:
        raise SequenceError(f"{path}: unreadable sequence file ({exc})") from exc


class PairDataset(torch.utils.data.Dataset):
    """(M0, M_t) point pairs of a folder of 4D sequences; ``dataset[key]`` for any key >= 0.

    Returns a dict of tensors: ``rest`` (P, 3) float32 and ``deformed`` (P, 3) float32 (point p
    of M_t is where point p of M0 went), ``parts`` (P,) int64 the rigid part of each point (its
    face's first vertex's label in articulated and multibody sequences; -1 elsewhere), and
    ``neighbors`` (P, K) int64, the K nearest other rest
    points of each point, when ``neighbors=K > 0`` (the model's rigidity term; computing it here
    moves the work into the loader workers).

    num_points: P. augmentation: ``None`` disables it (validation, the "no augmentation" ablation).
    rest_probability: chance that M_t is M0 itself (a "no motion" pair); otherwise t is uniform
    over the other frames. cache_mb: per-process budget of the LRU cache of loaded sequences.
    ``len(dataset)`` is the number of sequences S (one epoch).
    """

    def __init__(
        self,
        root: str | os.PathLike,
        *,
        num_points: int,
        augmentation: Augmentation | None = None,
        rest_probability: float = 0.05,
        neighbors: int = 0,
        seed: int = 0,
        families: Sequence[str] | None = None,
        categories: Sequence[str] | None = None,
        cache_mb: float = 3000.0,
    ) -> None:
        if num_points < 1:
            raise ValueError(f"num_points must be at least 1, got {num_points}")
        if not 0 <= neighbors < num_points:
            raise ValueError(f"neighbors must be in [0, {num_points - 1}], got {neighbors}")
        if not 0.0 <= rest_probability <= 1.0:
            raise ValueError(f"rest_probability must be in [0, 1], got {rest_probability}")
        self.root = Path(root)
        self.entries, self.manifest = list_sequences(root, families=families, categories=categories)
        self.num_points = int(num_points)
        self.augmentation = augmentation
        self.rest_probability = float(rest_probability)
        self.neighbors = int(neighbors)
        self.seed = int(seed)
        self.families = list(families or [])
        self.categories = list(categories or [])
        self.cache_bytes = int(cache_mb * 1e6)
        self._cache: OrderedDict[int, _Loaded] = OrderedDict()
        self._cached_bytes = 0

    def __len__(self) -> int:
        return len(self.entries)

    # ------------------------------------------------------------------ loading
    def _load(self, index: int) -> _Loaded:
        hit = self._cache.get(index)
        if hit is not None:
            self._cache.move_to_end(index)
            return hit
        seq = load_sequence(self.entries[index].path)
        faces = seq.faces.astype(np.int64)  # (F, 3)
        cdf = np.cumsum(face_areas(seq.vertices[0], faces))  # (F,)
        if not cdf[-1] > 0.0:
            raise SequenceError(f"{self.entries[index].path}: the rest mesh has zero area")
        rest = seq.vertices[0].astype(np.float64)  # (N, 3)
        face_parts = np.full(len(faces), -1, dtype=np.int64)
        if seq.category in RIGID_PART_CATEGORIES:  # parts are rigid bodies there
            face_parts = seq.parts.astype(np.int64)[faces[:, 0]]
        norm = Normalization.from_vertices(rest)
        face_islands = vertex_islands(rest, faces)[faces[:, 0]]  # (F,)
        item = _Loaded(seq.vertices, faces, cdf, norm, _hull(rest), face_parts, face_islands)
        self._cache[index] = item
        self._cached_bytes += item.nbytes
        while self._cached_bytes > self.cache_bytes and len(self._cache) > 1:
            _, old = self._cache.popitem(last=False)
            self._cached_bytes -= old.nbytes
        return item

    # ------------------------------------------------------------------ items
    def sequence_index(self, key: int) -> int:
        return int(key) % len(self.entries)

    def __getitem__(self, key: int) -> dict[str, torch.Tensor]:
        key = int(key)
        if key < 0:
            raise IndexError(f"keys are non-negative, got {key}")
        seq = self._load(self.sequence_index(key))
        rng = np.random.default_rng([self.seed, key])
        frames = seq.vertices.shape[0]
        if frames < 2 or rng.random() < self.rest_probability:
            t = 0
        else:
            t = int(rng.integers(1, frames))
        samples = _sample(seq.area_cdf, self.num_points, rng)
        rest = locate(seq.vertices[0], seq.faces, samples)  # (P, 3) float64
        deformed = locate(seq.vertices[t], seq.faces, samples)  # (P, 3)
        if self.augmentation is None:
            norm = seq.normalization
        else:
            transform = self.augmentation.sample(rng)  # (3, 3)
            rest, deformed = rest @ transform.T, deformed @ transform.T
            norm = Normalization.from_vertices(seq.hull @ transform.T)
        rest, deformed = norm.apply(rest), norm.apply(deformed)
        item = {
            "rest": torch.from_numpy(rest.astype(np.float32)),
            "deformed": torch.from_numpy(deformed.astype(np.float32)),
            "parts": torch.from_numpy(seq.face_parts[samples.face_ids]),  # (P,) -1: none
            "islands": torch.from_numpy(seq.face_islands[samples.face_ids]),  # (P,)
        }
        if self.neighbors:
            item["neighbors"] = torch.from_numpy(nearest_others(rest, self.neighbors))
        return item

    def summary(self) -> dict:
        """What the checkpoint records about this data: folder, counts, generator settings."""
        m = self.manifest
        per_family: dict[str, int] = {}
        per_category: dict[str, int] = {}
        for e in self.entries:
            per_family[e.family or "?"] = per_family.get(e.family or "?", 0) + 1
            per_category[e.category or "?"] = per_category.get(e.category or "?", 0) + 1
        return {
            "folder": str(self.root.resolve()),
            "sequences": len(self.entries),
            "per_family": dict(sorted(per_family.items())),
            "per_category": dict(sorted(per_category.items())),
            "filters": {"families": self.families, "categories": self.categories},
            "manifest": {
                k: m[k]
                for k in (
                    "generator_version",
                    "split",
                    "seed",
                    "frames",
                    "created",
                    "bytes_on_disk",
                )
                if k in m
            },
        }


def _hull(points: np.ndarray) -> np.ndarray:
    """Vertices (H, 3) of the convex hull of ``points`` (N, 3); all points if it is flat."""
    try:
        return points[ConvexHull(points).vertices]
    except (QhullError, ValueError):
        return points


def _sample(area_cdf: np.ndarray, count: int, rng: np.random.Generator) -> SurfaceSamples:
    """Area-uniform barycentric samples from a precomputed area CDF (Osada et al. 2002, eq. 1:
    face with probability area / total, then (1 - s, s (1 - r2), s r2) with s = sqrt(r1)).

    The draw of ``neurok_core.geometry.sample_surface``, with the face areas computed once per
    sequence instead of once per item."""
    face_ids = np.searchsorted(area_cdf, rng.random(count) * area_cdf[-1], side="right")
    face_ids = np.minimum(face_ids, len(area_cdf) - 1)  # (P,)
    s = np.sqrt(rng.random(count))  # (P,)
    r2 = rng.random(count)  # (P,)
    return SurfaceSamples(face_ids, np.stack([1.0 - s, s * (1.0 - r2), s * r2], axis=1))


def nearest_others(points: np.ndarray, k: int) -> np.ndarray:
    """Indices (P, k) int64 of the ``k`` nearest other points of each of ``points`` (P, 3).

    The same neighbourhoods as ``neurok_core.model.losses.knn_indices`` (the point itself is
    excluded), computed with a k-d tree.
    """
    _, idx = cKDTree(points).query(points, k=k + 1)  # (P, k + 1)
    is_self = idx == np.arange(len(points))[:, None]  # (P, k + 1)
    # A coincident twin can come before the point itself; then drop the farthest instead.
    is_self[~is_self.any(axis=1), -1] = True
    return idx[~is_self].reshape(len(points), k).astype(np.int64)


class PairBatchSampler(torch.utils.data.Sampler[list[int]]):
    """Endless batches of item keys for one rank, resumable at any batch.

    The key stream of epoch e is ``e * S + perm_e``, ``perm_e`` a permutation of the S sequences
    seeded by (seed, e); rank r of W takes ``perm_e[r::W]`` cut to ``S // W`` keys, so the ranks
    see disjoint sequences and equal counts. Batch b is items ``b * B .. (b + 1) * B - 1`` of the
    rank's concatenated stream; ``start_batch`` skips ahead without replaying.
    """

    def __init__(
        self,
        num_sequences: int,
        batch_size: int,
        *,
        rank: int = 0,
        world_size: int = 1,
        seed: int = 0,
        start_batch: int = 0,
    ) -> None:
        if num_sequences < world_size:
            raise SequenceError(
                f"{num_sequences} sequences cannot feed {world_size} ranks; "
                "generate more data or use fewer processes"
            )
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self.num_sequences = num_sequences
        self.batch_size = batch_size
        self.rank, self.world_size = rank, world_size
        self.seed = seed
        self.start_batch = start_batch
        self.per_epoch = num_sequences // world_size

    def _epoch_keys(self, epoch: int) -> np.ndarray:
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
        perm = torch.randperm(self.num_sequences, generator=g).numpy()  # (S,)
        mine = perm[self.rank :: self.world_size][: self.per_epoch]  # (S // W,)
        return epoch * self.num_sequences + mine

    def __iter__(self) -> Iterator[list[int]]:
        position = self.start_batch * self.batch_size
        epoch, offset = divmod(position, self.per_epoch)
        keys = self._epoch_keys(epoch)[offset:]
        while True:
            while len(keys) < self.batch_size:
                epoch += 1
                keys = np.concatenate([keys, self._epoch_keys(epoch)])
            yield [int(k) for k in keys[: self.batch_size]]
            keys = keys[self.batch_size :]
