"""The last few rig spaces built, kept by what they depend on.

A serving worker (``neurok_core.worker --serve``) keeps one shelf between requests, so that a
second run of the same object skips building its space (bones, skinning, joints) and, through
the space's ``memo``, its contact's distance grids and points: a live preview re-run after a
force's strength changed, or a second Simulate of the object after a change of its conditions
(the extension's preview runs on its own worker, so it warms only the next preview). A space
depends on the rest mesh, the mass, the pins, whether the object is elastic and the settings;
the loads (forces, drags, velocities, winds), gravity, damping and the frame range do not
enter it. A run hashes its mesh once (``SpaceShelf.of_mesh``): each value kept of it is then
named by what it is (``space_key`` for a space; "sheets", "cloth mesh" for the mesh alone)
and that hash.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import asdict

import numpy as np

from ..dynamics.conditions import SimulationConditions
from .space import RigSettings, RigSpace


def mesh_digest(vertices: np.ndarray, faces: np.ndarray) -> str:
    """A content hash of the rest mesh."""
    h = hashlib.sha256(np.ascontiguousarray(vertices, dtype=np.float64).tobytes())
    h.update(np.ascontiguousarray(faces, dtype=np.int64).tobytes())
    return h.hexdigest()[:32]


def space_key(conditions: SimulationConditions, settings: RigSettings) -> str:
    """What :func:`~neurok_core.rigspace.space.build_rig_space` reads besides the mesh."""
    what = {
        "mass": conditions.mass,
        "pins": list(conditions.pins),  # sorted and unique (``SimulationConditions``)
        "elastic": conditions.stiffness > 0,
        "settings": asdict(settings),
    }
    return "space " + hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:32]


_MISSING = object()


class SpaceShelf:
    """At most ``size`` spaces (or other values built of a mesh), the least recently used
    given up first."""

    def __init__(self, size: int = 4):
        self.size = int(size)
        self._spaces: OrderedDict[str, object] = OrderedDict()
        self.hits = 0  # values handed out again (a figure for tests and benches)

    def get(self, key: str, build: Callable[[], RigSpace]) -> RigSpace:
        """The value kept under ``key``, or ``build()``'s (None too), kept from now on."""
        space = self._spaces.pop(key, _MISSING)
        if space is _MISSING:
            space = build()
        else:
            self.hits += 1
        self._spaces[key] = space
        while len(self._spaces) > self.size:
            self._spaces.popitem(last=False)
        return space

    def of_mesh(self, vertices: np.ndarray, faces: np.ndarray) -> MeshShelf:
        """This shelf's values of one mesh (hashed once, here)."""
        return MeshShelf(self, mesh_digest(vertices, faces))

    def clear(self) -> None:
        self._spaces.clear()

    def __len__(self) -> int:
        return len(self._spaces)


class MeshShelf:
    """A :class:`SpaceShelf`'s values of the mesh whose hash is ``digest``."""

    def __init__(self, shelf: SpaceShelf, digest: str):
        self.shelf, self.digest = shelf, digest

    def get(self, what: str, build: Callable[[], object]) -> object:
        """The mesh's value named ``what``, or ``build()``'s."""
        return self.shelf.get(f"{what} {self.digest}", build)
