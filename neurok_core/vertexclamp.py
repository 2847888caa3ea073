"""Frames decoded onto a mesh's vertices with its pins held (design section 7): the pin clamp
(:mod:`neurok_core.pinclamp`) applied to the decoded vertices, or, in a skinned space, to its
bones, with a still bone holding the pinned vertices, so that a rig plays the frames back."""

from __future__ import annotations

import numpy as np
import torch

from .dualquat import dq_apply, quat_mul
from .dynamics import SimulationConditions
from .geometry import nearest_neighbors
from .model.bones import blend_bones
from .pinclamp import PinClamp, pin_clamp
from .skinning import DQSkinning
from .space import KinematicSpace

STILL_FALLOFF = 0.5  # a skinned space's still bone fades within this share of the bones' spacing
STILL_CUTOFF = 1e-3  # shares below this are dropped (the vertex keeps its own bones alone)


def _with_still_bone(bones: torch.Tensor) -> torch.Tensor:
    """Bone motions (B, nb, 8) with an identity appended: (B, nb + 1, 8)."""
    still = torch.zeros_like(bones[:, :1])
    still[..., 0] = 1.0
    return torch.cat([bones, still], 1)


class VertexClamp:
    """Decodes frames onto the vertices with the pin clamp applied: the motion of the tracked
    pins (decoded at their own points, in the same pass as the skinning points) is blended out;
    pinned vertices are put exactly at rest. Without pins, plain decoding. A skinned space
    applies the clamp to its bones instead (:meth:`bones`), so that its vertices are a skinning
    a rig plays back exactly. ``clamp``: the pin clamp of ``conditions.pins``
    (:func:`~neurok_core.pinclamp.pin_clamp`) when the caller has built it already; None: built
    here."""

    def __init__(
        self,
        space: KinematicSpace,
        conditions: SimulationConditions,
        clamp: PinClamp | None = None,
    ) -> None:
        self.space = space
        if clamp is None:
            clamp = pin_clamp(space, conditions.pins)
        self.clamp = clamp
        if clamp is None:
            return
        self.points, self.inverse = space.tracked_points(clamp.pins)
        self.pinned = torch.as_tensor(np.asarray(conditions.pins), device=space.device)
        self.pinned_rest = torch.as_tensor(
            space.vertices[np.asarray(conditions.pins)], dtype=space.dtype, device=space.device
        )
        if space.skinned:
            self._skinned_pins(space, clamp, np.asarray(conditions.pins))
            return
        idx, vals = clamp.sparse(space.vertices)  # (N, k) each: k tracked pins per vertex
        # as a dense (N, P) matrix: P (the tracked pins, a few dozen) is small, and one matrix
        # product costs far less than gathering (B, N, k, 3) displacements
        blend = torch.zeros((len(idx), len(clamp.pins)), dtype=torch.float64)
        blend.scatter_add_(1, torch.as_tensor(idx), torch.as_tensor(vals, dtype=torch.float64))
        self.blend = blend.to(device=space.device, dtype=space.dtype)
        self.rest = torch.as_tensor(clamp.pins, dtype=space.dtype, device=space.device)

    def _skinned_pins(self, space: KinematicSpace, clamp: PinClamp, pins: np.ndarray) -> None:
        """A skinned space's pins: the clamp at each bone's head, and each vertex's share of a
        still bone beside its own bones: 1 at the pins, exp(-(d / (STILL_FALLOFF x the bones'
        spacing))^2) at a distance d from them on their own loose parts (the bones' own motion
        is not uniform between their heads and a pin; a separate part near the pins, a drawer
        in its cabinet, keeps its own motion), 0 below STILL_CUTOFF."""
        device, dtype = space.device, space.dtype
        heads = space.bone_heads  # (nb, 3) world
        self.bone_clamp = torch.as_tensor(clamp.weights(heads), dtype=dtype, device=device)
        nb = heads.shape[0]
        spacing = space.object_size
        if nb > 1:
            spacing = float(np.median(nearest_neighbors(heads, heads, 2)[0][:, 1]))
        dist = nearest_neighbors(space.vertices[pins], space.vertices, 1)[0].reshape(-1)
        share = np.exp(-((dist / max(STILL_FALLOFF * spacing, 1e-12)) ** 2))  # (N,)
        share[~np.isin(space.vertex_islands, space.vertex_islands[pins])] = 0.0
        share[share < STILL_CUTOFF] = 0.0
        share[pins] = 1.0
        share_t = torch.as_tensor(share, dtype=space.vertex_bone_weights.dtype, device=device)
        index = torch.cat(
            [space.vertex_bones, torch.full_like(space.vertex_bones[:, :1], nb)], 1
        )  # (N, K + 1): the still bone last
        weights = torch.cat(
            [(1.0 - share_t[:, None]) * space.vertex_bone_weights, share_t[:, None]], 1
        )
        self.vertex_bones, self.vertex_weights = index, weights
        self.skinner = DQSkinning(index, weights, space.rest_normalized, nb + 1)

    def bones(self, z: torch.Tensor) -> torch.Tensor:
        """A skinned space's corrected bone motions (B, nb, 8) of latents z (B, k), with pins
        each moved back by the pin clamp evaluated at its head: bone b's motion is followed by
        the translation -sum_j C_bj (x(P_j) - P_j) (``pinclamp``), so that skinning the vertices
        from these bones (and the pinned vertices from a still bone) is the clamped motion
        as a rig can play it."""
        bones = self.space.bone_motions(z)
        if self.clamp is None:
            return bones
        moved = dq_apply(blend_bones(bones, self.inverse[None]), self.points[None])  # (B, P, 3)
        shift = -(self.bone_clamp @ (moved - self.points[None]))  # (B, nb, 3) normalised
        pure = torch.cat([torch.zeros_like(shift[..., :1]), shift], -1)
        dual = bones[..., 4:] + 0.5 * quat_mul(pure, bones[..., :4])
        return torch.cat([bones[..., :4], dual], -1)

    def skin(self, bones: torch.Tensor) -> torch.Tensor:
        """World vertices (B, N, 3) skinned from corrected bones (B, nb, 8) (:meth:`bones`),
        with pins the still bone too (pinned vertices exactly at rest)."""
        if self.clamp is None:
            return self.space.normalization.invert(self.space.bone_skinning(bones))
        out = self.space.normalization.invert(self.skinner(_with_still_bone(bones)))
        out[:, self.pinned] = self.pinned_rest  # (exact, not to float precision)
        return out

    def skin_rows(self, bones: torch.Tensor, rows: np.ndarray) -> torch.Tensor:
        """:meth:`skin` of the vertices ``rows`` (R,) only: the cost grows with R."""
        space = self.space
        index = torch.as_tensor(rows, device=space.device)
        if self.clamp is None:
            return space.decode_vertex_rows(bones, index)
        skinning = (self.vertex_bones, self.vertex_weights)  # (N, K + 1): the still bone too
        out = space.decode_vertex_rows(_with_still_bone(bones), index, skinning)
        held = np.flatnonzero(np.isin(rows, self.pinned.cpu().numpy()))
        still = space.vertices[rows[held]]
        out[:, held] = torch.as_tensor(still, dtype=out.dtype, device=out.device)
        return out

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        """The clamped vertices (B, N, 3) of latents z (B, k): the vertices and the tracked
        pins come from one decoder pass."""
        if self.clamp is None:
            return self.space.decode_vertices(z)
        verts, moved = self.space.decode_vertices_and_points(z, self.points, self.inverse)
        disp = moved - self.rest  # (B, P, 3) world
        out = verts - self.blend @ disp  # (B, N, 3)
        out[:, self.pinned] = self.pinned_rest
        return out
