"""One mesh of solid parts and cloth sheets (a flag modelled on its pole, a curtain on its rod):
the solids in the rig space, the sheets at their own resolution, as a scene of two objects
(:mod:`~.objects`: the solids first, then the cloth meeting their parts on their paths).

A loose part of the mesh is a sheet when it alone is a cloth (:func:`~neurok_core.sheets.
cloth_welding`). A sheet's rim (its edges of one face) that lies on a solid part at rest is sewn
to it: those rim vertices are pinned, and a pin on a solid moves with it (so the flag stays on
its pole, carried if the pole moves); a sheet resting on a solid with its inside (a
tablecloth on its table) only touches it. The coupling is one way, as between objects: the
solid parts do not feel the cloth.

The object's conditions are split between the two: a force, drag or point velocity goes to the
part its vertex (or the vertex nearest its point) is on, pins to their own part, a whole-object
velocity to both, the mass by area. The result is the mesh's own: its vertices in their order,
a rig of the solids' bones and a bone per cloth node, each figure the worse of the two.

Shapes: vertices (N, 3) float64 metres; faces (F, 3) int64.
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np
from scipy.spatial import cKDTree

from ..dynamics.conditions import Collider, SimulationConditions
from ..dynamics.obstacles import MeshDistance
from ..geometry import edge_keys, face_cross
from ..results import SimulationResult
from ..rig import BoneRig
from ..sheets import cloth_welding, sheet_parts
from .cloth_simulate import ATTACH, simulate_cloth

FIGURES_WORST = ("edge_strain_max", "penetration_max")  # each the worse of the two runs
# the runs' own words for how their steps held, the worse the later
INTEGRATION = ("complete", "steps halved", "steps unconverged", "cut short")


def sheet_vertices(vertices: np.ndarray, faces: np.ndarray, found=None) -> np.ndarray | None:
    """(N,) bool: the vertices of the loose parts (coincident vertices welded) that are cloth
    on their own, where the mesh has both sheets and solid parts; None where it has one kind
    only (or a vertex in no face). ``found``: :func:`~neurok_core.sheets.sheet_parts`'s answer
    where it is known."""
    found = sheet_parts(vertices, faces) if found is None else found
    if found is None:
        return None
    sheet = found[1]
    return sheet if 0 < sheet.sum() < len(sheet) else None


def _sub(vertices, faces, mask):
    """(vertices, faces, index (N,) -1 off the part) of the vertices ``mask`` and the faces
    they hold."""
    index = np.full(len(vertices), -1)
    index[mask] = np.arange(int(mask.sum()))
    own = faces[mask[faces[:, 0]]]
    return vertices[mask], index[own], index


def _rim(faces: np.ndarray, count: int) -> np.ndarray:
    """(count,) bool: the vertices on an edge of one face."""
    keys, n = edge_keys(faces)
    keys, counts = np.unique(keys, return_counts=True)
    once = keys[counts == 1]
    out = np.zeros(count, dtype=bool)
    out[once // n] = True
    out[once % n] = True
    return out


def _sewn(vertices, faces, sheet) -> np.ndarray:
    """The sheet's rim vertices (indices into the mesh) within ``ATTACH`` of the sheets' size
    of a solid part at rest (the reach at which the cloth's run holds a pin on a solid)."""
    sv, sf, index = _sub(vertices, faces, sheet)
    rim = np.flatnonzero(sheet)[_rim(sf, len(sv))]
    if not len(rim):
        return rim
    ov, of, _ = _sub(vertices, faces, ~sheet)
    reach = ATTACH * (float(np.ptp(sv, 0).max()) or 1.0)
    solid = MeshDistance(ov, of, reach / 4, 2 * reach, "solid")
    near = solid.near(vertices[rim])
    out = np.zeros(len(rim), dtype=bool)
    if near.any():
        out[near] = np.abs(solid.exact(vertices[rim[near]])) <= reach
    return rim[out]


def split_conditions(conditions: SimulationConditions, vertices, faces, sheet: np.ndarray):
    """(the solids' conditions, the sheets', how many rim vertices are sewn, the sheets' share
    of the mass) of the mesh's ``conditions`` (module docstring), on each one's own vertices
    (in the mesh's order), the sheets' sewn rim pinned (not a vertex a force or a drag holds:
    it follows its load)."""
    n = len(vertices)
    index = np.full(n, -1)
    index[sheet] = np.arange(int(sheet.sum()))
    index[~sheet] = np.arange(int((~sheet).sum()))
    tree = None

    def anchor(c) -> int:  # a condition's vertex (at a point: the nearest)
        nonlocal tree
        if c.vertex is not None:
            return int(c.vertex)
        tree = tree or cKDTree(vertices)
        return int(tree.query(np.asarray(c.point))[1])

    def mine(items, on_sheet: bool):
        out = []
        for c in items:
            if getattr(c, "anchor", None) is None:  # a whole-object velocity: both parts
                out.append(c)
            elif bool(sheet[anchor(c)]) == on_sheet:
                out.append(
                    c if c.vertex is None else dataclasses.replace(c, vertex=int(index[c.vertex]))
                )
        return tuple(out)

    areas = np.linalg.norm(face_cross(vertices, faces), axis=1)
    share = float(areas[sheet[faces[:, 0]]].sum()) / max(float(areas.sum()), 1e-300)
    share = min(max(share, 0.01), 0.99)  # neither part weightless
    pins = np.asarray(conditions.pins, dtype=np.int64)
    sewn = _sewn(vertices, faces, sheet)
    loaded = [anchor(c) for c in (*conditions.forces, *conditions.drags)]
    sewn = sewn[~np.isin(sewn, loaded)]
    out = []
    for on_sheet, mass in ((False, 1.0 - share), (True, share)):
        own = pins[sheet[pins] == on_sheet] if len(pins) else pins
        if on_sheet:
            own = np.union1d(own, sewn)
        out.append(
            dataclasses.replace(
                conditions,
                forces=mine(conditions.forces, on_sheet),
                drags=mine(conditions.drags, on_sheet),
                velocities=mine(conditions.velocities, on_sheet),
                pins=tuple(int(i) for i in np.sort(index[own])),
                mass=conditions.mass * mass,
            )
        )
    return out[0], out[1], len(sewn), share


def _merged_rig(rigs, masks, n: int) -> BoneRig | None:
    """One rig of the mesh from the parts' rigs (``rigs``, each over its ``masks`` vertices)."""
    if any(r is None for r in rigs):
        return None
    width = max(r.vertex_bones.shape[1] for r in rigs)
    bones = np.zeros((n, width), dtype=np.int32)
    weights = np.zeros((n, width), dtype=np.float32)
    offset = 0
    for r, mask in zip(rigs, masks, strict=True):
        k = r.vertex_bones.shape[1]
        bones[mask, :k] = r.vertex_bones + offset
        weights[mask, :k] = r.vertex_weights
        offset += r.num_bones
    frames = min(r.num_frames for r in rigs)
    return BoneRig(
        np.concatenate([r.heads for r in rigs]),
        np.concatenate([r.rotations[:frames] for r in rigs], axis=1),
        np.concatenate([r.translations[:frames] for r in rigs], axis=1),
        bones,
        weights,
        blend="lbs",
    )


def _still_rig(count: int, frames: int) -> BoneRig:
    """A rig of one bone that does not move, holding ``count`` vertices, over ``frames``."""
    rotations = np.zeros((frames, 1, 4))
    rotations[..., 0] = 1.0
    return BoneRig(
        np.zeros((1, 3)),
        rotations,
        np.zeros((frames, 1, 3)),
        np.zeros((count, 1), dtype=np.int32),
        np.ones((count, 1), dtype=np.float32),
        blend="lbs",
    )


def simulate_mixed(
    vertices: np.ndarray,
    faces: np.ndarray,
    conditions: SimulationConditions,
    sheet: np.ndarray,
    *,
    settings,
    on_frame=None,
    on_progress=None,
    want_vertices: bool = True,
    time_limit: float | None = None,
    want_rig: bool = True,
    want_figures: bool = True,
) -> SimulationResult:
    """Simulate a mesh of solid parts and sheets (``sheet`` (N,) bool: :func:`sheet_vertices`)
    under ``conditions`` (module docstring); the arguments as
    :func:`~neurok_core.rigspace.simulate.simulate_rig`'s. ``on_frame`` sees the mesh's frames
    as the cloth's run makes them (the solids' run comes first; solids pinned everywhere are
    not run: they are the cloth's collider)."""
    from .objects import SceneObject, cloth_with_solids

    started = time.perf_counter()
    on_progress = on_progress or (lambda *_: None)
    vertices = np.asarray(vertices, dtype=np.float64)
    faces = np.asarray(faces, dtype=np.int64).reshape(-1, 3)
    solid_c, cloth_c, sewn, share = split_conditions(conditions, vertices, faces, sheet)
    sv, sf, _ = _sub(vertices, faces, ~sheet)
    cv, cf, _ = _sub(vertices, faces, sheet)
    solids_frames: list = []

    def on_cloth_frame(index: int, positions, energy: float):
        if on_frame is None:
            return True
        full = None
        if positions is not None and index < len(solids_frames):
            full = np.empty((len(vertices), 3), dtype=np.float32)
            full[sheet] = positions
            full[~sheet] = solids_frames[index]
        return on_frame(index, full, energy)

    if len(solid_c.pins) == len(sv):  # the solids held everywhere: the cloth's collider
        solids_frames.extend([sv.astype(np.float32)] * conditions.frames)
        still = Collider(tuple(map(tuple, sv)), tuple(map(tuple, sf)), "solid")
        cloth_c = dataclasses.replace(
            cloth_c,
            colliders=(*cloth_c.colliders, still),
            winds=tuple(dataclasses.replace(w, strength=w.strength * share) for w in cloth_c.winds),
        )
        rc = simulate_cloth(
            cv,
            cf,
            cloth_c,
            settings=settings,
            welding=cloth_welding(cv, cf),
            on_frame=on_cloth_frame,
            on_progress=on_progress,
            want_vertices=want_vertices,
            time_limit=time_limit,
            want_rig=want_rig,
            want_figures=want_figures,
        )
        count = len(rc.times)
        rs = SimulationResult(
            positions=np.broadcast_to(sv.astype(np.float32), (count, *sv.shape)),
            rig=_still_rig(len(sv), count) if want_rig else None,
            times=rc.times,
            energy=np.zeros(count),
            conditions=solid_c.to_dict(),
            q=None,
            info={"dynamics": "rig", "space": {"kind": "still", "bones": 1}, "pins": "exact"},
        )
    else:
        cloth = SceneObject("cloth", cv, cf, cloth_c)
        results = cloth_with_solids(
            cloth,
            cloth_welding(cv, cf),
            [SceneObject("solid", sv, sf, solid_c), cloth],
            conditions,
            settings,
            on_progress,
            want_vertices,
            time_limit,
            on_cloth_frame=on_cloth_frame,
            on_solids=lambda r: solids_frames.extend(
                np.asarray(r["solid"].positions, dtype=np.float32)
            ),
            want_rig=want_rig,
            want_figures=want_figures,
            wind_share={"solid": 1.0 - share, "cloth": share},
        )
        rs, rc = results["solid"], results["cloth"]
    frames = min(len(rs.times), len(rc.times))
    positions = None
    if want_vertices and rc.positions is not None:
        positions = np.empty((frames, len(vertices), 3), dtype=np.float32)
        positions[:, ~sheet] = np.asarray(rs.positions)[:frames]
        positions[:, sheet] = rc.positions[:frames]
    rig = _merged_rig([rs.rig, rc.rig], [~sheet, sheet], len(vertices)) if want_rig else None
    info = dict(rs.info)
    info.pop("object", None)
    for key in FIGURES_WORST:
        if key in rs.info or key in rc.info:
            info[key] = max(rs.info.get(key, 0.0), rc.info.get(key, 0.0))
    said = [i.get("integration", "complete") for i in (rs.info, rc.info)]
    info["integration"] = max(said, key=lambda w: INTEGRATION.index(w) if w in INTEGRATION else 0)
    solid_bones = rs.info.get("space", {}).get("bones")
    info["space"] = {
        "kind": "mixed",
        "bones": None if rig is None else rig.num_bones,
        "solid_bones": solid_bones,
        "cloth": rc.info["space"],
    }
    info["sewn"] = int(sewn)
    info["pins"] = "exact" if conditions.pins or sewn else "none"
    for key in ("cancelled", "timed_out"):
        info[key] = bool(rs.info.get(key) or rc.info.get(key))
    info["seconds"] = round(time.perf_counter() - started, 3)
    return SimulationResult(
        positions=positions,
        rig=rig,
        times=rs.times[:frames],
        energy=np.asarray(rs.energy[:frames]) + np.asarray(rc.energy[:frames]),
        conditions=conditions.to_dict(),
        q=None,
        info=info,
    )


__all__ = ["sheet_vertices", "simulate_mixed", "split_conditions"]
