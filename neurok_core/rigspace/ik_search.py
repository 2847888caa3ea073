"""The large part motions of a rig-space fit: a search over turns and slides of the parts.

The local solver of :mod:`.ik` follows nearest-point pairs, so it finds a door turned by 20
degrees but not one turned by 90, a drawer pulled out by half its depth or a lamp whose arm
swung round: the pairs lead elsewhere. This search proposes those motions directly.

**Moves.** The parts are linked into one tree (:func:`joint_tree`): by their joints, and groups
that no joint links by where they come closest. For every part two sets of samples can move:
the part alone, and the part with everything hanging from it (a lamp's arm carries its head).
A move turns the set about the part's joint with its parent (about the joint's axis, the
frame's three axes and the part's principal axes, by multiples of 30 degrees) or slides it
(along those axes, up to 0.6 object sizes); the whole object also turns and slides about its
centre.

**Following and mending** (:mod:`.ik_follow`). A move found for one set is snapped onto the
target (``SNAP_STEPS`` iterations of rigid ICP of its samples: the moves come in steps, the
target's motion lies between them), and the parts jointed to the set follow it while that
costs less than a move must earn (``GAIN``): a drawer's panels follow its front, a window
sash's rails its glass. When the search ends, jointed rigid parts that it left moving apart
join again where the target allows it: a sash moved in two pieces becomes one.

**Best first.** Every candidate set gets the move of lowest chamfer (its samples moved, the
others kept), and the move of largest gain over all candidates is applied; the gains are
kept in a queue and re-evaluated only when they reach its top after a move was applied
(lazy greedy). The search stops when no move lowers the chamfer by ``GAIN`` of its value, or
after ``max_moves``. Sets that already lie on the target (``SETTLED`` of their samples within
the target's point spacing) are not moved, and sets of under ``MIN_SHARE`` of the samples are
left to the local solver.

**A second search** (``second``): greedy order fails where two first moves nearly tie. A
window's back sash slid twice as far covers the target about as well as the same sash slid
to its place; the first leaves nothing for the front sash to gain. The second search starts
with the best move that gains at least ``CLOSE`` of the best's and lands elsewhere
(``DISTINCT``), then goes on greedily; the fit solves both and keeps the better.

Costs: the search's chamfer is that of the samples (up to ``SAMPLE_SUBSET``) against
``TARGET_SUBSET`` of the target points (a seeded subset): two window sashes a few
hundredths of the size apart need that resolution. A candidate's moves are scored all at
once, ``MOVED_SUBSET`` of its samples moved, its target-to-samples half by brute force over
the target points that the kept samples do not cover; a candidate's hundreds of moves are
first ranked with ``COARSE_MOVED`` samples and only the ``SHORTLIST`` best scored in full.
The following parts are scored from each part's own distances
(:class:`~.ik_follow.MovedParts`).
"""

from __future__ import annotations

import heapq

import numpy as np
from scipy.spatial import cKDTree
from scipy.spatial.transform import Rotation

from ..metrics import best_rotations
from .ik import SkinnedPoints
from .ik_follow import GAIN, PartDistances, grow, mend_joints, moved_state
from .joints import Joint
from .space import RigSpace

SETTLED = 0.8  # share of a set's samples within the target's spacing: it is not moved
MIN_SHARE = 0.01  # sets with fewer samples are left to the local solver
TARGET_SUBSET = 1024
TURNS = np.radians(np.concatenate([np.arange(30, 181, 30), -np.arange(30, 151, 30)]))
SLIDES = np.concatenate(
    [[0.05, 0.1, 0.2, 0.3, 0.45, 0.6], -np.array([0.05, 0.1, 0.2, 0.3, 0.45, 0.6])]
)
SAMPLE_SUBSET = 512
MOVED_SUBSET = 96  # of them, moved samples of a candidate at most
SHORTLIST = 16  # moves of a candidate scored in full (the rest by a coarse chamfer)
COARSE_MOVED = 24  # moved samples of the coarse chamfer
CHUNK = 1_000_000  # distances per brute-force block
COVER = 2.0  # target points this many spacings from a kept sample count as covered
SNAP_STEPS = 4  # rigid ICP iterations that snap a chosen move onto the target
DISTINCT = 0.05  # object sizes: a second first move lands this far from the best somewhere
SECOND_TRIES = 8  # the best first moves among which the second is sought
CLOSE = 0.8  # ... that gain at least this share of the best's: the greedy choice is close


def joint_tree(space: RigSpace, weight: np.ndarray):
    """The parts as one tree: [(part, parent, joint)] in breadth-first order from the part of
    largest ``weight`` (parts,), with the parent part and the joint to it (root: -1, None).

    Parts are linked by their joints; groups of parts that no joint links are linked where
    they come closest (a :class:`Joint` of kind "near" at the middle of the closest pair of
    vertices), nearest groups first, so that every part hangs from the root."""
    num = len(space.layout.part_info)
    links: dict[int, list] = {p: [] for p in range(num)}
    label = np.arange(num)

    def find(p):
        while label[p] != p:
            label[p] = label[label[p]]
            p = label[p]
        return p

    def link(a, b, joint):
        links[a].append((b, joint))
        links[b].append((a, joint))
        label[find(a)] = find(b)

    for joint in space.joints:
        if joint.part_b >= 0:
            link(joint.part_a, joint.part_b, joint)
    parts, x = space.layout.parts, space.vertices
    groups: dict[int, list] = {}
    for p in range(num):
        groups.setdefault(find(p), []).append(p)
    if len(groups) > 1:
        trees = {g: cKDTree(x[np.isin(parts, members)]) for g, members in groups.items()}
        pairs = []
        keys = sorted(groups)
        for i, a in enumerate(keys):
            pa = np.isin(parts, groups[a])
            for b in keys[i + 1 :]:
                d, k = trees[b].query(x[pa])
                j = int(np.argmin(d))
                va, vb = x[pa][j], trees[b].data[k[j]]
                pairs.append((float(d[j]), va, vb))
        for _, va, vb in sorted(pairs, key=lambda item: item[0]):
            a = int(parts[np.argmin(((x - va) ** 2).sum(1))])
            b = int(parts[np.argmin(((x - vb) ** 2).sum(1))])
            if find(a) != find(b):
                link(a, b, Joint(a, b, (0.5 * (va + vb))[None], "near"))
    root = int(np.argmax(weight))
    seen = np.zeros(num, dtype=bool)
    seen[root] = True
    order, queue = [], [(root, -1, None)]
    while queue:
        part, parent, joint = queue.pop(0)
        order.append((part, parent, joint))
        for other, j in sorted(links[part], key=lambda item: -weight[item[0]]):
            if not seen[other]:
                seen[other] = True
                queue.append((other, part, j))
    return order


class _Candidate:
    """A set of parts moved together about ``pivot`` along ``axes`` (in the rest frame of the
    ``anchor`` bone, which carries them to the state)."""

    def __init__(self, parts, anchor, pivot, axes, name, slides=3, ends=()):
        self.parts, self.anchor, self.pivot, self.axes, self.name = parts, anchor, pivot, axes, name
        self.slides = slides  # the first axes, along which it also slides
        self.ends = ends  # [(offset from the pivot (3,), axes)]: other pivots to turn about


def _principal_axes(points: np.ndarray) -> np.ndarray:
    d = points - points.mean(0)
    if len(d) < 3:
        return np.eye(3)
    return np.linalg.svd(d, full_matrices=False)[2]


def _ends(points: np.ndarray, pivot: np.ndarray) -> list:
    """Pivots at the middles of the faces of the points' principal box, as offsets from
    ``pivot``, each with the box's axes: a part that no joint places (it rests on another, or
    only comes near it) may turn about any of its edges, as a lid about its hinge."""
    axes = _principal_axes(points)
    centre = points.mean(0)
    local = (points - centre) @ axes.T  # (n, 3)
    out = []
    for k in range(3):
        for end in (local[:, k].min(), local[:, k].max()):
            if abs(end) > 1e-9:
                out.append((centre + end * axes[k] - pivot, list(axes)))
    return out


def _whole(space: RigSpace) -> _Candidate:
    """The whole object, turned about its centre (frame and principal axes) or slid."""
    x = space.vertices
    every = list(range(len(space.layout.part_info)))
    return _Candidate(every, 0, x.mean(0), list(np.eye(3)) + list(_principal_axes(x)), "all")


def _candidates(fit, order) -> list[_Candidate]:
    space = fit.space
    children: dict[int, list] = {}
    for part, parent, _ in order:
        children.setdefault(parent, []).append(part)

    def subtree(p):
        out, stack = [], [p]
        while stack:
            q = stack.pop()
            out.append(q)
            stack.extend(children.get(q, []))
        return out

    frame = np.eye(3)
    x = space.vertices
    out = [_whole(space)]
    for part, parent, joint in order:
        own = space.layout.parts == part
        if parent < 0:  # the root alone, about its centre (unless it is all there is)
            if len(order) == 1:
                continue
            axes = list(frame) + list(_principal_axes(x[own]))
            anchor = int(np.flatnonzero(space.bone_parts == part)[0])
            pivot = x[own].mean(0)
            ends = _ends(x[own], pivot)
            out.append(_Candidate([part], anchor, pivot, axes, f"part {part}", 3, ends))
            continue
        axes = list(frame) + list(_principal_axes(x[own]))
        slides = 3
        if joint is not None and joint.axis is not None:
            axes.insert(0, np.asarray(joint.axis, dtype=np.float64))
            slides = 4
        placed = joint is not None and joint.kind != "near"
        pivot = joint.points.mean(0) if placed else x[own].mean(0)
        ends = () if placed else _ends(x[own], pivot)
        anchor = int(np.flatnonzero(space.bone_parts == parent)[0])
        out.append(_Candidate([part], anchor, pivot, axes, f"part {part}", slides, ends))
        below = subtree(part)
        if len(below) > 1:
            out.append(_Candidate(below, anchor, pivot, axes, f"parts from {part}", slides, ends))
    return out


def _moves(cand: _Candidate) -> tuple[np.ndarray, np.ndarray]:
    """(turns (H, 3, 3), shifts (H, 3)) of a candidate's moves about its pivot: turns about
    each of its axes, slides along the first ``slides`` of them, and turns about its other
    pivots (a turn T about pivot + d is T about the pivot, shifted by (I - T) d); the
    identity first."""
    turns = [np.eye(3)]
    shifts = [np.zeros(3)]
    for i, axis in enumerate(cand.axes):
        axis = axis / max(np.linalg.norm(axis), 1e-12)
        turns.extend(Rotation.from_rotvec(TURNS[:, None] * axis).as_matrix())
        shifts.extend(np.zeros((len(TURNS), 3)))
        if i < cand.slides:
            turns.extend(np.repeat(np.eye(3)[None], len(SLIDES), 0))
            shifts.extend(SLIDES[:, None] * axis)
    for offset, axes in cand.ends:
        for axis in axes:
            turn = Rotation.from_rotvec(TURNS[:, None] * axis).as_matrix()  # (n, 3, 3)
            turns.extend(turn)
            shifts.extend(offset - turn @ offset)
    return np.asarray(turns), np.asarray(shifts)


class PartSearch:
    """The best-first search of the module docstring against one target, from one state.

    ``target`` (Q, 3) the target points in the normalised frame and ``tree`` their k-d tree;
    the search works on ``points`` (the fit's samples, up to ``SAMPLE_SUBSET``) of parts
    ``sample_parts`` and ``subset``, ``TARGET_SUBSET`` of the target points. Its state is
    (``rot`` (B, 3, 3), ``centre`` (B, 3)) with the samples ``x`` (P, 3), their distances
    ``d1`` (P,) to the target, its chamfer ``current`` and the per-part distances
    ``distances`` (:class:`~.ik_follow.PartDistances`)."""

    def __init__(self, fit, rot, centre, target, tree, *, seed=0, whole=False):
        self.fit, self.space, self.target, self.tree = fit, fit.space, target, tree
        rng = np.random.default_rng(seed)
        p_all = len(fit.sample_parts)
        pick = np.sort(rng.choice(p_all, min(SAMPLE_SUBSET, p_all), replace=False))
        self.points = SkinnedPoints.subset(fit.samples, pick)
        self.sample_parts = fit.sample_parts[pick]
        size = min(TARGET_SUBSET, len(target))
        self.subset = target[rng.choice(len(target), size, replace=False)]
        self.spacing = float(np.median(tree.query(target, 2)[0][:, 1]))
        self.links: dict[int, set] = {}  # part -> the parts its joints link it to
        space = self.space
        if whole:
            self.candidates = [_whole(space)]
        else:  # the root: the part lying best on the target (its samples there x their share)
            num_parts = len(space.layout.part_info)
            on = tree.query(fit.samples.positions(rot, centre))[0] < self.spacing
            count = np.bincount(fit.sample_parts, minlength=num_parts).astype(np.float64)
            lying = np.bincount(fit.sample_parts[on], minlength=num_parts)
            weight = lying**2 / np.maximum(count, 1.0) + 1e-3 * count
            self.candidates = _candidates(fit, joint_tree(space, weight))
            for j in space.joints:
                if j.part_b >= 0:
                    self.links.setdefault(j.part_a, set()).add(j.part_b)
                    self.links.setdefault(j.part_b, set()).add(j.part_a)
        self.moves = {c.name: _moves(c) for c in self.candidates}
        self.set_state(rot.copy(), centre.copy())

    # -- the state ----------------------------------------------------------------------------
    def set_state(self, rot, centre) -> None:
        self.rot, self.centre = rot, centre
        self.x = self.points.positions(rot, centre)
        self.d1 = self.tree.query(self.x)[0]
        self.current = self.chamfer(self.x, self.d1)
        self._distances = None

    @property
    def distances(self) -> PartDistances:
        """The per-part distances at the state, found when first asked (by a move's
        following parts)."""
        if self._distances is None:
            num_parts = len(self.space.layout.part_info)
            self._distances = PartDistances(
                self.x, self.d1, self.sample_parts, num_parts, self.subset
            )
        return self._distances

    def chamfer(self, x, d1) -> float:
        """The search's chamfer of samples x (P, 3), d1 their distances to the target."""
        near = cKDTree(x).query(self.subset)[0]
        return 0.5 * (float(np.mean(d1**2)) + float(np.mean(near**2)))

    def chamfer_of(self, rot, centre) -> float:
        x = self.points.positions(rot, centre)
        return self.chamfer(x, self.tree.query(x)[0])

    # -- scoring moves ------------------------------------------------------------------------
    def costs(self, mine, turns, shifts, pivot) -> np.ndarray:
        """(H,) the chamfer with the samples ``mine`` moved by each of the moves (turns
        (H, 3, 3) about ``pivot``, then shifts (H, 3)), the others kept; of many moves, only
        the ``SHORTLIST`` best by a coarse chamfer (``COARSE_MOVED`` of the moved samples)
        and the identity (the first) are scored in full, the others are infinite (the
        coarse brute force in single precision: it only ranks)."""
        still = ~mine
        x, subset = self.x, self.subset
        to_still = (
            cKDTree(x[still]).query(subset)[0] if still.any() else np.full(len(subset), np.inf)
        )
        if len(turns) <= SHORTLIST:
            return self._costs(mine, to_still, turns, shifts, pivot, MOVED_SUBSET)
        coarse = self._costs(mine, to_still, turns, shifts, pivot, COARSE_MOVED, np.float32)
        coarse[0] = -np.inf
        keep = np.argpartition(coarse, SHORTLIST)[:SHORTLIST]
        out = np.full(len(turns), np.inf)
        out[keep] = self._costs(mine, to_still, turns[keep], shifts[keep], pivot, MOVED_SUBSET)
        return out

    def _costs(
        self, mine, to_still, turns, shifts, pivot, moved: int, dtype=np.float64
    ) -> np.ndarray:
        """:meth:`costs` of every move from ``moved`` of the moved samples, the brute force
        in ``dtype``; ``to_still`` (Q,): the target points' distances to the kept samples."""
        x, d1, subset = self.x, self.d1, self.subset
        still = ~mine
        d_still = float((d1[still] ** 2).sum())
        y0 = x[mine][:moved] - pivot  # (S, 3) (the subset is seeded, so any S are)
        ys = np.einsum("hij,sj->hsi", turns, y0) + pivot + shifts[:, None]  # (H, S, 3)
        h, s = ys.shape[:2]
        d1y = self.tree.query(ys.reshape(-1, 3))[0].reshape(h, s)
        share = mine.sum() / s  # the moved samples' share of the chamfer
        # the target points that the kept samples cover (COVER spacings) keep their
        # distance: the moves are scored on the others (brute force, all moves at once)
        open_ = np.flatnonzero(to_still > COVER * self.spacing)
        d2 = np.broadcast_to(to_still, (h, len(subset))).copy()
        if len(open_):
            ref = subset[open_].astype(dtype)  # (Q', 3)
            near = np.empty((h, len(open_)))
            block = max(1, CHUNK // max(s * len(open_), 1))
            for i in range(0, h, block):
                y = ys[i : i + block].reshape(-1, 3).astype(dtype)  # (b S, 3)
                d = y @ ref.T  # (b S, Q'): |y - r|^2 - |r|^2, in place
                d *= -2.0
                d += (y**2).sum(1)[:, None]
                near[i : i + block] = d.reshape(-1, s, len(open_)).min(1)
            near += (subset[open_] ** 2).sum(1)  # |r|^2 is the same for every sample
            d2[:, open_] = np.minimum(d2[:, open_], np.sqrt(np.maximum(near, 0.0)))
        return 0.5 * ((d_still + share * (d1y**2).sum(1)) / len(x) + (d2**2).mean(1))

    def snap(self, mine, turn, shift, pivot, x):
        """The move (turn (3, 3) about ``pivot``, then shift (3,)) refined by ``SNAP_STEPS``
        iterations of rigid ICP of the samples ``mine`` of x (P, 3) onto the target: the
        moves come in steps (30 degrees, a few slide lengths), the target's motion between."""
        y0, target = x[mine], self.target
        for _ in range(SNAP_STEPS):
            y = (y0 - pivot) @ turn.T + pivot + shift  # (S, 3)
            d, near = self.tree.query(y)
            keep = d <= 3.0 * np.median(d) + 1e-12  # trimmed: pairs far off do not pull
            if keep.sum() < 3:
                break
            r = best_rotations(y[keep], target[near[keep]][None])[0]
            t = target[near[keep]].mean(0) - r @ y[keep].mean(0)
            turn, shift = r @ turn, r @ (pivot + shift) + t - pivot
        return turn, shift

    def best_move(self, cand: _Candidate):
        """(gain, move index, turn, shift, pivot, parts) of the candidate's best move from the
        state, snapped, with the parts that follow it (:func:`~.ik_follow.grow`); None for a
        set not searched."""
        rot, centre, d1 = self.rot, self.centre, self.d1
        mine = np.isin(self.sample_parts, cand.parts)
        if mine.sum() < max(MIN_SHARE * len(d1), 1) or mine.all() and cand.name != "all":
            return None
        if (d1[mine] < self.spacing).mean() >= SETTLED:
            return None
        a = cand.anchor
        pivot = (cand.pivot - self.space.heads[a]) @ rot[a].T + centre[a]
        turns, shifts = self.moves[cand.name]
        turns = rot[a] @ turns @ rot[a].T  # the axes as turned with the anchor bone
        shifts = shifts @ rot[a].T
        cds = self.costs(mine, turns, shifts, pivot)
        k = int(np.argmin(cds))
        parts, best, turn, shift, gain = list(cand.parts), cds[k], turns[k], shifts[k], None
        if k > 0:
            turn_s, shift_s = self.snap(mine, turn, shift, pivot, self.x)
            cost = self.costs(mine, turn_s[None], shift_s[None], pivot)[0]
            if cost < best:
                best, turn, shift = cost, turn_s, shift_s
        if k > 0 and cand.name != "all" and self.links:
            grown, turn_g, shift_g, cost = grow(self, parts, turn, shift, pivot)
            if len(grown) > len(parts):  # (its cost is exact: the gain from the exact chamfer)
                parts, turn, shift, gain = grown, turn_g, shift_g, self.current - cost
        gain = cds[0] - best if gain is None else gain
        return gain, k, turn, shift, pivot, parts

    # -- the search ---------------------------------------------------------------------------
    def run(self, max_moves: int | None = None, second: bool = False) -> list | None:
        """Best first from the state, then the joints mended (:func:`~.ik_follow.
        mend_joints`); returns the moves applied [(name, chamfer before, chamfer after)].
        ``second``: the first move is the best one that lands elsewhere than the best
        (:meth:`second_first`); None when there is none."""
        candidates = self.candidates
        max_moves = 2 * len(candidates) if max_moves is None else max_moves
        applied, version, queue = [], 0, []
        for i, cand in enumerate(candidates):
            found = self.best_move(cand)
            if found is not None and found[1] > 0:
                heapq.heappush(queue, (-found[0], i, version, found))
        if second:
            queue = self.second_first(queue)
            if queue is None:
                return None
        while queue and len(applied) < max_moves:
            gain, i, seen, found = heapq.heappop(queue)
            if seen != version:
                found = self.best_move(candidates[i])
                if found is not None and found[1] > 0:
                    heapq.heappush(queue, (-found[0], i, version, found))
                continue
            if -gain < GAIN * self.current:
                break
            _, _, turn, shift, pivot, parts = found
            before = self.current
            self.set_state(
                *moved_state(self.space, self.rot, self.centre, parts, turn, shift, pivot)
            )
            name = candidates[i].name
            if len(parts) > len(candidates[i].parts):
                name += f" with {len(parts) - len(candidates[i].parts)} following"
            applied.append((name, before, self.current))
            version += 1
            found = self.best_move(candidates[i])
            if found is not None and found[1] > 0:
                heapq.heappush(queue, (-found[0], i, version, found))
        if self.links:
            applied.extend(mend_joints(self))
        return applied

    def second_first(self, queue: list) -> list | None:
        """The queue with its best move put behind, and from the others that gain nearly as much
        (``CLOSE``), the best whose samples land more than ``DISTINCT`` object sizes
        (somewhere) from where the best move's land on top; None when no such move is there
        (the module docstring, *A second search*)."""
        if not queue:
            return None
        entries = sorted(queue)
        lands = [self._landing(e[3]) for e in entries[:SECOND_TRIES]]
        for k in range(1, len(lands)):
            gain = -entries[k][0]
            if gain < max(GAIN * self.current, CLOSE * -entries[0][0]):
                break
            if np.linalg.norm(lands[k] - lands[0], axis=1).max() > DISTINCT:
                rest = [e for i, e in enumerate(entries) if i != k]
                # its entry first, the others (the best's too) re-evaluated once it is applied
                out = [(-np.inf, *entries[k][1:])] + rest
                heapq.heapify(out)
                return out
        return None

    def _landing(self, found) -> np.ndarray:
        """(P, 3) the samples with a move (an entry of the queue) applied."""
        _, _, turn, shift, pivot, parts = found
        return self.points.positions(
            *moved_state(self.space, self.rot, self.centre, parts, turn, shift, pivot)
        )


def search_parts(
    fit, rot, centre, target, tree, *, max_moves=None, seed=0, whole=False, second=False
):
    """The state (rot (B, 3, 3), centre (B, 3)) after the best-first search of the module
    docstring (:class:`PartSearch`), from the given one, against ``target`` (Q, 3) with its
    k-d tree ``tree``; ``whole``: only moves of the whole object; ``second``: the search whose
    first move is the best that lands elsewhere than the best (:meth:`PartSearch.
    second_first`). Returns (rot, centre, the moves applied [(name, chamfer before, chamfer
    after)]), or None for a second search that has no such first move."""
    search = PartSearch(fit, rot, centre, target, tree, seed=seed, whole=whole)
    applied = search.run(max_moves, second=second)
    if applied is None:
        return None
    return search.rot, search.centre, applied
