"""Parts that move together in the rig-space search (:mod:`.ik_search`): following and mending.

The joints detected on M0 say which parts touch, not which move together: a drawer's panels
are jointed to each other and to the carcass alike, a window sash's rails to its glass and to
the frame. The search therefore decides from the target.

- **Following** (:func:`grow`): when a move is found for a set of parts, the parts jointed to
  the set (transitively) are added, the one of lowest chamfer first, while the chamfer stays
  within ``GAIN`` of the lowest seen: a joint that a move pulls apart must earn what a move
  does. A drawer's panels follow its front; the carcass does not, as moving it costs more.
  The group stops at ``MAX_FOLLOW`` of the samples (a larger group is the rest moved back
  and the whole moved, which the whole object's own moves cover); the move is snapped again
  (:meth:`~.ik_search.PartSearch.snap`) each time the group doubles.
- **Mending** (:func:`mend_joints`): when the search ends, the rigid parts fall into clusters
  whose joints hold (their motions agree within ``MEND_GAP`` at the joint); two jointed
  clusters become one, moved by either's motion snapped onto the target, while the chamfer
  stays within ``GAIN`` of the lowest seen. A sash that the search moved in two pieces
  becomes one; a lamp's arm turned off its base does not, as that costs more.

The chamfers of a group are exact over the search's samples, from each part's own
distances (:class:`PartDistances`, :class:`MovedParts`).
"""

from __future__ import annotations

import numpy as np
from scipy.spatial import cKDTree

GAIN = 0.03  # a move (or a joint pulled apart) must lower the chamfer by this share
MAX_FOLLOW = 0.5  # share of the samples a move's following parts bring it to at most
MEND_GAP = 0.02  # object sizes: a joint whose parts' motions disagree this much there
BRUTE = 64  # samples up to which nearest distances are found by brute force


class PartDistances:
    """The search's samples at a state, per part: the samples' indices ``own`` (part ->
    (n,)), the sum of their squared distances to the target ``d1_sq`` (parts,), and each
    target point's distance to the part's nearest sample ``near`` (parts, Q)."""

    def __init__(self, x, d1, sample_parts, num_parts: int, subset: np.ndarray):
        self.x, self.subset = x, subset
        self.own = {int(p): np.flatnonzero(sample_parts == p) for p in np.unique(sample_parts)}
        self.d1_sq = np.zeros(num_parts)
        self.near = np.full((num_parts, len(subset)), np.inf)
        for p, idx in self.own.items():
            self.d1_sq[p] = float((d1[idx] ** 2).sum())
            self.near[p] = cKDTree(x[idx]).query(subset)[0]


def nearest(points: np.ndarray, y: np.ndarray) -> np.ndarray:
    """(Q,) each of ``points`` (Q, 3)'s distance to the nearest of ``y`` (n, 3): by brute
    force for the few samples of a part, by a k-d tree beyond."""
    if len(y) > BRUTE:
        return cKDTree(y).query(points)[0]
    d = (points**2).sum(1)[:, None] + (y**2).sum(1)[None] - 2.0 * (points @ y.T)  # (Q, n)
    return np.sqrt(np.maximum(d.min(1), 0.0))


class MovedParts:
    """The chamfer of the state with a set of parts moved by one move (turn (3, 3) about
    ``pivot``, then shift (3,)): each part's moved terms found once, when first asked."""

    def __init__(self, parts: PartDistances, turn, shift, pivot, tree: cKDTree):
        self.parts, self.tree = parts, tree
        self.turn, self.shift, self.pivot = turn, shift, pivot
        self.moved: dict[int, tuple[float, np.ndarray]] = {}

    def _part(self, p: int):
        if p not in self.moved:
            s = self.parts
            y = (s.x[s.own[p]] - self.pivot) @ self.turn.T + self.pivot + self.shift
            self.moved[p] = (float((self.tree.query(y)[0] ** 2).sum()), nearest(s.subset, y))
        return self.moved[p]

    def cost(self, group: set) -> float:
        return self.costs(group, [None])[0]

    def costs(self, group: set, extra: list) -> list[float]:
        """The chamfer with ``group`` moved and, for each part q of ``extra`` (None: no
        part), q moved with it: the kept parts' nearest distances are the smallest and the
        second smallest over them per target point, so that each q costs one pass."""
        s = self.parts
        moved = [p for p in group if p in s.own]
        still = np.ones(len(s.d1_sq), dtype=bool)
        still[moved] = False
        d1_sq = float(s.d1_sq[still].sum()) + sum(self._part(p)[0] for p in moved)
        near_moved = np.full(len(s.subset), np.inf)
        for p in moved:
            near_moved = np.minimum(near_moved, self._part(p)[1])
        kept = np.flatnonzero(still)
        pad = np.full((2, len(s.subset)), np.inf)  # two rows that no kept part undercuts
        rows = np.concatenate([s.near[kept], pad])  # (K + 2, Q)
        two = np.partition(rows, 1, axis=0)[:2]  # (2, Q) the smallest and the second
        first = np.append(kept, [-1, -1])[np.argmin(rows, axis=0)]  # (Q,) whose is smallest
        out = []
        for q in extra:
            if q is None or q not in s.own or not still[q]:
                near = np.minimum(two[0], near_moved)
                out.append(0.5 * (d1_sq / len(s.x) + float(np.mean(near**2))))
                continue
            moved_q, near_q = self._part(q)
            near = np.minimum(np.where(first == q, two[1], two[0]), near_moved)
            near = np.minimum(near, near_q)
            d1 = d1_sq - float(s.d1_sq[q]) + moved_q
            out.append(0.5 * (d1 / len(s.x) + float(np.mean(near**2))))
        return out


def grow(search, parts, turn, shift, pivot):
    """(parts, turn, shift, cost): ``parts`` with the parts that follow the move (module
    docstring), the move as snapped, and the chamfer of the state with the group moved.
    ``search``: the :class:`~.ik_search.PartSearch` at its current state."""
    distances = search.distances
    table = MovedParts(distances, turn, shift, pivot, search.tree)
    group = set(parts)
    cost = table.cost(group)
    lowest, allowance = cost, GAIN * search.current
    size = sum(len(distances.own.get(p, ())) for p in group)
    limit = MAX_FOLLOW * len(search.x)
    snapped_at = len(group)
    while True:
        ring = sorted({q for p in group for q in search.links.get(p, ()) if q not in group})
        ring = [q for q in ring if q in distances.own and size + len(distances.own[q]) <= limit]
        tried = list(zip(table.costs(group, ring), ring, strict=True))
        c, q = min(tried, default=(np.inf, -1))
        if c > lowest + allowance:
            return sorted(group), turn, shift, cost
        group.add(q)
        size += len(distances.own[q])
        cost = c
        if len(group) >= 2 * snapped_at:  # the move snapped again as the group doubles
            snapped_at = len(group)
            mine = np.isin(search.sample_parts, list(group))
            turn_s, shift_s = search.snap(mine, turn, shift, pivot, search.x)
            snapped = MovedParts(distances, turn_s, shift_s, pivot, search.tree)
            c = snapped.cost(group)
            if c < cost:
                table, turn, shift, cost = snapped, turn_s, shift_s, c
        lowest = min(lowest, cost)


def mend_joints(search, allowance: float = GAIN) -> list:
    """Mend the joints that ``search`` (a :class:`~.ik_search.PartSearch`) left pulled
    apart (module docstring), moving it to the mended state, while the chamfer stays within
    ``allowance`` of the lowest seen. Each mend holds one joint more, so it ends. Returns
    the mends [(name, chamfer before, after)]."""
    space = search.space
    single = {}  # the rigid parts: part -> its one bone
    for p in range(len(space.layout.part_info)):
        bones = np.flatnonzero(space.bone_parts == p)
        if len(bones) == 1:
            single[p] = int(bones[0])
    joints = [j for j in space.joints if j.part_a in single and j.part_b in single]
    heads = space.heads
    lowest, out, mended = search.current, [], {}
    for _ in range(len(joints)):
        rot, centre = search.rot, search.centre

        def at(part, joint, rot=rot, centre=centre):  # the middle of the joint, moved
            b = single[part]
            return rot[b] @ (joint.points.mean(0) - heads[b]) + centre[b]

        label = {p: p for p in single}

        def find(p, label=label):
            while label[p] != p:
                p = label[p]
            return p

        for j in joints:
            if np.linalg.norm(at(j.part_a, j) - at(j.part_b, j)) <= MEND_GAP:
                label[find(j.part_a)] = find(j.part_b)
        best, tried = None, set()
        for j in joints:
            for a, b in ((j.part_a, j.part_b), (j.part_b, j.part_a)):
                if find(a) == find(b) or (find(a), find(b)) in tried:
                    continue
                tried.add((find(a), find(b)))
                cluster = [p for p in single if find(p) == find(a)]
                both = cluster + [p for p in single if find(p) == find(b)]
                mine = np.isin(search.sample_parts, both)
                if not mine.any():
                    continue
                # the two clusters' states change only when they are mended, and then
                # their membership does: a mend's state is kept under its memberships
                key = (a, b, frozenset(cluster), frozenset(both))
                if key not in mended:
                    mended[key] = _mend(search, single, cluster, both, mine, a, b)
                bones, rot_b, centre_b, y = mended[key]
                c = replaced_cost(search.distances, both, y, search.tree)
                if best is None or c < best[0]:
                    rot_n, centre_n = search.rot.copy(), search.centre.copy()
                    rot_n[bones], centre_n[bones] = rot_b, centre_b
                    best = (c, a, b, rot_n, centre_n)
        if best is None or best[0] > lowest * (1.0 + allowance):
            return out
        c, a, b, rot_n, centre_n = best
        out.append((f"part {a} joins {b}", search.current, c))
        search.set_state(rot_n, centre_n)
        lowest = min(lowest, c)
    return out


def _mend(search, single, cluster, both, mine, a, b):
    """(bones, their rot, their centre, samples of ``both`` (M, 3)): the bones of the parts
    ``both`` in the state with a's ``cluster`` moved by b's motion and the clusters
    ``both`` then snapped together onto the target."""
    space, rot, centre, heads = search.space, search.rot, search.centre, search.space.heads
    ba, bb = single[a], single[b]
    # a's cluster takes b's motion: y -> R_b (R_a^T (y - c_a) + h_a - h_b) + c_b
    turn = rot[bb] @ rot[ba].T
    shift = rot[bb] @ (heads[ba] - heads[bb]) + centre[bb] - centre[ba]
    rot_n, centre_n = moved_state(space, rot, centre, cluster, turn, shift, centre[ba])
    x_n = search.points.positions(rot_n, centre_n)
    pivot = x_n[mine].mean(0)  # both clusters snapped together
    turn_s, shift_s = search.snap(mine, np.eye(3), np.zeros(3), pivot, x_n)
    rot_n, centre_n = moved_state(space, rot_n, centre_n, both, turn_s, shift_s, pivot)
    bones = np.flatnonzero(np.isin(space.bone_parts, both))
    y = (x_n[mine] - pivot) @ turn_s.T + pivot + shift_s
    return bones, rot_n[bones], centre_n[bones], y


def replaced_cost(parts: PartDistances, moved: list, y: np.ndarray, tree: cKDTree) -> float:
    """The search's chamfer of the state (``parts``: its per-part distances) with the
    samples of the parts ``moved`` at y (M, 3) (in their order of the samples)."""
    still = np.ones(len(parts.d1_sq), dtype=bool)
    still[moved] = False
    d1_sq = float(parts.d1_sq[still].sum()) + float((tree.query(y)[0] ** 2).sum())
    near = nearest(parts.subset, y)
    if still.any():
        near = np.minimum(near, parts.near[still].min(0))
    return 0.5 * (d1_sq / len(parts.x) + float(np.mean(near**2)))


def moved_state(space, rot, centre, parts, turn, shift, pivot):
    """(rot, centre) with the bones of ``parts`` turned by ``turn`` about ``pivot`` and
    shifted by ``shift``."""
    bones = np.flatnonzero(np.isin(space.bone_parts, parts))
    rot, centre = rot.copy(), centre.copy()
    rot[bones] = turn @ rot[bones]
    centre[bones] = (centre[bones] - pivot) @ turn.T + pivot + shift
    return rot, centre
