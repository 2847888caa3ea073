"""Inverse kinematics in the rig space: the bones' rigid motions that best match a target shape.

Given the rest mesh M0, its rig space (bones, skinning rows, joints: :mod:`.space`) and points T
sampled on a target surface (no correspondences), find the bones' rigid motions
Q = {(R_b, c_b)} (``Q[b, :3, :] = R_b^T``, ``Q[b, 3, :] = c_b``, as everywhere in the rig space)
minimising, in the normalised frame of M0 (design section 6: M0's box has side 1),

    E(Q) = D(x(Q), T) + glue_weight E_glue(Q) + stretch_weight E_stretch(Q)
           + prior_weight E_prior(Q)

- x_p(Q) = sum_b w_pb (R_b (X_p - h_b) + c_b): ``points`` area-uniform samples of M0 moved by
  linear blend skinning (the rows of their triangles' corners blended barycentrically, so they
  stay on the fitted mesh); D = (1 - plane) CD + plane CD_n: CD the symmetric squared
  chamfer of :func:`neurok_core.ik.chamfer_loss`, 1/2 (mean_p min_t |x_p - t|^2 + mean_t
  min_p |x_p - t|^2), CD_n the same over the same pairs with each pair's distance taken along
  the target point's normal n_t (estimated from the target points: :func:`point_normals`).
  Point to plane, a surface fits a sampled surface without the samples' spacing as a floor
  (Chen and Medioni 1992), so two parallel panels a little apart are told apart; the point
  to point share keeps what slides within a plane anchored;
- E_glue = sum_joints mean_g |x_a(g) - x_b(g)|^2: the joints' glue points moved with each of
  their two parts (zero while a hinge turns about its axis);
- E_stretch = mean_e (|x_i - x_j| / l_e - 1)^2 over a sample of the edges of the parts that bend
  (sheets, chains, soft solids): zero for bending, so cloth folds and does not stretch;
- E_prior: a Gaussian over the bones' motions relative to the object's own rigid motion (see
  :class:`BonePrior`), fitted to shapes decoded from the learned model's prior.

A rigid part has one bone, so it stays rigid by construction. The solver is Levenberg-Marquardt
on the linearised residuals with the nearest-point pairs found again at every iteration
(iterative closest points, Besl and McKay 1992, here for a skinned, jointed body); each iteration
is one of the budget's ``steps``. The point-to-point pairs of both chamfer directions of a
sample are folded into one residual per sample, the point-to-plane pairs are one row each, so
a step costs one k-d tree query each way, a sparse Jacobian product and a dense solve of
size 6B. The rotation update is R_b <- exp([dw_b]x) R_b.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import sparse
from scipy.linalg import cho_factor, cho_solve
from scipy.spatial import cKDTree
from scipy.spatial.transform import Rotation

from .space import RigSpace

NORMAL_NEIGHBOURS = 12


@dataclass(frozen=True)
class RigIKSettings:
    """steps: Levenberg-Marquardt iterations per start (each finds the nearest points once);
    restarts: starts; points: samples of M0 in the chamfer; seed; glue_weight,
    stretch_weight, prior_weight: weights of the energies (normalised frame); stretch_edges:
    edges sampled for E_stretch;
    bone_density: bones along each side of a part that bends, as a multiple of the dynamics'
    (``geometric_bones``: a fit follows folds the dynamics need not resolve); max_bones: the
    density is halved (down to a quarter) while there are more bones than this (a robot whose
    open link meshes each count as a sheet); tolerance: a start stops once ``patience``
    accepted steps in a row lower E by less than this share; plane: the share of the pairs'
    point-to-plane distance in the data term (the rest point-to-point)."""

    steps: int = 150
    restarts: int = 8
    points: int = 512
    seed: int = 0
    glue_weight: float = 1.0
    stretch_weight: float = 0.1
    prior_weight: float = 0.0
    stretch_edges: int = 1000
    bone_density: float = 2.0
    max_bones: int = 96
    tolerance: float = 1e-5
    patience: int = 3
    plane: float = 0.8


# --------------------------------------------------------------------------------------------
# Linear blend skinning rows in a padded per-point form


class SkinnedPoints:
    """Points moved by the bones: x_m = sum_k (R_{b_mk} l_mk + w_mk c_{b_mk}).

    bones (M, K) int64, local (M, K, 3) = w (X - h_b), weight (M, K) w (zero where padded);
    built from dense homogeneous rows (M, 4B) (``RigSpace`` rows: (w (X - h), w) per bone),
    whose non-zero pattern is fixed.
    """

    def __init__(self, rows: np.ndarray):
        rows = np.asarray(rows, dtype=np.float64)
        m = rows.shape[0]
        nb = rows.shape[1] // 4
        blocks = rows.reshape(m, nb, 4)
        used = np.abs(blocks).sum(2) > 0  # (M, B)
        k = max(int(used.sum(1).max()) if m else 1, 1)
        order = np.argsort(~used, axis=1, kind="stable")[:, :k]  # used bones first
        self.bones = order  # (M, K)
        picked = np.take_along_axis(blocks, order[:, :, None], 1)  # (M, K, 4)
        live = np.take_along_axis(used, order, 1)
        picked[~live] = 0.0
        self.local = picked[:, :, :3]  # (M, K, 3)
        self.weight = picked[:, :, 3]  # (M, K)
        self.num_bones = nb

    def __len__(self) -> int:
        return len(self.bones)

    @classmethod
    def subset(cls, points: SkinnedPoints, index: np.ndarray) -> SkinnedPoints:
        """The points ``index`` of ``points``."""
        out = cls.__new__(cls)
        out.bones, out.local = points.bones[index], points.local[index]
        out.weight, out.num_bones = points.weight[index], points.num_bones
        return out

    def arms(self, rot: np.ndarray) -> np.ndarray:
        """(M, K, 3) R_b l: the turned offsets."""
        return np.einsum("mkij,mkj->mki", rot[self.bones], self.local)

    def positions(self, rot: np.ndarray, centre: np.ndarray, arms=None) -> np.ndarray:
        """(M, 3) for rotations (B, 3, 3) and centres (B, 3)."""
        arms = self.arms(rot) if arms is None else arms
        return (arms + self.weight[..., None] * centre[self.bones]).sum(1)

    def jacobian(self, arms: np.ndarray) -> sparse.csr_matrix:
        """(3M, 6B) d x / d(dw_b, dc_b): -[R_b l]x for the turn, w I for the centre."""
        m, k = self.bones.shape
        blocks = np.zeros((m, 3, k, 6))
        ax, ay, az = arms[..., 0], arms[..., 1], arms[..., 2]  # (M, K)
        # -[a]x = [[0, az, -ay], [-az, 0, ax], [ay, -ax, 0]]
        blocks[:, 0, :, 1], blocks[:, 0, :, 2] = az, -ay
        blocks[:, 1, :, 0], blocks[:, 1, :, 2] = -az, ax
        blocks[:, 2, :, 0], blocks[:, 2, :, 1] = ay, -ax
        for i in range(3):
            blocks[:, i, :, 3 + i] = self.weight
        cols = (6 * self.bones[:, :, None] + np.arange(6)).reshape(m, 1, k * 6)
        cols = np.broadcast_to(cols, (m, 3, k * 6)).reshape(-1)
        indptr = np.arange(0, 3 * m * k * 6 + 1, k * 6)
        out = sparse.csr_matrix(
            (blocks.reshape(-1), cols, indptr), shape=(3 * m, 6 * self.num_bones)
        )
        out.sum_duplicates()
        return out


# --------------------------------------------------------------------------------------------
# The problem of one rest mesh


@dataclass
class Target:
    """The target in the normalised frame of M0: points (Q, 3) on its surface, their k-d tree
    and their normals (Q, 3) (:func:`point_normals`); ``matched`` (P, 3): where the fit's
    samples belong on it, when the target shares M0's topology (then the data term is
    sum_p |x_p - matched_p|^2 / P, no nearest points)."""

    points: np.ndarray
    tree: cKDTree
    normals: np.ndarray
    matched: np.ndarray | None = None

    @classmethod
    def of(cls, points: np.ndarray, matched: np.ndarray | None = None) -> Target:
        points = np.asarray(points, dtype=np.float64)
        tree = cKDTree(points)
        return cls(points, tree, point_normals(points, tree), matched)


def point_normals(points: np.ndarray, tree: cKDTree, k: int = NORMAL_NEIGHBOURS) -> np.ndarray:
    """(Q, 3) unit normals of points (Q, 3) on a surface, unsigned: the direction of least
    spread of each point's ``k`` nearest points (principal component analysis; Hoppe et al.
    1992). Both sides of a thin sheet give the sheet's normal."""
    k = min(k, len(points))
    if k < 3:
        return np.tile([0.0, 0.0, 1.0], (len(points), 1))
    near = points[tree.query(points, k)[1]]  # (Q, k, 3)
    d = near - near.mean(1, keepdims=True)
    cov = np.einsum("qki,qkj->qij", d, d)  # (Q, 3, 3)
    return np.linalg.eigh(cov)[1][:, :, 0]


class RigFit:
    """The fixed data of fitting one rig space to targets: the samples of M0 and their rows,
    the glue points of the joints, the stretch edges, and the learned prior (or None). The
    ``space`` is built on the mesh in the normalised frame (object size 1), as :func:`fit_rig`
    does; ``samples`` (P,) the surface samples (:func:`~neurok_core.geometry.sample_surface`)."""

    def __init__(self, space: RigSpace, settings: RigIKSettings, samples, prior=None):
        self.space, self.settings, self.prior = space, settings, prior
        rng = np.random.default_rng(settings.seed)
        f = space.faces
        self.drawn = samples
        corners = f[samples.face_ids]  # (P, 3)
        rows = sum(
            samples.barycentrics[:, c, None] * space.vertex_rows(corners[:, c]) for c in range(3)
        )
        self.samples = SkinnedPoints(rows)
        self.sample_parts = space.layout.part_of_faces(f)[samples.face_ids]  # (P,)
        self.glue, self.glue_scale, self.glue_joint = self._glue()
        self.edges, self.edge_lengths = self._edges(rng)
        self.prior_matrix = prior.matrix() if prior is not None else None

    def _glue(self):
        rows, scale, owner = [], [], []
        for i, joint in enumerate(self.space.joints):
            if joint.part_b < 0:
                continue  # nothing is pinned in a fit: no joint to the world
            ra = self.space.part_rows(joint.part_a, joint.points)
            rb = self.space.part_rows(joint.part_b, joint.points)
            rows.append(ra - rb)
            scale.append(np.full(len(ra), 1.0 / len(ra)))
            owner.append(np.full(len(ra), i))
        if not rows:
            return None, np.zeros(0), np.zeros(0, dtype=np.int64)
        return SkinnedPoints(np.concatenate(rows)), np.concatenate(scale), np.concatenate(owner)

    def _edges(self, rng):
        edges, lengths = self.space.bending_edges(self.settings.stretch_edges, rng)
        if not len(edges):
            return None, np.zeros(0)
        space = self.space
        rows = space.vertex_rows(edges[:, 1]) - space.vertex_rows(edges[:, 0])
        return SkinnedPoints(rows), lengths

    def held_joints(self, rot, centre, gap: float) -> np.ndarray:
        """(G,) glue weights of the glue points: none for the joints whose points lie more than
        ``gap`` apart in the state (the search moved their parts apart there: the target says
        the joint is not one), the joint's share otherwise."""
        if self.glue is None:
            return self.glue_scale
        d = np.linalg.norm(self.glue.positions(rot, centre), axis=1)  # (G,)
        far = np.unique(self.glue_joint[d > gap])
        return np.where(np.isin(self.glue_joint, far), 0.0, self.glue_scale)

    # -- energies --------------------------------------------------------------------------
    def data(self, x: np.ndarray, target: Target):
        """(data term, pairs) of samples x (P, 3): against points, the chamfer's pairs (each
        sample's nearest target point (P,), each target point's nearest sample (Q,)) and the
        mix ``plane`` x the point-to-plane chamfer (each pair's distance along the target
        point's normal) + (1 - ``plane``) x the point-to-point chamfer; against matched
        points, the mean squared distance to them (pairs None)."""
        if target.matched is not None:
            return float(np.mean(((x - target.matched) ** 2).sum(1))), None
        a = self.settings.plane
        d1, near_t = target.tree.query(x)
        d2, near_x = cKDTree(x).query(target.points)
        n = target.normals
        along1 = ((x - target.points[near_t]) * n[near_t]).sum(1)  # (P,)
        along2 = ((x[near_x] - target.points) * n).sum(1)  # (Q,)
        point = float(np.mean(d1**2)) + float(np.mean(d2**2))
        plane = float(np.mean(along1**2)) + float(np.mean(along2**2))
        return 0.5 * ((1.0 - a) * point + a * plane), (near_t, near_x)

    def stretch(self, rot, centre) -> float:
        """E_stretch (unweighted)."""
        if self.edges is None:
            return 0.0
        d = self.edges.positions(rot, centre)
        return float(np.mean((np.linalg.norm(d, axis=1) / self.edge_lengths - 1.0) ** 2))

    def regularisers(self, rot, centre, x, glue) -> float:
        s = self.settings
        e = s.stretch_weight * self.stretch(rot, centre) if s.stretch_weight > 0 else 0.0
        if self.glue is not None and s.glue_weight > 0:
            gap = self.glue.positions(rot, centre)  # (G, 3)
            e += s.glue_weight * float((glue * (gap**2).sum(1)).sum())
        if self.prior is not None and s.prior_weight > 0:
            e += s.prior_weight * float((self.prior.residuals(x) ** 2).sum())
        return e

    def _chamfer_rows(self, x, target: Target, pairs, j_x) -> tuple[list, list]:
        """The data term's rows ([J blocks], [r blocks]) at samples x (P, 3) with their pairs.
        Point to point, both chamfer directions are folded per sample,
        a_p |x_p - b_p / a_p|^2 + const; point to plane, one row per pair, its distance
        along the target point's normal (the normal held while the pairs are)."""
        near_t, near_x = pairs
        p, q = len(x), len(target.points)
        a = self.settings.plane
        blocks, res = [], []
        if a < 1.0:
            count = np.bincount(near_x, minlength=p).astype(np.float64)
            summed = np.zeros((p, 3))
            np.add.at(summed, near_x, target.points)
            w = (1.0 - a) * (0.5 / p + 0.5 * count / q)  # (P,)
            b = (1.0 - a) * ((0.5 / p) * target.points[near_t] + (0.5 / q) * summed)  # (P, 3)
            root = np.sqrt(w)
            blocks.append(sparse.diags(np.repeat(root, 3)) @ j_x)
            res.append((root[:, None] * x - b / root[:, None]).reshape(-1))
        if a > 0.0:
            n = target.normals
            sample = np.concatenate([np.arange(p), near_x])  # (P + Q,) the pairs' samples
            normal = np.concatenate([n[near_t], n])  # (P + Q, 3)
            other = np.concatenate([target.points[near_t], target.points])  # (P + Q, 3)
            w = np.concatenate([np.full(p, np.sqrt(0.5 * a / p)), np.full(q, np.sqrt(0.5 * a / q))])
            rows = len(sample)
            pick = sparse.csr_matrix(
                (
                    (w[:, None] * normal).reshape(-1),
                    (3 * sample[:, None] + np.arange(3)).reshape(-1),
                    np.arange(0, 3 * rows + 1, 3),
                ),
                shape=(rows, 3 * p),
            )
            blocks.append(pick @ j_x)
            res.append(w * ((x[sample] - other) * normal).sum(1))
        return blocks, res

    def linearise(self, rot, centre, x, target: Target, pairs, glue) -> tuple:
        """(J (R, 6B) sparse, r (R,)): E = |r|^2 + c to first order at the state, c constant
        while the pairs are held (the folded chamfer drops the targets' own squares)."""
        s = self.settings
        j_x = self.samples.jacobian(self.samples.arms(rot))  # (3P, 6B)
        if pairs is None:  # matched points
            root = np.sqrt(1.0 / len(x))
            blocks, res = [root * j_x], [(root * (x - target.matched)).reshape(-1)]
        else:
            blocks, res = self._chamfer_rows(x, target, pairs, j_x)
        if self.glue is not None and s.glue_weight > 0:
            arms = self.glue.arms(rot)
            gap = self.glue.positions(rot, centre, arms)
            w = np.repeat(np.sqrt(s.glue_weight * glue), 3)
            blocks.append(sparse.diags(w) @ self.glue.jacobian(arms))
            res.append(w * gap.reshape(-1))
        if self.edges is not None and s.stretch_weight > 0:
            arms = self.edges.arms(rot)
            d = self.edges.positions(rot, centre, arms)  # (E, 3)
            length = np.maximum(np.linalg.norm(d, axis=1), 1e-12)
            n = len(d)
            scale = np.sqrt(s.stretch_weight / n)
            w = (d / length[:, None]) * (scale / self.edge_lengths)[:, None]  # (E, 3)
            pick = sparse.csr_matrix(
                (w.reshape(-1), np.arange(3 * n), np.arange(0, 3 * n + 1, 3)), shape=(n, 3 * n)
            )
            blocks.append(pick @ self.edges.jacobian(arms))
            res.append(scale * (length / self.edge_lengths - 1.0))
        if self.prior is not None and s.prior_weight > 0:
            w = np.sqrt(s.prior_weight)
            blocks.append(sparse.csr_matrix(w * (j_x.T @ self.prior_matrix.T).T))
            res.append(w * self.prior.residuals(x))
        return sparse.vstack(blocks).tocsr(), np.concatenate(res)


def retract(rot: np.ndarray, centre: np.ndarray, step: np.ndarray):
    """The state moved by ``step`` (6B,) = (dw_b, dc_b) per bone: R_b <- exp([dw_b]x) R_b."""
    step = step.reshape(-1, 6)
    turn = Rotation.from_rotvec(step[:, :3]).as_matrix()  # (B, 3, 3)
    return turn @ rot, centre + step[:, 3:]


@dataclass
class Start:
    """One start of the fit and where its solver stands: rotations (B, 3, 3), centres (B, 3),
    the glue weights it fits with, its energy E, data term, damping and iterations so far."""

    name: str
    rot: np.ndarray
    centre: np.ndarray
    glue: np.ndarray
    energy: float = np.inf
    data: float = np.inf
    mu: float = 1e-4
    steps: int = 0
    done: bool = False
    calm: int = 0


def solve_start(fit: RigFit, start: Start, target: Target, steps: int) -> Start:
    """``steps`` more Levenberg-Marquardt iterations of ``start`` (module docstring); stops
    early once ``patience`` accepted steps in a row lower E by less than ``tolerance``."""
    s = fit.settings
    rot, centre = start.rot, start.centre
    x = fit.samples.positions(rot, centre)
    data, pairs = fit.data(x, target)
    energy = data + fit.regularisers(rot, centre, x, start.glue)
    h = None  # the normal equations at the state (kept while steps from it are refused)
    for _ in range(steps):
        if start.done:
            break
        start.steps += 1
        if h is None:
            jac, res = fit.linearise(rot, centre, x, target, pairs, start.glue)
            h = (jac.T @ jac).toarray()
            g = jac.T @ res
            diag = np.diag(h).copy()
            floor = 1e-9 * max(float(diag.max()), 1e-30)
        try:  # (Cholesky: the damped normal matrix is positive definite)
            step = -cho_solve(cho_factor(h + np.diag(start.mu * diag + floor)), g)
        except np.linalg.LinAlgError:
            start.mu *= 10.0
            continue
        rot_n, centre_n = retract(rot, centre, step)
        x_n = fit.samples.positions(rot_n, centre_n)
        data_n, pairs_n = fit.data(x_n, target)
        energy_n = data_n + fit.regularisers(rot_n, centre_n, x_n, start.glue)
        if energy_n < energy:
            gain = (energy - energy_n) / max(energy, 1e-300)
            rot, centre, x, data, pairs, energy = rot_n, centre_n, x_n, data_n, pairs_n, energy_n
            h = None
            start.mu = max(start.mu / 3.0, 1e-7)
            start.calm = start.calm + 1 if gain < s.tolerance else 0
            start.done = start.calm >= s.patience
        else:
            start.mu *= 5.0
            start.done = start.mu > 1e8
    start.rot, start.centre, start.energy, start.data = rot, centre, energy, data
    return start


def pose_of(rot: np.ndarray, centre: np.ndarray) -> np.ndarray:
    """Q (B, 4, 3) of rotations (B, 3, 3) and centres (B, 3)."""
    q = np.empty((len(rot), 4, 3))
    q[:, :3, :] = np.transpose(rot, (0, 2, 1))
    q[:, 3, :] = centre
    return q
