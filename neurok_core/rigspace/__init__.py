"""Rig-space dynamics (design section 12): the bones' motions as the generalised coordinates.

Names used throughout (one place, as the style guide asks):

- ``Q`` (B, 4, 3): the state of the B bones. Bone b is an affine map of the rest shape,
  x = F_b (X - h_b) + c_b with head h_b; ``Q[b, :3, :] = F_b^T`` and ``Q[b, 3, :] = c_b``, so
  that a point with the homogeneous skinning row u (4B,) = (w_b (X - h_b), w_b)_b moves to
  x = u^T Q.reshape(4B, 3). At rest F_b = I and c_b = h_b (``RigSpace.rest``).
- ``q`` = ``Q.reshape(-1)`` (12B,), index (4 b + r) 3 + k: the flat vector the Newton solver
  works on; the kinetic metric of ``q`` is kron(M, I_3) with M (4B, 4B) = sum_i m_i u_i u_i^T
  constant, so the equations of motion have no Coriolis terms.
- A stiff energy keeps every F_b a rotation (affine body dynamics), and the frames handed out
  use the nearest rotation, so the result is a rig of rigid bones (``neurok_core.rig``) that
  replays the engine's vertices exactly.
"""

from .simulate import simulate_rig
from .space import RigSettings, RigSpace, build_rig_space

__all__ = ["RigSettings", "RigSpace", "build_rig_space", "simulate_rig"]
