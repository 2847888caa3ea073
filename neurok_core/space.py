"""The kinematic space of one object: rest latent, active subspace, decoding to the full mesh.

Given a trained NeuROK and a mesh M0, the space holds

- the shape code of M0 (E_cond tokens and the prior mean ``mu_cond``: p(z | M0) = N(mu_cond, I));
- the **rest latent** ``z_rest``, the state that best decodes to M0 (the posterior mean of the
  identity deformation, refined by minimising ``sum_p |F(z)(p) - p|^2``), and the per-point
  **rest correction** ``D_rest^-1`` so that the state ``z_rest`` decodes *exactly* to M0:
  every decoded motion is ``D(z) o D(z_rest)^-1`` (dual quaternions; displacements subtract);
- the **active subspace** W (method.md, "Model reduction"; Constantine, "Active Subspaces", 2015):
  with the surrogate ``g(z) = || F(z)(P) - P ||_2`` (2-norm of the deformation field over the
  sample points P), ``C = E_{z ~ p(z|M0)} [grad g grad g^T]``; W = the top ``kq`` eigenvectors
  of C, ``kq`` the fewest that capture ``energy_fraction`` of the trace, capped by ``max_dims``.
  Reduced coordinates q give ``z(q) = z_rest + W q`` (q = 0 is the input shape);
- surface sample points with equal masses (area-uniform samples, so each stands for the same
  area) for the dynamics, and a denser set of skinning points whose dual quaternions are blended
  onto the mesh vertices (K nearest, inverse-distance weights; dual-quaternion linear blending),
  so the cost of a frame barely grows with the vertex count.

All decoding happens in the normalised frame of M0 (design section 6) and comes back in the
caller's (world) frame through :class:`~neurok_core.geometry.Normalization`.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from .dualquat import dq_apply, dq_conj, dq_mul, dq_skin, dq_to_rt, quat_apply
from .errors import MeshError
from .geometry import (
    Normalization,
    face_areas,
    farthest_point_subsample,
    locate,
    nearest_neighbors,
    sample_surface,
    validate_mesh,
    vertex_islands,
)
from .model import NeuROKModel
from .model.bones import blend_bones
from .optim import Adam
from .skinning import DQSkinning, blend_neighbors, row_matrix

CACHE_VERSION = 2
BONES_PER_VERTEX = 4  # a skinned space's vertices blend their 4 heaviest bones (a rig's usual)


@dataclass(frozen=True)
class SpaceSettings:
    """How a kinematic space is built (all have sensible defaults).

    encoder_points: surface points fed to E_cond (None = the model's training count).
    dynamics_points: S, the points whose decoded positions carry the mass in the dynamics.
    skinning_points: points whose dual quaternions are blended onto the vertices.
    blend_neighbors: K nearest skinning points per vertex, of its own island (loose part).
    skin_clearance: with dual quaternions, a vertex blends only skinning points at least this far
        (object sizes) from the mesh's other islands where its island has K of them (0: the
        nearest; :func:`~neurok_core.skinning.blend_neighbors`). Off by default: it helps a model
        whose field moves each part rigidly and hurts one whose field does not
        (``docs/experiments/evaluation.md``); kept as that lever, for such models.
    max_dims: cap on kq; energy_fraction: share of the active-subspace spectrum to keep.
    subspace_samples: prior samples for the active-subspace estimate.
    rest_steps: optimisation steps refining the rest latent (0: the posterior mean of no motion).
    subspace: "gradient" (the paper's scalar surrogate, the product's) or "jacobian"
        (E[J^T J], the vector variant, kept as the surrogate lever of the part-aware space's
        experiments, ``docs/experiments/part_aware_space.md``); seed: everything random in the
        space derives from it.
    bones_by_part: with a skinned decoder, a point blends only the bones placed on its own
        loose part of the mesh (where that part has any), so separate parts never share a bone.
    """

    encoder_points: int | None = None
    dynamics_points: int = 128
    skinning_points: int = 1024
    blend_neighbors: int = 4
    skin_clearance: float = 0.0
    max_dims: int = 8
    energy_fraction: float = 0.99
    subspace_samples: int = 64
    rest_steps: int = 60
    subspace: str = "gradient"
    seed: int = 0
    bones_by_part: bool = True

    def __post_init__(self):
        if self.subspace not in ("gradient", "jacobian"):
            raise ValueError(f"subspace must be 'gradient' or 'jacobian', got {self.subspace!r}")
        for name in ("dynamics_points", "skinning_points", "blend_neighbors", "max_dims"):
            if getattr(self, name) < 1:
                raise ValueError(f"SpaceSettings.{name} must be >= 1")
        if self.rest_steps < 0:
            raise ValueError("SpaceSettings.rest_steps must be >= 0")
        if not self.skin_clearance >= 0:
            raise ValueError("SpaceSettings.skin_clearance must be >= 0")


def _noop(*_args) -> None:
    return None


class KinematicSpace:
    """The learned kinematic space of one mesh (see the module docstring).

    vertices: (N, 3) rest vertices in the caller's frame (metres); faces: (F, 3).
    Tensors live on ``device`` in the model's dtype; ``W`` is (k, kq).
    """

    def __init__(
        self,
        model: NeuROKModel,
        vertices: np.ndarray,
        faces: np.ndarray,
        *,
        settings: SpaceSettings | None = None,
        on_status=_noop,
        on_progress=_noop,
        _state: dict | None = None,
        _valid: bool = False,
    ) -> None:
        # Inference only: frozen weights, so no decode builds a graph through the parameters.
        self.model = model.eval().requires_grad_(False)
        self.settings = settings or SpaceSettings()
        if not _valid:  # (build_space has checked them already)
            vertices, faces = validate_mesh(vertices, faces)
        self.vertices, self.faces = vertices, faces
        self.normalization = Normalization.from_vertices(self.vertices)
        param = next(model.parameters())
        self.device, self.dtype = param.device, param.dtype
        self._build(on_status, on_progress, _state)

    # ------------------------------------------------------------------ construction
    def _tensor(self, array) -> Tensor:
        return torch.as_tensor(np.asarray(array), dtype=self.dtype, device=self.device)

    def _build(self, on_status, on_progress, state: dict | None) -> None:
        s = self.settings
        rng = np.random.default_rng(s.seed)
        rest_n = self.normalization.apply(self.vertices)  # (N, 3) normalised
        self.rest_normalized = self._tensor(rest_n)
        enc_count = s.encoder_points or self.model.config.num_points
        areas = face_areas(self.vertices, self.faces)  # (F,)
        enc_samples = sample_surface(self.vertices, self.faces, enc_count, rng, areas=areas)
        encoder_points = self._tensor(locate(rest_n, self.faces, enc_samples))  # (P, 3)
        islands = vertex_islands(self.vertices, self.faces)  # (N,) loose part of each vertex
        faces = np.asarray(self.faces)
        self.vertex_islands = islands
        enc_islands = islands[faces[enc_samples.face_ids, 0]]  # (P,)

        # Dynamics points: well spread area-uniform samples (equal masses).
        pool = sample_surface(self.vertices, self.faces, 8 * s.dynamics_points, rng, areas=areas)
        pool_points = locate(rest_n, self.faces, pool)  # (8S, 3)
        keep = farthest_point_subsample(pool_points, s.dynamics_points, rng)
        self.dynamics_points = self._tensor(pool_points[keep])  # (S, 3) normalised
        skin = sample_surface(self.vertices, self.faces, s.skinning_points, rng, areas=areas)
        self.dynamics_islands = islands[faces[pool.face_ids[keep], 0]]  # (S,)
        skin_points = locate(rest_n, self.faces, skin)  # (Ks, 3)
        # Vertices blend the K nearest skinning points of their own island, inside it (away
        # from the other islands) where it has enough of them.
        k = min(s.blend_neighbors, len(skin_points))
        skin_islands = islands[faces[skin.face_ids, 0]]  # (Ks,)
        clearance = s.skin_clearance if self.dualquat else 0.0
        dist, idx = blend_neighbors(skin_points, skin_islands, rest_n, islands, k, clearance)
        spacing = float(np.median(nearest_neighbors(skin_points, skin_points, 2)[0][:, 1]))
        weights = 1.0 / (dist + 0.5 * spacing + 1e-12) ** 2  # (N, K)
        weights /= weights.sum(axis=1, keepdims=True)
        self.skinning_points = self._tensor(skin_points)
        self.blend_index = torch.as_tensor(idx, device=self.device)  # (N, K)
        self.blend_weights = self._tensor(weights)  # (N, K)
        if self.dualquat and not self.skinned:  # (a skinned space skins from its bones)
            self.skinning = DQSkinning(
                self.blend_index, self.blend_weights, self.rest_normalized, len(skin_points)
            )

        with torch.no_grad():
            on_status("encode", "encoding the shape")
            self.shape = self.model.encode_shape(encoder_points[None])  # tokens (1, T, C)
        self.mu_cond = self.shape.mu_cond[0]  # (k,)
        self.bone_islands = None
        if self.skinned:  # each bone centre is one of the encoder points
            nearest = torch.cdist(self.shape.centers[0], encoder_points).argmin(dim=1)
            self.bone_islands = enc_islands[nearest.cpu().numpy()]  # (nb,)

        self.rest_residual = float("nan")
        if state is not None:
            self.z_rest = self._tensor(state["z_rest"])
            self.W = self._tensor(state["W"])
            self.spectrum = self._tensor(state["spectrum"])
            self.covariance = self._tensor(state["covariance"])
            self.rest_residual = float(state.get("rest_residual", float("nan")))
        else:
            on_status("rest", "finding the rest state")
            self.z_rest = self._rest_latent(encoder_points, on_progress)
            on_status("subspace", "finding the active subspace")
            self.covariance = self._subspace_covariance(on_progress)
            self.W, self.spectrum = self.active_subspace(self.covariance)
        with torch.no_grad():
            if self.skinned:  # each bone's rest correction B_b(z_rest)^-1
                self.bone_rest_inverse = dq_conj(self.model.bones(self.z_rest[None], self.shape)[0])
            self.rest_inverse_skin = self._rest_inverse(self.skinning_points, skin_islands)
            self.rest_inverse_dyn = self._rest_inverse(self.dynamics_points, self.dynamics_islands)
            if self.skinned:
                self._bind_vertices_to_bones()

    def _bind_vertices_to_bones(self) -> None:
        """A skinned space's vertex weights over the bones: each vertex's blend of its skinning
        points' weights (so a vertex still draws only on its own loose part), its
        ``BONES_PER_VERTEX`` heaviest bones kept and renormalised. Every frame then skins the
        vertices from the B bone motions directly (one sparse product), and these weights are
        the vertex groups of a rig."""
        # on the CPU whatever the device (sparse CSR is missing on some, e.g. MPS)
        blend = row_matrix(
            self.blend_index.cpu(), self.blend_weights.cpu(), self.rest_inverse_skin.shape[0]
        )
        with warnings.catch_warnings():  # (torch calls its sparse CSR support "beta")
            warnings.simplefilter("ignore", UserWarning)
            mixed = blend @ self.rest_inverse_skin.cpu()  # (N, nb): its skinning points mixed
        mixed = mixed.to(self.device)
        k = min(BONES_PER_VERTEX, mixed.shape[1])
        weights, index = mixed.topk(k, dim=1)  # (N, k) each
        weights = weights / weights.sum(dim=1, keepdim=True).clamp_min(1e-30)
        self.vertex_bones, self.vertex_bone_weights = index, weights
        self.bone_skinning = DQSkinning(index, weights, self.rest_normalized, mixed.shape[1])

    def _rest_latent(self, points: Tensor, on_progress) -> Tensor:
        """z_rest = argmin_z sum_p |F(z)(p) - p|^2, from the posterior mean of no motion."""
        model, shape = self.model, self.shape
        with torch.no_grad():
            mu, _ = model.encode_posterior(points[None], points[None], shape)  # (1, k)
        z = mu[0].clone().requires_grad_(True)
        opt = Adam(z, lr=0.05)
        steps = self.settings.rest_steps
        best, best_z = math.inf, z.detach().clone()
        for step in range(max(steps, 1)):  # (with no steps, one pass measures the start)
            opt.zero_grad()
            moved = model.deform(z[None], shape, points[None])[0]  # (P, 3)
            loss = ((moved - points) ** 2).sum()
            if float(loss.detach()) < best:
                best, best_z = float(loss.detach()), z.detach().clone()
            if steps == 0:
                break
            loss.backward()
            opt.step()
            if step % 10 == 0:
                on_progress("rest", step / steps)
        self.rest_residual = math.sqrt(best / len(points))  # RMS, normalised units
        return best_z

    def _subspace_covariance(self, on_progress) -> Tensor:
        """C = E_{z ~ p(z|M0)}[grad g grad g^T] (or E[J^T J]) (k, k) over prior samples."""
        s = self.settings
        gen = torch.Generator(device="cpu").manual_seed(s.seed)
        k = self.mu_cond.shape[0]
        eps = torch.randn((s.subspace_samples, k), generator=gen).to(self.device, self.dtype)
        zs = self.mu_cond[None] + eps  # (M, k) prior samples
        pts = self.dynamics_points[None]  # (1, S, 3)
        chunk = 16
        C = torch.zeros((k, k), dtype=self.dtype, device=self.device)
        for start in range(0, len(zs), chunk):
            zc = zs[start : start + chunk]
            if s.subspace == "gradient":
                zc = zc.clone().requires_grad_(True)
                moved = self.model.deform(zc, self.shape, pts.expand(len(zc), -1, -1))
                g = torch.sqrt(((moved - pts) ** 2).sum(dim=(1, 2)) + 1e-12)  # (m,)
                (grad,) = torch.autograd.grad(g.sum(), zc)  # (m, k): samples are independent
                C += grad.T @ grad
            else:
                for z in zc:
                    J = torch.func.jacfwd(
                        lambda zz: self.model.deform(zz[None], self.shape, pts)[0]
                    )(z)  # (S, 3, k)
                    J = J.reshape(-1, k)
                    C += J.T @ J
            on_progress("subspace", min(1.0, (start + chunk) / len(zs)))
        return C.detach() / len(zs)

    def active_subspace(
        self, covariance: Tensor, within: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """W (k, kq) and the eigenvalues (descending) of the covariance C, kq the fewest that
        hold ``energy_fraction`` of the spectrum, capped by ``max_dims``.

        within: optional (k, m) orthonormal basis of a subspace of the latent to search in:
        then W = within V with V the top eigenvectors of within^T C within.
        """
        s = self.settings
        c = covariance.double()
        if within is not None:
            within = within.double()
            c = within.T @ c @ within  # (m, m)
        evals, evecs = torch.linalg.eigh(0.5 * (c + c.T))  # ascending
        evals, evecs = evals.flip(0).clamp_min(0), evecs.flip(1)
        if within is not None:
            evecs = within @ evecs  # (k, m)
        total = float(evals.sum())
        if total <= 0:
            kq = 1
        else:
            cumulative = torch.cumsum(evals, 0) / total
            kq = int((cumulative < s.energy_fraction).sum()) + 1
        kq = max(1, min(kq, s.max_dims, evecs.shape[1]))
        return evecs[:, :kq].to(self.dtype), evals.to(self.dtype)

    def with_subspace(self, W: Tensor, spectrum: Tensor) -> KinematicSpace:
        """A view of this space with another active subspace W (k, kq'): same mesh, shape code,
        rest state and skinning; reduced coordinates q' with z = z_rest + W q'."""
        view = object.__new__(KinematicSpace)
        view.__dict__.update(self.__dict__)
        view.W, view.spectrum = W.to(self.dtype), spectrum.to(self.dtype)
        return view

    def _rest_inverse(self, points: Tensor, islands: np.ndarray | None = None) -> Tensor:
        """What each point needs to decode its corrected motion (its "binding"): the inverse of
        its rest decoding, (Q, 8) DQs or (Q, 3) displacements; with a skinned decoder its
        skinning weights (Q, nb) (the rest correction is then per bone), over the bones of its
        own loose part (``islands`` (Q,); None: that of its nearest vertex) with
        ``bones_by_part``."""
        if self.skinned:
            decoder = self.model.decoder
            logits = decoder.skin.logits(points[None], self.shape.centers, self.shape.tokens)[0]
            if self.settings.bones_by_part:
                if islands is None:
                    rest = self.rest_normalized.cpu().numpy()
                    _, nearest = nearest_neighbors(rest, points.cpu().numpy(), 1)
                    islands = self.vertex_islands[nearest[:, 0]]
                own = torch.as_tensor(
                    np.asarray(islands)[:, None] == self.bone_islands[None], device=self.device
                )  # (Q, nb)
                own |= ~own.any(dim=1, keepdim=True)  # a part without a bone: all of them
                logits = logits.masked_fill(~own, float("-inf"))
            return torch.softmax(logits, dim=-1)
        out = self.model.decode(self.z_rest[None], self.shape, points[None])[0]
        return dq_conj(out) if self.dualquat else -out

    # ------------------------------------------------------------------ decoding
    @property
    def dualquat(self) -> bool:
        """Whether every point moves rigidly (a unit DQ): the field or the skinned decoder."""
        return self.model.config.rigid_motions

    @property
    def skinned(self) -> bool:
        """Whether the decoder blends bone motions (design section 10)."""
        return self.model.config.deformation == "skinned"

    def bone_motions(self, z: Tensor) -> Tensor:
        """Corrected bone motions B_b(z) B_b(z_rest)^-1 (B, nb, 8) of a skinned space: the
        identity at z_rest."""
        return dq_mul(self.model.bones(z, self.shape), self.bone_rest_inverse[None])

    @property
    def bone_heads(self) -> np.ndarray:
        """(nb, 3) float64 bone centres of a skinned space at rest, in the caller's frame."""
        return self.normalization.invert(self.shape.centers[0].double().cpu().numpy())

    def bone_transforms(self, bones: Tensor) -> tuple[np.ndarray, np.ndarray]:
        """Corrected bone motions ``bones`` (B, nb, 8) (:meth:`bone_motions`) as rigid motions of
        the caller's frame: (rotations (B, nb, 4) unit quaternions (w, x, y, z), translations
        (B, nb, 3) metres), x -> R x + t, float64 (see :mod:`~neurok_core.rig`). In the
        normalised frame a bone maps x_n to R x_n + t_n; with x_n = (x - c) s that is
        x -> R x + (c - R c + t_n / s)."""
        rotation, t_n = dq_to_rt(bones.detach().double().cpu())
        norm = self.normalization
        c = torch.tensor(np.array(norm.center), dtype=torch.float64)
        t = c - quat_apply(rotation, c.expand_as(t_n)) + t_n / norm.scale
        return rotation.numpy(), t.numpy()

    @property
    def reduced_dims(self) -> int:
        return int(self.W.shape[1])

    @property
    def object_size(self) -> float:
        """Longest side of the rest bounding box (metres)."""
        return float(self.normalization.size)

    def latent(self, q: Tensor) -> Tensor:
        """z(q) = z_rest + W q for q (..., kq) -> (..., k)."""
        return self.z_rest + q @ self.W.T

    def point_motion(self, z: Tensor, points: Tensor, rest_inverse: Tensor) -> Tensor:
        """Corrected per-point motions D(z) o D(z_rest)^-1 at ``points`` (Q, 3) for z (B, k):
        (B, Q, 8) DQs, or (B, Q, 3) displacements; skinned: the blend of the corrected bone
        motions with the points' weights (``rest_inverse`` (Q, nb))."""
        if self.skinned:
            return blend_bones(self.bone_motions(z), rest_inverse[None])  # (B, Q, 8)
        out = self.model.decode(z, self.shape, points[None])  # (B, Q, 8|3)
        if self.dualquat:
            return dq_mul(out, rest_inverse[None])
        return out + rest_inverse[None]

    def deform_points(self, z: Tensor, points: Tensor, rest_inverse: Tensor) -> Tensor:
        """Deformed positions (B, Q, 3), normalised frame, of normalised ``points`` (Q, 3)."""
        return self._apply_motion(self.point_motion(z, points, rest_inverse), points)

    def _apply_motion(self, motion: Tensor, points: Tensor) -> Tensor:
        """Points (Q, 3) moved by their motions (B, Q, 8 | 3) from :meth:`point_motion`."""
        if self.dualquat:
            return dq_apply(motion, points[None])
        return points[None] + motion

    def tracked_points(self, points_world: np.ndarray) -> tuple[Tensor, Tensor]:
        """Normalised positions (Q, 3) and their rest inverses for extra points to track."""
        pts = self._tensor(self.normalization.apply(np.asarray(points_world, dtype=np.float64)))
        with torch.no_grad():
            inverse = self._rest_inverse(pts)
        return pts, inverse

    def decode_vertices(self, z: Tensor) -> Tensor:
        """World-space vertex positions (B, N, 3) for latents z (B, k), by blending the skinning
        points' dual quaternions onto the vertices (or their displacements, in the ablation)."""
        return self._decode(z, None)[0]

    def decode_vertices_and_points(
        self, z: Tensor, points: Tensor, rest_inverse: Tensor
    ) -> tuple[Tensor, Tensor]:
        """:meth:`decode_vertices` and the world positions (B, P, 3) of extra normalised points
        (P, 3) with their rest inverses (from :meth:`tracked_points`), from one decoder pass:
        the same as ``normalization.invert(deform_points(z, points, rest_inverse))``."""
        return self._decode(z, (points, rest_inverse))

    def decode_vertex_rows(
        self, bones: Tensor, rows: Tensor, skinning: tuple[Tensor, Tensor] | None = None
    ) -> Tensor:
        """World positions (B, R, 3) of the vertices ``rows`` (R,) only, of a skinned space,
        from its corrected bone motions ``bones`` (B, nb, 8) (:meth:`bone_motions`, so that one
        network pass serves every use of a frame). ``skinning``: other (bone index, weights)
        (N, K') of every vertex to skin with than the space's own (e.g. with a still bone
        appended to ``bones``). The cost grows with R, not with the mesh."""
        index, weights = skinning or (self.vertex_bones, self.vertex_bone_weights)
        index, weights = index[rows], weights[rows]  # (R, K)
        pivot = index.gather(1, weights.argmax(dim=1, keepdim=True))[:, 0]
        rest = self.rest_normalized[rows]
        return self.normalization.invert(dq_skin(bones, index, weights[None], pivot, rest[None]))

    def _decode(self, z: Tensor, track: tuple[Tensor, Tensor] | None):
        if self.skinned:  # from the bones directly
            bones = self.bone_motions(z)  # (B, nb, 8)
            verts = self.normalization.invert(self.bone_skinning(bones))
            if track is None:
                return verts, None
            moved = dq_apply(blend_bones(bones, track[1][None]), track[0][None])
            return verts, self.normalization.invert(moved)
        points, inverse = self.skinning_points, self.rest_inverse_skin
        if track is not None:
            points, inverse = torch.cat([points, track[0]]), torch.cat([inverse, track[1]])
        motion = self.point_motion(z, points, inverse)
        skin = motion[:, : self.skinning_points.shape[0]]
        if self.dualquat:
            moved = self.skinning(skin)
        else:  # displacements blended with the weights (1, N, K, 1)
            w = self.blend_weights[None, ..., None]
            moved = self.rest_normalized[None] + (w * skin[:, self.blend_index]).sum(-2)
        verts = self.normalization.invert(moved)
        if track is None:
            return verts, None
        tracked = self._apply_motion(motion[:, self.skinning_points.shape[0] :], track[0])
        return verts, self.normalization.invert(tracked)

    # ------------------------------------------------------------------ cache
    def state_dict(self) -> dict[str, np.ndarray]:
        return {
            "z_rest": self.z_rest.detach().cpu().double().numpy(),
            "W": self.W.detach().cpu().double().numpy(),
            "spectrum": self.spectrum.detach().cpu().double().numpy(),
            "covariance": self.covariance.detach().cpu().double().numpy(),
            "rest_residual": np.float64(self.rest_residual),
        }


def space_cache_key(
    vertices: np.ndarray, faces: np.ndarray, model_fingerprint: str, settings: SpaceSettings
) -> str:
    """A content hash of everything a cached space depends on."""
    h = hashlib.sha256()
    h.update(np.ascontiguousarray(vertices, dtype=np.float64).tobytes())
    h.update(np.ascontiguousarray(faces, dtype=np.int64).tobytes())
    h.update(model_fingerprint.encode())
    h.update(json.dumps(asdict(settings), sort_keys=True).encode())
    h.update(str(CACHE_VERSION).encode())
    return h.hexdigest()[:32]


def build_space(
    model: NeuROKModel,
    vertices: np.ndarray,
    faces: np.ndarray,
    *,
    settings: SpaceSettings | None = None,
    cache_dir: str | os.PathLike | None = None,
    model_fingerprint: str = "",
    on_status=_noop,
    on_progress=_noop,
) -> KinematicSpace:
    """Build (or load from ``cache_dir``) the kinematic space of a mesh.

    The cache holds the results of the costly optimisations (rest latent, subspace); re-simulating
    the same mesh with other conditions skips them. A corrupt cache entry is rebuilt.
    """
    settings = settings or SpaceSettings()
    vertices, faces = validate_mesh(vertices, faces)
    state, path = None, None
    if cache_dir is not None and model_fingerprint:
        key = space_cache_key(vertices, faces, model_fingerprint, settings)
        path = Path(cache_dir) / f"space-{key}.npz"
        if path.is_file():
            try:
                with np.load(path, allow_pickle=False) as data:
                    state = {name: data[name] for name in ("z_rest", "W", "spectrum", "covariance")}
                    if "rest_residual" in data.files:
                        state["rest_residual"] = float(data["rest_residual"])
                on_status("encode", "using the cached kinematic space")
            except (OSError, ValueError, KeyError):
                state = None
    space = KinematicSpace(
        model,
        vertices,
        faces,
        settings=settings,
        on_status=on_status,
        on_progress=on_progress,
        _state=state,
        _valid=True,
    )
    if path is not None and state is None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(path.name + ".tmp.npz")
            np.savez(tmp, **space.state_dict())
            os.replace(tmp, path)
        except OSError:
            pass  # a cache that cannot be written only costs time
    return space


__all__ = ["KinematicSpace", "SpaceSettings", "build_space", "space_cache_key", "MeshError"]
