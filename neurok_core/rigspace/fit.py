"""Fit a mesh's rig space to a target shape: starts, the search, the solver, the winner.

    fit_rig(vertices, faces, target_points) -> RigIKResult

1. The rest mesh M0 goes to the normalised frame of design section 6 (box side 1) and gets
   its rig space there (:func:`~neurok_core.rigspace.space.build_rig_space`; a one-part solid
   gets bones through it, as an elastic object, so that it can bend; the parts that bend get
   ``bone_density`` times the dynamics' bones, halved while there are more than ``max_bones``).
2. **Starts** (``restarts`` of them, in this order while there are slots): the rest; the rest
   after the part search (:mod:`.ik_search`); what that searched state calls for, in the
   places of the last turned starts: the search whose first move is a close second that
   lands elsewhere ("search 2"), and the chains it left off the target laid along the
   target's centre lines, from either end ("chain", "chain reversed": :mod:`.ik_chain`);
   with the learned model, the posterior of a target that shares M0's topology and the
   prior's draws nearest the target (both fitted by the bones, :mod:`.ik_prior`), each
   after the search; then the whole object turned by r / (R - 1) x 90 degrees about seeded
   axes, after the search. A start that the search moved releases the joints it pulled
   apart (``RELEASE``).
3. **Solver** (:func:`~.ik.solve_start`): every start gets ``FIRST_STEPS`` iterations, the
   ``KEEP`` best continue to the budget's ``steps`` (successive halving); the best is ranked by
   its data term plus the stretch and prior energies (the glue differs between starts), a
   tie (within ``TIE``) going to the start that released fewer joints.
4. **A last mend**: the winner's jointed rigid parts that it holds apart are joined again
   where the search's chamfer allows ``MEND_ALLOWANCE`` more (a sash's rail left off its
   sash), solved on for ``MEND_STEPS`` with those joints glued; the mended state wins a tie.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
from scipy.spatial.transform import Rotation

from ..errors import MeshError
from ..geometry import Normalization, as_points, locate, sample_surface, validate_mesh
from ..rig import BoneRig, quat_from_matrix
from .bones import geometric_bones
from .ik import RigFit, RigIKSettings, Start, Target, pose_of, solve_start
from .ik_chain import chain_starts
from .ik_follow import mend_joints
from .ik_prior import ShapePrior, bone_fit, posterior_shape, prior_draws
from .ik_search import PartSearch, search_parts
from .space import RigSpace, build_rig_space

RELEASE = 0.02  # object sizes: joints whose glue points a search move pulled this far apart
FIRST_STEPS = 15
KEEP = 2
PRIOR_STARTS = 2
MIN_DENSITY = 0.25
SEARCHED = ("rest", "search 2", "chain", "chain reversed")  # starts not searched (again)
TIE = 0.05  # ranking values this close are a tie, broken by the joints held
MEND_ALLOWANCE = 0.1  # the search's chamfer a final mend may add
MEND_STEPS = 30


@dataclass(frozen=True)
class RigIKResult:
    """vertices (N, 3): the fitted mesh in the caller's frame; pose (B, 4, 3): the bones' state
    Q in the normalised frame of M0 (``space``, ``normalization``); rotations (B, 3, 3) and
    translations (B, 3): each bone's rigid motion x -> R x + t in the caller's frame; loss: the
    winner's data term (chamfer, normalised units^2); energy: its E; start: its name; starts:
    every start's (name, ranking value, data term, iterations); seconds: the fit's parts."""

    vertices: np.ndarray
    pose: np.ndarray
    rotations: np.ndarray
    translations: np.ndarray
    loss: float
    energy: float
    start: str
    space: RigSpace
    normalization: Normalization
    starts: tuple
    seconds: dict = field(default_factory=dict)

    def rig(self) -> BoneRig:
        """The fitted pose as a one-frame rig (the rig bake's format, linear blend skinning):
        ``rig().skin(rest_vertices, 0)`` is ``vertices``."""
        norm = self.normalization
        quats = np.stack([quat_from_matrix(r) for r in self.rotations])[None]  # (1, B, 4)
        return BoneRig(
            norm.invert(self.space.heads),
            quats,
            self.translations[None],
            self.space.vertex_bones.astype(np.int32),
            self.space.vertex_weights.astype(np.float32),
            blend="lbs",
        )


class RigProblem:
    """M0 in its normalised frame with its rig space and the fit's fixed data (reusable for
    several targets of one rest mesh). ``kspace``: the object's learned KinematicSpace, or
    None (no prior, no learned starts)."""

    def __init__(self, vertices, faces, settings: RigIKSettings | None = None, kspace=None):
        started = time.perf_counter()
        self.settings = settings or RigIKSettings()
        self.vertices, self.faces = validate_mesh(vertices, faces)
        if not len(self.faces):
            raise MeshError("a rig-space fit needs a mesh with faces")
        self.normalization = Normalization.from_vertices(self.vertices)
        rest = self.normalization.apply(self.vertices)
        density = self.settings.bone_density  # halved while the bones are too many
        while density > MIN_DENSITY:
            layout = geometric_bones(rest, self.faces, elastic=True, density=density)
            if len(layout.heads) <= self.settings.max_bones:
                break
            density /= 2.0
        self.density = density
        self.space = build_rig_space(rest, self.faces, mass=1.0, elastic=True, bone_density=density)
        rng = np.random.default_rng(self.settings.seed)
        drawn = sample_surface(rest, self.faces, self.settings.points, rng)
        self.kspace = kspace
        self.draw_poses = []  # the prior draws fitted by the bones: [(rot, centre)]
        prior = None
        if kspace is not None:
            draws = prior_draws(kspace, seed=self.settings.seed)  # (D, N, 3)
            self.draw_poses = [bone_fit(self.space, d) for d in draws]
            if self.settings.prior_weight > 0:
                prior = ShapePrior(np.stack([locate(d, self.faces, drawn) for d in draws]))
        self.fit = RigFit(self.space, self.settings, drawn, prior)
        self.seconds = time.perf_counter() - started

    def starts(
        self, target: Target, target_vertices=None
    ) -> list[tuple[str, np.ndarray, np.ndarray]]:
        """[(name, rot, centre)] of the module docstring's starts, before the search."""
        s, space = self.settings, self.space
        rest = self._rest()
        out = [("rest", *rest), ("search", *rest)]
        if self.kspace is not None and target_vertices is not None:
            shape = posterior_shape(self.kspace, target_vertices, seed=s.seed)
            out.append(("posterior", *bone_fit(space, shape)))
        if self.draw_poses:
            fits = self.draw_poses
            scores = [self.fit.data(self.fit.samples.positions(*f), target)[0] for f in fits]
            for k in np.argsort(scores)[:PRIOR_STARTS]:
                out.append((f"prior {int(k)}", *fits[k]))
        rng = np.random.default_rng(s.seed)
        turned = max(s.restarts - len(out), 0)
        centre = space.vertices.mean(0)
        for r in range(1, turned + 1):
            axis = rng.normal(size=3)
            angle = r / max(turned, 1) * np.pi / 2
            turn = Rotation.from_rotvec(angle * axis / np.linalg.norm(axis)).as_matrix()
            out.append((f"turned {r}", turn @ rest[0], (rest[1] - centre) @ turn.T + centre))
        return out[: s.restarts]

    def solve(self, target_points, target_vertices=None) -> RigIKResult:
        """Fit the target (points (Q, 3) on its surface in the caller's frame; its vertices
        (N, 3) too when it shares M0's topology)."""
        s = self.settings
        timer = {"space": round(self.seconds, 3)}
        started = time.perf_counter()
        points = as_points(target_points, "target points")
        if len(points) < 3:
            raise MeshError("the target needs at least 3 surface points")
        matched = None
        if target_vertices is not None:
            tv = as_points(target_vertices, "target vertices")
            if tv.shape != self.vertices.shape:
                raise MeshError(
                    f"the target's vertices ({len(tv)}) do not match the rest mesh's "
                    f"({len(self.vertices)}): fit by its points only"
                )
            matched = locate(self.normalization.apply(tv), self.faces, self.fit.drawn)
        target = Target.of(self.normalization.apply(points), matched)
        candidates = self.starts(target, target_vertices)
        timer["starts"] = round(time.perf_counter() - started, 3)
        full = np.asarray(self.fit.glue_scale)
        runs = []
        t_search = time.perf_counter()
        while candidates:
            name, rot, centre = candidates.pop(0)
            glue = full
            if name not in SEARCHED and matched is None:
                rot, centre, moves = search_parts(
                    self.fit,
                    rot,
                    centre,
                    target.points,
                    target.tree,
                    seed=s.seed,
                    whole=name.startswith("turned"),
                )
                if moves:
                    glue = self.fit.held_joints(rot, centre, RELEASE)
            elif name in SEARCHED[1:]:  # built on a searched state: its joints as they hold
                glue = self.fit.held_joints(rot, centre, RELEASE)
            runs.append(Start(name, rot, centre, glue))
            turned = any(c[0].startswith("turned") for c in candidates)
            if name == "search" and matched is None and turned:
                candidates = self._instead_of_turned(candidates, self._more(rot, centre, target))
        timer["search"] = round(time.perf_counter() - t_search, 3)
        t_solve = time.perf_counter()
        for run in runs:
            solve_start(self.fit, run, target, min(FIRST_STEPS, s.steps))
        ranked = sorted(runs, key=self._rank)
        for run in ranked[:KEEP]:
            solve_start(self.fit, run, target, s.steps - run.steps)
        best = self._pick(ranked[:KEEP])
        mended = self._mended(best, target) if matched is None else None
        if mended is not None:
            runs.append(mended)
            if self._rank(mended) <= self._rank(best) * (1.0 + TIE):
                best = mended
        timer["solve"] = round(time.perf_counter() - t_solve, 3)
        return self._result(best, runs, timer)

    def _rest(self) -> tuple[np.ndarray, np.ndarray]:
        """(rot (B, 3, 3), centre (B, 3)) of the rest: every bone unturned at its head."""
        nb = self.space.num_bones
        return np.repeat(np.eye(3)[None], nb, 0), self.space.heads.copy()

    def _more(self, rot, centre, target: Target) -> list:
        """[(name, rot, centre)]: starts that the searched state (rot, centre) calls for: the
        search from the rest with another first move ("search 2", searched), and the chains
        it left off the target laid along it (:func:`~.ik_chain.chain_starts`)."""
        out = []
        other = search_parts(
            self.fit, *self._rest(), target.points, target.tree, seed=self.settings.seed,
            second=True,
        )  # fmt: skip
        if other is not None:
            out.append(("search 2", other[0], other[1]))
        return out + chain_starts(self.fit, rot, centre, target)

    @staticmethod
    def _instead_of_turned(candidates: list, more: list) -> list:
        """``more`` first, in the places of the last turned starts of ``candidates``."""
        turned = [c for c in candidates if c[0].startswith("turned")]
        k = min(len(more), len(turned))
        dropped = {id(c) for c in turned[len(turned) - k :]}
        return more[:k] + [c for c in candidates if id(c) not in dropped]

    def _pick(self, runs: list[Start]) -> Start:
        """The winner of the solved ``runs``: the lowest ranking value (:meth:`_rank`), and
        of those within ``TIE`` of it, the one that released the fewest joints. The target's
        surface alone cannot always tell a drawer's back panel pulled out with the drawer from
        one left in the carcass; the joints found on the mesh say what moves together."""
        values = [self._rank(r) for r in runs]
        low = np.nanmin(values) if np.isfinite(values).any() else np.inf
        close = [r for r, v in zip(runs, values, strict=True) if v <= low * (1.0 + TIE)]
        return min(close or runs, key=lambda r: (self._released(r), self._rank(r)))

    def _mended(self, best: Start, target: Target) -> Start | None:
        """The winner with the joints it left pulled apart mended where the search's chamfer
        allows ``MEND_ALLOWANCE`` more (:func:`~.ik_follow.mend_joints`), solved on with
        those joints glued; None when nothing is mended. It wins a tie (:meth:`_pick`)."""
        search = PartSearch(
            self.fit, best.rot, best.centre, target.points, target.tree, seed=self.settings.seed
        )
        if not search.links or not mend_joints(search, MEND_ALLOWANCE):
            return None
        glue = self.fit.held_joints(search.rot, search.centre, RELEASE)
        run = Start("mended " + best.name, search.rot, search.centre, glue)
        return solve_start(self.fit, run, target, MEND_STEPS)

    def _released(self, run: Start) -> int:
        """The joints that the start ``run`` fits without glue."""
        fit = self.fit
        return len(np.unique(fit.glue_joint[np.asarray(run.glue) == 0.0]))

    def _rank(self, run: Start) -> float:
        s = self.settings
        x = self.fit.samples.positions(run.rot, run.centre)
        value = run.data + s.stretch_weight * self.fit.stretch(run.rot, run.centre)
        if self.fit.prior is not None and s.prior_weight > 0:
            value += s.prior_weight * float((self.fit.prior.residuals(x) ** 2).sum())
        return value

    def _result(self, best: Start, runs, timer) -> RigIKResult:
        pose = pose_of(best.rot, best.centre)
        rest_verts = self.space.rows @ pose.reshape(-1, 3)  # (N, 3) normalised
        norm = self.normalization
        vertices = norm.invert(rest_verts)
        # x' = R (s (x - c0) - h) + c  ->  x = R x + c0 - R c0 + (c - R h) / s in metres
        rot = best.rot
        heads = self.space.heads
        trans = (
            norm.center
            - rot @ norm.center
            + (best.centre - np.einsum("bij,bj->bi", rot, heads)) / norm.scale
        )
        return RigIKResult(
            vertices=vertices,
            pose=pose,
            rotations=rot.copy(),
            translations=trans,
            loss=float(best.data),
            energy=float(best.energy),
            start=best.name,
            space=self.space,
            normalization=norm,
            starts=tuple((r.name, self._rank(r), r.data, r.steps) for r in runs),
            seconds=timer,
        )


def fit_rig(
    vertices,
    faces,
    target_points,
    *,
    settings: RigIKSettings | None = None,
    target_vertices=None,
    kspace=None,
) -> RigIKResult:
    """Fit the rig space of the mesh (vertices (N, 3), faces (F, 3)) to ``target_points``
    (Q, 3), both in the caller's frame (module docstring)."""
    return RigProblem(vertices, faces, settings, kspace).solve(target_points, target_vertices)
