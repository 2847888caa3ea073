"""Solid materials as Blender's rigid body presets have them: each a density, a stiffness (the
object's lowest vibration frequency, ``rigspace.material``; 0: rigid parts), a friction and a
bounciness. Plain numpy (the add-on uses it too)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import ConditionError


@dataclass(frozen=True)
class SolidMaterial:
    """density kg/m^3; stiffness Hz (0: its parts rigid); friction (Coulomb's mu); bounciness
    (restitution, 0 to 1)."""

    density: float
    stiffness: float
    friction: float
    bounciness: float


# densities as a rigid body's Calculate Mass lists them; stiffness, friction and bounciness
# ours: a visible wobble for rubber and jelly, rigid for the others
SOLID_MATERIALS = {
    "wood": SolidMaterial(700.0, 0.0, 0.5, 0.3),
    "steel": SolidMaterial(7850.0, 0.0, 0.4, 0.2),
    "plastic": SolidMaterial(950.0, 0.0, 0.35, 0.5),
    "rubber": SolidMaterial(1100.0, 20.0, 0.9, 0.75),
    "jelly": SolidMaterial(1050.0, 4.0, 0.6, 0.1),
}


def mesh_volume(vertices: np.ndarray, faces: np.ndarray) -> float:
    """|sum of the signed volumes of the tetrahedra (origin, triangle)| (m^3): the enclosed
    volume of a closed triangle mesh, whatever its orientation."""
    v = np.asarray(vertices, dtype=np.float64)
    f = np.asarray(faces, dtype=np.int64).reshape(-1, 3)
    a, b, c = v[f[:, 0]], v[f[:, 1]], v[f[:, 2]]
    return float(abs(np.einsum("ij,ij->i", a, np.cross(b, c)).sum()) / 6.0)


def is_closed(faces: np.ndarray) -> bool:
    """Whether every edge of the triangles ``faces`` (F, 3) is shared by exactly two."""
    f = np.asarray(faces, dtype=np.int64).reshape(-1, 3)
    if not len(f):
        return False
    edges = np.sort(np.concatenate([f[:, [0, 1]], f[:, [1, 2]], f[:, [2, 0]]]), axis=1)
    _, counts = np.unique(edges, axis=0, return_counts=True)
    return bool((counts == 2).all())


def solid_fields(name: str, vertices: np.ndarray, faces: np.ndarray, closed: bool) -> dict:
    """The conditions' fields a solid preset sets: mass (its density times the mesh's volume),
    stiffness, friction and bounciness. A ConditionError for an unknown name, or a mesh that is
    not closed (its volume, and so its mass, is not known)."""
    material = SOLID_MATERIALS.get(str(name).lower())
    if material is None:
        raise ConditionError(
            f"unknown solid material {name!r}: one of {', '.join(SOLID_MATERIALS)}"
        )
    if not closed:
        raise ConditionError(
            f"material {name}: the mesh is not closed, so its volume (and its mass) is not"
            " known; close it, or give the mass"
        )
    volume = mesh_volume(vertices, faces)
    if not volume > 0:
        raise ConditionError(f"material {name}: the mesh encloses no volume; give the mass")
    return {
        "mass": material.density * volume,
        "stiffness": material.stiffness,
        "friction": material.friction,
        "bounciness": material.bounciness,
    }
