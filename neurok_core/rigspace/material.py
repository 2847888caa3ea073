"""Materials that mean what they say: an object's stiffness (Hz) is its lowest vibration
frequency.

The user's stiffness sets an object's *soft* energies: the bending coupling between its bones
and the torsion of its joints (``simulate._bending``), and the stretch springs of its elastic
solids (a jelly, a rubber beam: a solid's stretching is its bending; a rope's or a cloth's
stretch stays stiff, they bend without stretching). One scale s of those energies is chosen so
that the lowest non-rigid mode of the motion linearised about the rest shape,

    (K_stiff + s K_soft) v = omega^2 M v,

(K: the energies' Hessians at rest; M: the bones' mass matrix, ``RigSpace.moments`` (x) I_3;
both on the coordinates that move: the still bones and the directions a bone's vertices do not
span left out) has the frequency asked for. The stiff energies (each bone's rigidity, the
joints' glue, a rope's or cloth's stretch) keep theirs, so the lowest mode is a bending or a
joint's mode, not a bone's shear. Its rigid motions (6 for every group of parts joined to each
other and to nothing held) are not modes. So a cantilever set to 2 Hz vibrates at 2 Hz and sags
under gravity as a 2 Hz cantilever does, whatever its mesh.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import LinAlgError, eigh

from .energies import flat_kron

ITERATIONS = 8  # fixed-point steps s <- s (omega_target / omega(s))^2
TOLERANCE = 0.01  # relative frequency error at which the scale is kept
SCALE_RANGE = (1e-6, 1e6)


def _dense(h) -> np.ndarray:
    return h.toarray() if hasattr(h, "toarray") else np.asarray(h, dtype=np.float64)


def rest_hessian(terms, q: np.ndarray) -> np.ndarray:
    """(12B, 12B) the sum of the energies' Hessians at ``q`` (B, 4, 3) (None: no curvature)."""
    n = q.size
    total = np.zeros((n, n))
    for term in terms:
        h = term(q, True)[2]
        if h is not None:
            total += _dense(h)
    return total


def rigid_mode_count(space) -> int:
    """6 for every group of parts joined to each other (by ``space.joints``) and holding no
    still bone and no joint to the world: the motions that cost no energy."""
    count = len(space.layout.part_info)
    owner = list(range(count))

    def root(i: int) -> int:
        while owner[i] != i:
            owner[i] = owner[owner[i]]
            i = owner[i]
        return i

    held = set()
    for joint in space.joints:
        if joint.part_b < 0:
            held.add(joint.part_a)
        else:
            a, b = root(joint.part_a), root(joint.part_b)
            owner[max(a, b)] = min(a, b)
    for b in np.flatnonzero(space.fixed):
        part = int(space.bone_parts[b])
        if 0 <= part < count:
            held.add(part)
    held |= {int(p) for p in np.flatnonzero(space.fixed_parts)}
    held_roots = {root(p) for p in held}
    free = {root(p) for p in range(count)} - held_roots
    return 6 * len(free)


def lowest_omega(k: np.ndarray, m: np.ndarray, skip: int) -> float:
    """The lowest generalised eigenvalue's omega (rad/s) of (k, m) after the ``skip`` lowest
    (the rigid motions); inf where there is none."""
    n = len(k)
    if skip >= n:
        return float("inf")
    m = m + 1e-12 * max(float(np.trace(m)) / n, 1e-300) * np.eye(n)
    try:
        w = eigh(k, m, eigvals_only=True, subset_by_index=[skip, skip])
    except (LinAlgError, ValueError):
        return float("inf")
    return float(np.sqrt(max(float(w[0]), 0.0)))


def soft_scale(space, stiff_terms, soft_terms, omega: float) -> tuple[float, float]:
    """(s, the lowest omega at s): the scale of ``soft_terms`` (energies, at their unscaled
    stiffness) that puts the lowest non-rigid mode of the object at ``omega`` rad/s, the
    ``stiff_terms`` as they are. s = 1 where the soft energies have no curvature."""
    q = space.rest()
    basis = space.moving_basis()
    if basis.shape[1] == 0 or not soft_terms:
        return 1.0, float("inf")
    k_stiff = basis.T @ rest_hessian(stiff_terms, q) @ basis
    k_soft = basis.T @ rest_hessian(soft_terms, q) @ basis
    if not np.abs(k_soft).max(initial=0.0) > 0:
        return 1.0, float("inf")
    m = basis.T @ flat_kron(space.moments) @ basis
    skip = rigid_mode_count(space)
    s, low = 1.0, lowest_omega(k_stiff + k_soft, m, skip)
    for _ in range(ITERATIONS):
        if not np.isfinite(low) or low <= 0 or abs(low / omega - 1.0) < TOLERANCE:
            break
        s = float(np.clip(s * (omega / low) ** 2, *SCALE_RANGE))
        low = lowest_omega(k_stiff + s * k_soft, m, skip)
    return s, low
