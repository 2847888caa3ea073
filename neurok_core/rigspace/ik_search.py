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

**Following parts.** A move found for one set is snapped onto the target (``SNAP_STEPS``
iterations of rigid ICP of its samples: the moves come in steps, the target's motion lies
between them), and the parts jointed to the set follow it while that costs less than a move
must earn (``GAIN``; :func:`search_parts`' ``grow``): a drawer's panels follow its front, a
window sash's rails its glass, where the joints detected on M0 also tie the drawer to its
carcass, so the tree's subtrees do not say which parts form the drawer.

**Mended joints.** When the search ends, jointed rigid parts that it left moving apart
join again (:func:`_mend_joints`) where the target allows it: a sash moved in two pieces
becomes one.

**Best first.** Every candidate set gets the move of lowest chamfer (its samples moved, the
others kept), and the move of largest gain over all candidates is applied; the gains are
kept in a queue and re-evaluated only when they reach its top after a move was applied
(lazy greedy). The search stops when no move lowers the chamfer by ``GAIN`` of its value, or
after ``max_moves``. Sets that already lie on the target (``SETTLED`` of their samples within
the target's point spacing) are not moved, and sets of under ``MIN_SHARE`` of the samples are
left to the local solver.

Costs: the search's chamfer is that of the samples (up to ``SAMPLE_SUBSET``) against
``TARGET_SUBSET`` of the target points (a seeded subset): two window sashes a few
hundredths of the size apart need that resolution. A candidate's moves are scored all at
once, ``MOVED_SUBSET`` of its samples moved, its target-to-samples half by brute force over
the target points that the kept samples do not cover; the following parts are scored from
each part's own distances (:class:`_PartTable`).
"""

from __future__ import annotations

import heapq

import numpy as np
from scipy.spatial import cKDTree
from scipy.spatial.transform import Rotation

from ..metrics import best_rotations
from .ik import SkinnedPoints
from .joints import Joint
from .space import RigSpace

GAIN = 0.03  # a move is applied when it lowers the chamfer by this share at least
SETTLED = 0.8  # share of a set's samples within the target's spacing: it is not moved
MIN_SHARE = 0.01  # sets with fewer samples are left to the local solver
TARGET_SUBSET = 1024
TURNS = np.radians(np.concatenate([np.arange(30, 181, 30), -np.arange(30, 151, 30)]))
SLIDES = np.concatenate(
    [[0.05, 0.1, 0.2, 0.3, 0.45, 0.6], -np.array([0.05, 0.1, 0.2, 0.3, 0.45, 0.6])]
)
SAMPLE_SUBSET = 512
MOVED_SUBSET = 96  # of them, moved samples of a candidate at most
CHUNK = 1_000_000  # distances per brute-force block
COVER = 2.0  # target points this many spacings from a kept sample count as covered
MAX_FOLLOW = 0.5  # share of the samples a move's following parts bring it to at most
MEND_GAP = 0.02  # object sizes: a joint whose parts' motions disagree this much there
SNAP_STEPS = 4  # rigid ICP iterations that snap a chosen move onto the target


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


class _State:
    """The search's samples at a state: positions x (P, 3), distances d1 (P,) to the target;
    per part, its samples' indices ``own``, the sum of their squared distances (parts,) and
    each target point's distance to its nearest sample of the part ``near`` (parts, Q)."""

    def __init__(self, x, d1, sample_parts, num_parts: int, subset: np.ndarray):
        self.x, self.d1, self.subset = x, d1, subset
        self.own = {int(p): np.flatnonzero(sample_parts == p) for p in np.unique(sample_parts)}
        self.d1_sq = np.zeros(num_parts)
        self.near = np.full((num_parts, len(subset)), np.inf)
        for p, idx in self.own.items():
            self.d1_sq[p] = float((d1[idx] ** 2).sum())
            self.near[p] = cKDTree(x[idx]).query(subset)[0]


class _PartTable:
    """The chamfer of the state with a set of parts moved by one move (turn (3, 3) about
    ``pivot``, then shift (3,)): each part's moved terms found once, when first asked."""

    def __init__(self, state: _State, turn, shift, pivot, tree):
        self.state, self.tree = state, tree
        self.turn, self.shift, self.pivot = turn, shift, pivot
        self.moved: dict[int, tuple[float, np.ndarray]] = {}

    def _part(self, p: int):
        if p not in self.moved:
            s = self.state
            y = (s.x[s.own[p]] - self.pivot) @ self.turn.T + self.pivot + self.shift
            self.moved[p] = (
                float((self.tree.query(y)[0] ** 2).sum()),
                cKDTree(y).query(s.subset)[0],
            )
        return self.moved[p]

    def cost(self, group: set) -> float:
        s = self.state
        parts = [p for p in group if p in s.own]
        still = np.ones(len(s.d1_sq), dtype=bool)
        still[parts] = False
        d1_sq = float(s.d1_sq[still].sum()) + sum(self._part(p)[0] for p in parts)
        near = s.near[still].min(0) if still.any() else np.full(len(s.subset), np.inf)
        for p in parts:
            near = np.minimum(near, self._part(p)[1])
        return 0.5 * (d1_sq / len(s.x) + float(np.mean(near**2)))


def _mend_joints(space: RigSpace, rot, centre, search, current: float):
    """The state with the joints that the search pulled apart mended where the target allows.
    The rigid parts (one bone each) fall into clusters of parts whose joints hold (their
    motions agree within ``MEND_GAP`` at the joint); two jointed clusters become one, moved
    by the motion of either snapped onto the target (:func:`search_parts`' ``snap``), when
    the chamfer stays within ``GAIN`` of the lowest seen, the mend of lowest chamfer first (a
    window sash that the search moved in two pieces becomes one again; a lamp's arm turned
    off its base does not: that costs more). Each mend holds one joint more, so it ends.
    ``search``: (points, their parts, the target's k-d tree, snap(mine, turn, shift, pivot,
    x), chamfer(x, d1)) of :func:`search_parts`. Returns (rot, centre, [(name, before,
    after)])."""
    points, sample_parts, tree, snap, chamfer = search
    single = {}
    for p in range(len(space.layout.part_info)):
        bones = np.flatnonzero(space.bone_parts == p)
        if len(bones) == 1:
            single[p] = int(bones[0])
    joints = [j for j in space.joints if j.part_a in single and j.part_b in single]
    heads = space.heads
    lowest, out = current, []

    def at(part, joint):  # where the part's motion takes the middle of the joint
        b = single[part]
        return rot[b] @ (joint.points.mean(0) - heads[b]) + centre[b]

    for _ in range(len(joints)):
        held = [j for j in joints if np.linalg.norm(at(j.part_a, j) - at(j.part_b, j)) <= MEND_GAP]
        label = {p: p for p in single}

        def find(p, label=label):
            while label[p] != p:
                p = label[p]
            return p

        for j in held:
            label[find(j.part_a)] = find(j.part_b)
        best = None
        tried = set()
        for j in joints:
            for a, b in ((j.part_a, j.part_b), (j.part_b, j.part_a)):
                if find(a) == find(b) or (find(a), find(b)) in tried:
                    continue
                tried.add((find(a), find(b)))
                cluster = [p for p in single if find(p) == find(a)]
                both = cluster + [p for p in single if find(p) == find(b)]
                ba, bb = single[a], single[b]
                turn = rot[bb] @ rot[ba].T  # y -> R_b (R_a^T (y - c_a) + h_a - h_b) + c_b
                shift = rot[bb] @ (heads[ba] - heads[bb]) + centre[bb] - centre[ba]
                pivot = centre[ba].copy()
                rot_n, centre_n = rot.copy(), centre.copy()
                bones = np.flatnonzero(np.isin(space.bone_parts, cluster))
                rot_n[bones] = turn @ rot[bones]
                centre_n[bones] = (centre[bones] - pivot) @ turn.T + pivot + shift
                x_n = points.positions(rot_n, centre_n)
                mine = np.isin(sample_parts, both)
                if not mine.any():
                    continue
                centre_g = x_n[mine].mean(0)
                turn_s, shift_s = snap(mine, np.eye(3), np.zeros(3), centre_g, x_n)
                bones = np.flatnonzero(np.isin(space.bone_parts, both))
                rot_n[bones] = turn_s @ rot_n[bones]
                centre_n[bones] = (centre_n[bones] - centre_g) @ turn_s.T + centre_g + shift_s
                x_n = points.positions(rot_n, centre_n)
                c = chamfer(x_n, tree.query(x_n)[0])
                if best is None or c < best[0]:
                    best = (c, a, b, rot_n, centre_n)
        if best is None or best[0] > lowest * (1.0 + GAIN):
            break
        c, a, b, rot, centre = best
        out.append((f"part {a} joins {b}", current, c))
        current, lowest = c, min(lowest, c)
    return rot, centre, out


def search_parts(fit, rot, centre, target, tree, *, max_moves=None, seed=0, whole=False):
    """The state (rot (B, 3, 3), centre (B, 3)) after the best-first search of the module
    docstring, from the given one, against ``target`` (Q, 3) with its k-d tree ``tree``;
    ``whole``: only moves of the whole object. Returns (rot, centre, the moves applied
    [(name, chamfer before, chamfer after)])."""
    space = fit.space
    rot, centre = rot.copy(), centre.copy()
    rng = np.random.default_rng(seed)
    p_all = len(fit.sample_parts)
    pick = np.sort(rng.choice(p_all, min(SAMPLE_SUBSET, p_all), replace=False))
    points = SkinnedPoints.subset(fit.samples, pick)
    sample_parts = fit.sample_parts[pick]
    subset = target[rng.choice(len(target), min(TARGET_SUBSET, len(target)), replace=False)]
    x = points.positions(rot, centre)
    spacing = float(np.median(tree.query(target, 2)[0][:, 1]))
    links: dict[int, set] = {}  # part -> the parts its joints link it to
    if whole:
        candidates = [_whole(space)]
    else:  # the root: the part lying best on the target (its samples there, times their share)
        num_parts = len(space.layout.part_info)
        on = tree.query(fit.samples.positions(rot, centre))[0] < spacing
        count = np.bincount(fit.sample_parts, minlength=num_parts).astype(np.float64)
        lying = np.bincount(fit.sample_parts[on], minlength=num_parts)
        weight = lying**2 / np.maximum(count, 1.0) + 1e-3 * count
        order = joint_tree(space, weight)
        candidates = _candidates(fit, order)
        for a, b in [(j.part_a, j.part_b) for j in space.joints if j.part_b >= 0]:
            links.setdefault(a, set()).add(b)
            links.setdefault(b, set()).add(a)
    p_count = len(x)
    moves = {c.name: _moves(c) for c in candidates}
    max_moves = 2 * len(candidates) if max_moves is None else max_moves

    def chamfer(x, d1):  # d1: the samples' distances to the target
        return 0.5 * (float(np.mean(d1**2)) + float(np.mean(cKDTree(x).query(subset)[0] ** 2)))

    def costs(mine, turns, shifts, pivot, x, d1):
        """(H,) the chamfer with the samples ``mine`` moved by each of the moves (turns
        (H, 3, 3) about ``pivot``, then shifts (H, 3)), the others kept."""
        still = ~mine
        d_still = float((d1[still] ** 2).sum())
        to_still = (
            cKDTree(x[still]).query(subset)[0] if still.any() else np.full(len(subset), np.inf)
        )
        y0 = x[mine][:MOVED_SUBSET] - pivot  # (S, 3) (the subset is seeded, so any S are)
        ys = np.einsum("hij,sj->hsi", turns, y0) + pivot + shifts[:, None]  # (H, S, 3)
        h, s = ys.shape[:2]
        d1y = tree.query(ys.reshape(-1, 3))[0].reshape(h, s)
        share = mine.sum() / s  # the moved samples' share of the chamfer
        # the target points that the kept samples cover (one spacing) keep their distance:
        # the moves are scored on the others (brute force, all the moves at once)
        open_ = np.flatnonzero(to_still > COVER * spacing)
        d2 = np.broadcast_to(to_still, (h, len(subset))).copy()
        if len(open_):
            ref = subset[open_]  # (Q', 3)
            near = np.empty((h, len(open_)))
            block = max(1, CHUNK // max(s * len(open_), 1))
            ref2 = (ref**2).sum(1)  # (Q',)
            for i in range(0, h, block):
                y = ys[i : i + block].reshape(-1, 3)  # (b S, 3)
                d = (y**2).sum(1)[:, None] + ref2[None] - 2.0 * (y @ ref.T)  # (b S, Q')
                near[i : i + block] = d.reshape(-1, s, len(open_)).min(1)
            d2[:, open_] = np.minimum(d2[:, open_], np.sqrt(np.maximum(near, 0.0)))
        return 0.5 * ((d_still + share * (d1y**2).sum(1)) / p_count + (d2**2).mean(1))

    def grow(parts, turn, shift, pivot, x, d1):
        """(parts, turn, shift, cost): ``parts`` and the parts jointed to them (transitively)
        that follow the move (turn (3, 3) about ``pivot``, then shift (3,)), the move snapped
        again (:func:`snap`) each time the group doubles, and the chamfer of the whole. A joint that
        a move pulls apart must earn what a move does (``GAIN`` of the chamfer), so a part is
        added, the one of lowest chamfer first, while the chamfer stays within that of the
        lowest seen (a drawer's panels follow its front, a sash's rails its glass), up to
        ``MAX_FOLLOW`` of the samples (more is the rest moved back and the whole moved). The
        chamfers come from each part's distances (:class:`_PartTable`), exact over the
        samples."""
        table = _PartTable(state, turn, shift, pivot, tree)
        group = set(parts)
        cost = table.cost(group)
        lowest, allowance = cost, GAIN * current
        size = sum(len(state.own.get(p, ())) for p in group)
        snapped_at = len(group)
        while True:
            ring = sorted({q for p in group for q in links.get(p, ()) if q not in group})
            tried = [
                (table.cost(group | {q}), q)
                for q in ring
                if q in state.own and size + len(state.own[q]) <= MAX_FOLLOW * p_count
            ]
            c, q = min(tried, default=(np.inf, -1))
            if c > lowest + allowance:
                return sorted(group), turn, shift, cost
            group.add(q)
            size += len(state.own[q])
            cost = c
            if len(group) >= 2 * snapped_at:  # the move snapped again as the group doubles
                snapped_at = len(group)
                turn_s, shift_s = snap(np.isin(sample_parts, list(group)), turn, shift, pivot, x)
                snapped = _PartTable(state, turn_s, shift_s, pivot, tree)
                c = snapped.cost(group)
                if c < cost:
                    table, turn, shift, cost = snapped, turn_s, shift_s, c
            lowest = min(lowest, cost)

    def snap(mine, turn, shift, pivot, x):
        """The move (turn (3, 3) about ``pivot``, then shift (3,)) refined by ``SNAP_STEPS``
        iterations of rigid ICP of the moved samples ``mine`` onto the target: the moves come
        in steps (30 degrees, a few slide lengths), the target's motion between them."""
        y0 = x[mine]
        for _ in range(SNAP_STEPS):
            y = (y0 - pivot) @ turn.T + pivot + shift  # (S, 3)
            d, near = tree.query(y)
            keep = d <= 3.0 * np.median(d) + 1e-12  # trimmed: pairs far off do not pull
            if keep.sum() < 3:
                break
            r = best_rotations(y[keep], target[near[keep]][None])[0]
            t = target[near[keep]].mean(0) - r @ y[keep].mean(0)
            turn, shift = r @ turn, r @ (pivot + shift) + t - pivot
        return turn, shift

    def best_move(cand: _Candidate, x: np.ndarray, d1: np.ndarray):
        """(gain, move index, turn, shift, pivot, parts) of the candidate's best move from
        the samples x, d1 their distances to the target, with the parts that follow it
        (:func:`grow`) when that is better; None for a set not searched."""
        mine = np.isin(sample_parts, cand.parts)
        if mine.sum() < max(MIN_SHARE * p_count, 1) or mine.all() and cand.name != "all":
            return None
        if (d1[mine] < spacing).mean() >= SETTLED:
            return None
        a = cand.anchor
        pivot = (cand.pivot - space.heads[a]) @ rot[a].T + centre[a]
        turns, shifts = moves[cand.name]
        turns = rot[a] @ turns @ rot[a].T  # the axes as turned with the anchor bone
        shifts = shifts @ rot[a].T
        cds = costs(mine, turns, shifts, pivot, x, d1)
        k = int(np.argmin(cds))
        parts, best, turn, shift, gain = list(cand.parts), cds[k], turns[k], shifts[k], None
        if k > 0:
            turn_s, shift_s = snap(mine, turn, shift, pivot, x)
            cost = costs(mine, turn_s[None], shift_s[None], pivot, x, d1)[0]
            if cost < best:
                best, turn, shift = cost, turn_s, shift_s
        if k > 0 and cand.name != "all" and links:
            grown, turn_g, shift_g, cost = grow(parts, turn, shift, pivot, x, d1)
            if len(grown) > len(parts):  # (its cost is exact: the gain from the exact chamfer)
                parts, turn, shift, gain = grown, turn_g, shift_g, current - cost
        gain = cds[0] - best if gain is None else gain
        return gain, k, turn, shift, pivot, parts

    def state_of(x, d1):
        return _State(x, d1, sample_parts, len(space.layout.part_info), subset) if links else None

    applied = []
    d1 = tree.query(x)[0]
    current = chamfer(x, d1)
    state = state_of(x, d1)
    version = 0
    queue = []
    for i, cand in enumerate(candidates):
        found = best_move(cand, x, d1)
        if found is not None and found[1] > 0:
            heapq.heappush(queue, (-found[0], i, version, found))
    while queue and len(applied) < max_moves:
        gain, i, seen, found = heapq.heappop(queue)
        if seen != version:
            found = best_move(candidates[i], x, d1)
            if found is not None and found[1] > 0:
                heapq.heappush(queue, (-found[0], i, version, found))
            continue
        if -gain < GAIN * current:
            break
        _, _, turn, shift, pivot, parts = found
        bones = np.flatnonzero(np.isin(space.bone_parts, parts))
        rot[bones] = turn @ rot[bones]
        centre[bones] = (centre[bones] - pivot) @ turn.T + pivot + shift
        x = points.positions(rot, centre)
        d1 = tree.query(x)[0]
        before, current = current, chamfer(x, d1)
        state = state_of(x, d1)
        name = candidates[i].name
        if len(parts) > len(candidates[i].parts):
            name += f" with {len(parts) - len(candidates[i].parts)} following"
        applied.append((name, before, current))
        version += 1
        found = best_move(candidates[i], x, d1)
        if found is not None and found[1] > 0:
            heapq.heappush(queue, (-found[0], i, version, found))
    if links:
        search = (points, sample_parts, tree, snap, chamfer)
        rot, centre, mended = _mend_joints(space, rot, centre, search, current)
        applied.extend(mended)
    return rot, centre, applied
