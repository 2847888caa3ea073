"""Fit to Target in real Blender with a real engine process (the rig space: no model): a hinged
lid (a base and a lid, two loose boxes) is posed into a target whose lid is open by 60 degrees,
a mesh of another topology (a Subdivision Surface modifier on it, evaluated) under another
object transform. Keyed as a shape key and as a rig pose at the current frame, the evaluated
mesh is the target's surface; the user's shape key and vertex group stay as they were; a second
fit updates the key or keys the same rig; a rig pose takes the place of baked shape keys; undo
takes a fit back in one step; a missing target, the object itself, a target without faces, an
engine error and a cancel change nothing.

The Blender side runs this file as a script (``python tests/test_blender_fit.py SCENARIO
PARAMS``, through ``blender.harness``), so its scenario lives beside its tests; the request,
the report and the job's progress are checked in plain Python too.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

BASE = (0.4, 0.3, 0.02)  # the base's size (m): x from 0 (the hinge's side) to 0.4
GAP = 0.0005  # the lid rests 0.5 mm above the base
HINGE = (0.0, 0.0, 0.02)  # the hinge: along y through the base's top edge at x = 0
FRAME, SECOND_FRAME = 7, 15  # where the fits are keyed (the scene runs 1-24)
SAMPLES = 5000  # surface samples per side of a chamfer
SIZE = 1.25 * BASE[0]  # the object's size in the world (its scale is 1.25)
TOLERANCE = 0.004  # of the object's size: the evaluated mesh's chamfer to the target
PLAYBACK = 1e-5  # of the object's size: the rig plays the fitted vertices (linear blend)


# -- plain Python: the request, the report, the job ----------------------------------------------
def test_the_fit_request_is_what_the_worker_reads(tmp_path):
    from neurok_blender.request import FitRequest
    from neurok_core.worker import load_mesh, read_request

    rng = np.random.default_rng(0)
    faces = np.array([[0, 1, 2], [2, 3, 4]])
    request = FitRequest(
        rng.normal(size=(5, 3)), faces, rng.normal(size=(4, 3)), faces[:1], want_rig=True
    )
    parsed = read_request(request.write(tmp_path / "job"))
    job = (tmp_path / "job").resolve()
    assert parsed["task"] == "ik" and parsed["space"] == "rig" and parsed["prior"] is False
    assert parsed["target"] == str(job / "target.npz")
    assert parsed["output"] == {"frames": str(job / "fit.npy"), "rig": str(job / "rig.npz")}
    v, f = load_mesh(parsed["target"])
    assert v.dtype == np.float32 and v.shape == (4, 3) and f.tolist() == [[0, 1, 2]]
    plain = FitRequest(request.vertices, faces, request.target_vertices, faces)
    assert read_request(plain.write(tmp_path / "plain"))["output"]["rig"] is None


def test_the_fit_report_says_the_engines_figures():
    from neurok_blender.request import fit_report

    text = fit_report("Lid", "Open", 1.234, {"chamfer": 4e-6, "bones": 2}, "as shape key 'X'")
    assert text == (
        "Fitted 'Lid' to 'Open' (1.2 s; chamfer 4e-06 (normalised); 2 bones);"
        " keyed as shape key 'X'"
    )
    assert fit_report("Lid", "Open", 0.5, None, "it") == "Fitted 'Lid' to 'Open' (0.5 s); keyed it"


def test_a_fit_job_shows_its_stages_not_frames(tmp_path):
    from neurok_blender.engine.job import FitJob

    job = FitJob(tmp_path / "job")
    job.handle({"type": "status", "stage": "fit", "message": "fitting in the rig space"})
    assert job.status == "fitting in the rig space" and 0.0 < job.fraction < 0.1
    job.handle({"type": "frame", "index": 0, "count": 1, "energy": 0.0})
    assert job.status == "fitting in the rig space"  # a fit has no frames to count
    job.handle({"type": "status", "stage": "write", "message": "writing the fit"})
    assert job.fraction == pytest.approx(0.95)
    job.handle({"type": "done", "frames": "fit.npy", "count": 1, "seconds": 1.0, "info": {}})
    assert job.result["seconds"] == 1.0 and job.title == "Fitting"


# -- real Blender ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    """The scenario below, run once in a fresh Blender; what it observed."""
    from blender import harness

    zip_path = harness.built_zip(tmp_path_factory)
    tmp = tmp_path_factory.mktemp("fit")
    (tmp / "tmpdir").mkdir()
    (tmp / "no_model").mkdir()
    script = harness.SCENARIOS
    harness.SCENARIOS = Path(__file__)  # this file is the scenario's script
    try:
        return harness.run_scenario(
            "fit_flow",
            tmp,
            zip_path,
            timeout=600,
            env={"TMPDIR": str(tmp / "tmpdir"), "OMP_NUM_THREADS": "1"},
            checkpoint=str(tmp / "no_model"),
        )
    finally:
        harness.SCENARIOS = script


def _assert_fits(gaps) -> tuple[float, float]:
    """The evaluated mesh lies on the target's surface: its symmetric chamfer (metres) to it
    is far below the rest mesh's, and within TOLERANCE of the object's size."""
    fit, truth, rest = gaps
    assert truth < 1e-5, gaps  # the target is where the scenario put it (the frames agree)
    assert fit < TOLERANCE * SIZE and fit < 0.05 * rest, gaps
    return fit, rest


@pytest.mark.blender
@pytest.mark.slow
def test_fit_as_a_shape_key(fitted):
    out = fitted
    assert out["shape"][0] == "FINISHED", out["shape"]
    after = out["shape_state"]
    # a Basis was there (the user's): one key of ours beside the user's, which is unchanged
    assert after["keys"] == ["Basis", "User Key", "NeuROK Fit"]
    assert after["user_key"] == out["before"]["user_key"]
    assert after["groups"] == out["before"]["groups"] == {"User Group": [0.25, 0.25, 0.25]}
    assert after["modifiers"] == out["before"]["modifiers"]
    assert out["fit_key_keys"] == [[FRAME, 1.0]]
    assert out["user_key_fcurve_kept"]
    # the evaluated mesh at the frame is the target's surface
    fit, rest = _assert_fits(out["shape_gaps"])
    # a second fit updates the same key
    assert out["again_keys"] == ["Basis", "User Key", "NeuROK Fit"]
    assert out["again_fit_key_keys"] == [[FRAME, 1.0], [SECOND_FRAME, 1.0]]
    _assert_fits(out["again_gaps"])
    # keyed over the rig of the Rig Pose fits: it still moves the mesh, and the report says so
    level, text = out["again_report"][0]
    assert level == "WARNING" and "Clear it to see the fit alone" in text, out["again_report"]
    # a mesh without shape keys gets a Basis first
    assert out["plain"]["result"] == "FINISHED", out["plain"]["report"]
    assert out["plain"]["keys"] == ["Basis", "NeuROK Fit"]
    _assert_fits(out["plain"]["gaps"])
    print(f"shape key fit: chamfer {fit:.2e} m (the rest mesh's {rest:.2e} m)")


@pytest.mark.blender
@pytest.mark.slow
def test_fit_as_a_rig_pose(fitted):
    out = fitted
    rig = out["rig"]
    assert rig["result"] == "FINISHED", rig["report"]
    (level, text), *_ = rig["report"]
    assert level == "INFO" and text.startswith("Fitted 'Lid' to 'Open Lid' ("), text
    assert f"at frame {FRAME}" in text and "chamfer" in text and "bones" in text
    figures = rig["figures"]
    assert figures["bones"] == out["rig_state"]["bones"] >= 2 and figures["chamfer"] < 5e-3
    assert figures["frame"] == FRAME and figures["total_seconds"] > 0
    state = out["rig_state"]
    assert state["armature"] == "Lid NeuROK Rig" and state["results"] == "RIG"
    assert state["modifiers"][0] == ["NeuROK Rig", "ARMATURE", False]  # linear blend
    assert state["key_frames"] == [FRAME]  # every channel keyed at the current frame only
    assert state["fcurves"] == 7 * state["bones"]
    assert state["user_key"] == out["before"]["user_key"]
    assert state["groups"]["User Group"] == [0.25, 0.25, 0.25]
    fit, rest = _assert_fits(out["rig_gaps"])
    assert out["rig_vs_shape_key"] < PLAYBACK * SIZE
    # a second fit at another frame keys the same rig (its bones are the fit's)
    second = out["rig_again"]
    assert second["result"] == "FINISHED", second["report"]
    assert out["rig_again_state"]["armatures"] == ["Lid NeuROK Rig"]
    assert out["rig_again_state"]["key_frames"] == [FRAME, SECOND_FRAME]
    _assert_fits(out["rig_again_gaps"])
    _assert_fits(out["rig_again_first_gaps"])  # the first pose is still keyed at its frame
    print(f"rig pose fit: chamfer {fit:.2e} m (the rest mesh's {rest:.2e} m); {text}")


@pytest.mark.blender
@pytest.mark.slow
def test_a_rig_pose_takes_the_place_of_baked_shape_keys(fitted):
    out = fitted
    assert out["baked_keys"] == ["Basis", "User Key", "NeuROK Fit"] + [
        f"NeuROK {f:04d}" for f in (1, 2, 3)
    ]
    replacing = out["replacing"]
    (level, text), *_ = replacing["report"]
    assert level == "INFO" and "in place of its earlier NeuROK shape keys" in text, text
    # our bake's keys went, the user's key and the fit's stay; a new rig, keyed at the frame
    assert replacing["keys"] == ["Basis", "User Key", "NeuROK Fit"]
    assert replacing["user_key"] == out["before"]["user_key"]
    assert replacing["results"] == "RIG" and replacing["key_frames"] == [FRAME]
    assert replacing["armatures"] == ["Lid NeuROK Rig"]


@pytest.mark.blender
@pytest.mark.slow
def test_undo_takes_a_fit_back_in_one_step(fitted):
    out = fitted
    assert out["shape"][0] == out["rig_operator"][0] == "FINISHED"
    assert out["undo_shape"] == out["before"]
    assert out["undo_rig"] == out["before"]


@pytest.mark.blender
@pytest.mark.slow
def test_refusals_change_nothing(fitted):
    out = fitted
    expected = {
        "no_target": "has no target: pick the mesh to fit it to",
        "itself": "the target is 'Lid' itself: pick another mesh",
        "no_faces": "the target 'Points' has no faces",
        "not_a_mesh": "the target 'Empty' is not a mesh (empty): pick a mesh object",
        "engine_error": "the target:",
    }
    for case, words in expected.items():
        refused = out["refused"][case]
        assert refused["status"] == "ERROR" and refused["untouched"], (case, refused)
        assert words in refused["message"] and "Traceback" not in refused["message"], refused
    assert out["poll"] == {"target": True, "itself": False, "empty": False}
    cancelled = out["cancelled"]
    assert cancelled["status"] == "CANCELLED" and cancelled["untouched"], cancelled
    assert out["panel"]["errors"] == []
    assert {"fit_target", "fit_key_as"} <= set(out["panel"]["props"])
    assert out["panel"]["operators"] == ["neurok.fit_to_target"]


# -- the scenario (inside Blender) ----------------------------------------------------------------
def _box(size, centre, times: int):
    """(V, 3) vertices and the quads of a box subdivided ``times`` times (one cut each)."""
    import bmesh
    from mathutils import Matrix

    bm = bmesh.new()
    matrix = Matrix.Diagonal((*size, 1.0))
    matrix.translation = centre
    bmesh.ops.create_cube(bm, size=1.0, matrix=matrix)
    for _ in range(times):
        bmesh.ops.subdivide_edges(bm, edges=bm.edges[:], cuts=1, use_grid_fill=True)
    bm.verts.index_update()
    vertices = np.array([v.co for v in bm.verts], dtype=np.float64)
    faces = [[v.index for v in face.verts] for face in bm.faces]
    bm.free()
    return vertices, faces


def _hinged_lid(degrees: float = 0.0):
    """(vertices (N, 3), quads, the lid's vertex indices): the base, then the lid turned by
    ``degrees`` about the hinge (upwards)."""
    base_v, base_f = _box(BASE, (BASE[0] / 2, 0.0, BASE[2] / 2), 1)
    lid_v, lid_f = _box(BASE, (BASE[0] / 2, 0.0, BASE[2] * 1.5 + GAP), 1)
    a = np.radians(degrees)
    turn = np.array([[np.cos(a), 0, -np.sin(a)], [0, 1, 0], [np.sin(a), 0, np.cos(a)]])
    lid_v = (lid_v - HINGE) @ turn.T + HINGE
    nb = len(base_v)
    faces = base_f + [[i + nb for i in f] for f in lid_f]
    return np.concatenate([base_v, lid_v]), faces


def _mesh_object(name: str, vertices, faces):
    import bpy

    mesh = bpy.data.meshes.new(name)
    mesh.from_pydata(np.asarray(vertices).tolist(), [], faces)
    mesh.update()
    obj = bpy.data.objects.new(name, mesh)
    bpy.context.scene.collection.objects.link(obj)
    return obj


def _target(name: str, obj, degrees: float, location, rotation, scale):
    """The lid open by ``degrees`` where ``obj`` stands in the world, as a mesh object of its
    own transform whose Subdivision Surface modifier (simple) gives it another topology."""
    from mathutils import Euler, Matrix, Vector

    opened, faces = _hinged_lid(degrees)
    own = Matrix.LocRotScale(Vector(location), Euler(rotation), Vector(scale))
    local = np.array(own.inverted() @ obj.matrix_world)
    target = _mesh_object(name, opened @ local[:3, :3].T + local[:3, 3], faces)
    target.matrix_world = own
    subsurf = target.modifiers.new("Finer", "SUBSURF")
    subsurf.subdivision_type, subsurf.levels = "SIMPLE", 1
    return target, opened


def _world(obj, local):
    m = np.array(obj.matrix_world)
    return np.asarray(local) @ m[:3, :3].T + m[:3, 3]


def _surface(obj) -> tuple[np.ndarray, np.ndarray]:
    """The target as shown: evaluated world vertices (M, 3) and triangles (G, 3)."""
    import bpy

    evaluated = obj.evaluated_get(bpy.context.evaluated_depsgraph_get())
    mesh = evaluated.to_mesh()
    mesh.calc_loop_triangles()
    vertices = np.array([evaluated.matrix_world @ v.co for v in mesh.vertices])
    faces = np.array([t.vertices for t in mesh.loop_triangles])
    evaluated.to_mesh_clear()
    return vertices, faces


def _chamfer(a, b) -> float:
    """Symmetric chamfer (L1, metres) of two surfaces (vertices, triangles): the mean distance
    from SAMPLES area-uniform samples of each to the other surface (its nearest point, by
    Blender's BVH tree), halved."""
    from mathutils import Vector
    from mathutils.bvhtree import BVHTree

    def one_way(src, dst, seed: int) -> float:
        v, f = np.asarray(src[0], dtype=np.float64), np.asarray(src[1])
        corners = v[f]  # (F, 3, 3)
        area = np.linalg.norm(
            np.cross(corners[:, 1] - corners[:, 0], corners[:, 2] - corners[:, 0]), axis=1
        )
        rng = np.random.default_rng(seed)
        pick = rng.choice(len(f), SAMPLES, p=area / area.sum())
        r1, r2 = np.sqrt(rng.random(SAMPLES)), rng.random(SAMPLES)
        w = np.stack([1 - r1, r1 * (1 - r2), r1 * r2], 1)  # (S, 3) barycentric
        points = np.einsum("sk,skj->sj", w, corners[pick])  # (S, 3)
        tree = BVHTree.FromPolygons(np.asarray(dst[0]).tolist(), np.asarray(dst[1]).tolist())
        return float(np.mean([tree.find_nearest(Vector(p))[3] for p in points]))

    return 0.5 * (one_way(a, b, 1) + one_way(b, a, 2))


def _state(obj) -> dict:
    """What a fit changes, or a refusal, a cancel and undo must leave as it was."""
    import bpy
    from bl_helpers import snapshot

    state = snapshot(obj)
    keys = obj.data.shape_keys
    user = keys.key_blocks.get("User Key") if keys else None
    state["keys"] = [k.name for k in keys.key_blocks] if keys else []
    state["user_key"] = None if user is None else [float(user.value), _co_sum(user)]
    state["groups"] = {
        g.name: [round(g.weight(i), 6) for i in range(3)]
        for g in obj.vertex_groups
        if not g.name.startswith("NeuROK")
    }
    state["armatures"] = sorted(a.name for a in bpy.data.armatures)
    state["modifiers"] = [[m.name, m.type, _preserve(m)] for m in obj.modifiers]
    return state


def _preserve(modifier):
    return modifier.use_deform_preserve_volume if modifier.type == "ARMATURE" else None


def _co_sum(block) -> float:
    co = np.empty(len(block.data) * 3, dtype=np.float32)
    block.data.foreach_get("co", co)
    return round(float(np.abs(co).sum()), 5)


def _value_keys(obj, name: str) -> list:
    from bpy_extras import anim_utils

    anim = obj.data.shape_keys.animation_data
    bag = anim_utils.action_get_channelbag_for_slot(anim.action, anim.action_slot)
    curve = bag.fcurves.find(f'key_blocks["{name}"].value')
    return [] if curve is None else [list(k.co) for k in curve.keyframe_points]


def _rig_state(obj) -> dict:
    state = _state(obj)
    arm = obj.neurok.results.rig_object
    state["armature"] = None if arm is None else arm.name
    state["results"] = obj.neurok.results.mode
    state["bones"] = 0 if arm is None else len(arm.data.bones)
    fcurves = []
    if arm is not None:
        fcurves = list(arm.animation_data.action.layers[0].strips[0].channelbags[0].fcurves)
    state["fcurves"] = len(fcurves)
    state["key_frames"] = sorted({k.co[0] for f in fcurves for k in f.keyframe_points})
    return state


def _attempt(obj, **settings) -> dict:
    """Fit to Target with some settings on ``obj``: its status, message, and whether the scene
    stayed as it was."""
    import bpy
    from bl_helpers import activate, call

    saved = {k: getattr(obj.neurok, k) for k in settings}
    for k, v in settings.items():
        setattr(obj.neurok, k, v)
    activate(obj)
    before = _state(obj)
    status, message = call(bpy.ops.neurok.fit_to_target)
    after = _state(obj)
    for k, v in saved.items():
        setattr(obj.neurok, k, v)
    return {"status": status, "message": message, "untouched": before == after}


def fit_flow(params) -> dict:
    """Refusals, a shape key fit and its undo, rig pose fits (through the scripting API) and
    their undo, a second fit of each kind at another frame, an engine error and a cancel."""
    import bpy
    from bl_helpers import activate, addon, call, cancel_when, empty_scene, prefs, synthetic_frames
    from sc_panels import RecordingLayout

    empty_scene()
    p = prefs()
    p.checkpoint, p.device = params["checkpoint"], "CPU"  # no model: the rig space needs none
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 24
    rest, faces = _hinged_lid()
    obj = _mesh_object("Lid", rest, faces)
    obj.location, obj.rotation_euler, obj.scale = (0.3, -0.2, 0.5), (0.1, 0.0, 0.6), (1.25,) * 3
    # the user's own shape key (keyed) and vertex group
    obj.shape_key_add(name="Basis")
    user = obj.shape_key_add(name="User Key")
    for d in user.data:
        d.co.z += 0.01
    user.value = 0.0
    user.keyframe_insert("value", frame=1)
    obj.vertex_groups.new(name="User Group").add([0, 1, 2], 0.25, "REPLACE")
    bpy.context.view_layer.update()
    target, opened = _target(
        "Open Lid", obj, 60.0, (2.0, 1.0, 0.2), (0.3, 0.0, -0.4), (0.8, 1.1, 0.9)
    )
    half, half_open = _target("Half Open", obj, 30.0, (-2.0, 1.0, 0.0), (0.0, 0.2, 0.5), (1.0,) * 3)
    points = _mesh_object("Points", [(0, 0, 0), (0.1, 0, 0), (0, 0.1, 0)], [])
    collapsed = _mesh_object("Collapsed", np.zeros((4, 3)), [[0, 1, 2], [0, 2, 3]])
    empty = bpy.data.objects.new("Empty", None)
    scene.collection.objects.link(empty)
    scene.frame_set(FRAME)
    tris = np.array([t for f in faces for t in ((f[0], f[1], f[2]), (f[0], f[2], f[3]))])
    goals = {
        "target": (_surface(target), _world(obj, opened)),
        "half": (_surface(half), _world(obj, half_open)),
    }
    rest_world = _world(obj, rest)

    def gaps(shown, goal: str) -> list[float]:
        """The chamfer of the mesh shown, of the goal's truth and of the rest to the goal."""
        surface, truth = goals[goal]
        return [_chamfer((x, tris), surface) for x in (shown, truth, rest_world)]

    out = {}
    settings = addon("neurok_blender.properties.object")
    out["poll"] = {
        "target": settings._other_mesh(obj.neurok, target),
        "itself": settings._other_mesh(obj.neurok, obj),
        "empty": settings._other_mesh(obj.neurok, empty),
    }
    log = {"labels": [], "props": [], "operators": [], "progress": [], "errors": []}
    activate(obj)
    bpy.types.NEUROK_PT_fit.draw(type("Panel", (), {"layout": RecordingLayout(log)})(), bpy.context)
    out["panel"] = log
    # refusals: nothing changes (the pointer's poll keeps the UI from offering the last three)
    out["refused"] = {
        "no_target": _attempt(obj),
        "itself": _attempt(obj, fit_target=obj),
        "no_faces": _attempt(obj, fit_target=points),
        "not_a_mesh": _attempt(obj, fit_target=empty),
        "engine_error": _attempt(obj, fit_target=collapsed),  # the engine refuses its faces
    }
    # Shape Key at the current frame, then undo
    obj.neurok.fit_target, obj.neurok.fit_key_as = target, "SHAPE_KEY"
    activate(obj)
    bpy.ops.ed.undo_push(message="before fit")
    out["before"] = _state(obj)
    out["shape"] = call(bpy.ops.neurok.fit_to_target, undo=True)
    obj = bpy.data.objects["Lid"]
    out["shape_state"] = _state(obj)
    out["fit_key_keys"] = _value_keys(obj, "NeuROK Fit")
    out["user_key_fcurve_kept"] = _value_keys(obj, "User Key") == [[1.0, 0.0]]
    shape_shown = _shown(obj, FRAME)
    out["shape_gaps"] = gaps(shape_shown, "target")
    bpy.ops.ed.undo()
    out["undo_shape"] = _state(bpy.data.objects["Lid"])
    # Rig Pose at the current frame, then undo
    bpy.data.objects["Lid"].neurok.fit_key_as = "RIG"
    activate(bpy.data.objects["Lid"])
    bpy.context.scene.frame_set(FRAME)
    bpy.ops.ed.undo_push(message="before rig fit")
    out["rig_operator"] = call(bpy.ops.neurok.fit_to_target, undo=True)
    bpy.ops.ed.undo()
    out["undo_rig"] = _state(bpy.data.objects["Lid"])
    # Rig Pose through the scripting API (the object's settings), then at another frame
    target, half = bpy.data.objects["Open Lid"], bpy.data.objects["Half Open"]  # (after undo)
    bpy.context.scene.frame_set(FRAME)
    api = addon().api
    run = api.fit(bpy.data.objects["Lid"])
    out["rig"] = {"result": run.result, "report": run.report, "figures": run.figures}
    obj = bpy.data.objects["Lid"]
    out["rig_state"] = _rig_state(obj)
    rig_shown = _shown(obj, FRAME)
    out["rig_gaps"] = gaps(rig_shown, "target")
    # the same request, the same fit: the armature plays the fitted vertices the key holds
    out["rig_vs_shape_key"] = float(np.abs(rig_shown - shape_shown).max())
    bpy.context.scene.frame_set(SECOND_FRAME)
    second = api.fit(bpy.data.objects["Lid"], half, key_as="RIG")
    out["rig_again"] = {"result": second.result, "report": second.report}
    obj = bpy.data.objects["Lid"]
    out["rig_again_state"] = _rig_state(obj)
    out["rig_again_gaps"] = gaps(_shown(obj, SECOND_FRAME), "half")
    out["rig_again_first_gaps"] = gaps(_shown(obj, FRAME), "target")
    # a shape key over the rig at the second frame, twice: one key, updated
    for frame, goal in ((FRAME, target), (SECOND_FRAME, half)):
        bpy.context.scene.frame_set(frame)
        again = api.fit(bpy.data.objects["Lid"], goal, key_as="SHAPE_KEY")
    obj = bpy.data.objects["Lid"]
    out["again_report"] = again.report
    out["again_keys"] = _state(obj)["keys"]
    out["again_fit_key_keys"] = _value_keys(obj, "NeuROK Fit")
    out["again_gaps"] = gaps(_without_rig(obj, SECOND_FRAME), "half")
    # a rig pose where Simulate baked shape keys: they make way for the rig, as a new bake's
    bake = addon("neurok_blender.bake")
    bake.bake(obj, synthetic_frames(obj, 3, 0.05), 1, "SHAPE_KEYS")
    out["baked_keys"] = _state(obj)["keys"]
    bpy.context.scene.frame_set(FRAME)
    replacing = api.fit(bpy.data.objects["Lid"], target, key_as="RIG")
    obj = bpy.data.objects["Lid"]
    out["replacing"] = {"report": replacing.report, **_rig_state(obj)}
    # a mesh of no shape keys: a Basis first
    plain = _mesh_object("Plain Lid", rest, faces)
    plain.matrix_world = obj.matrix_world
    bpy.context.scene.frame_set(FRAME)
    run = api.fit(plain, target, key_as="SHAPE_KEY")
    plain = bpy.data.objects["Plain Lid"]
    out["plain"] = {
        "result": run.result,
        "report": run.report,
        "keys": _state(plain)["keys"],
        "gaps": gaps(_shown(plain, FRAME), "target"),
    }
    # cancelled at once: the engine is stopped, nothing changes
    watcher = cancel_when(lambda job: True, kind="fit")
    out["cancelled"] = _attempt(obj, fit_target=target)
    watcher.join(5)
    return out


def _shown(obj, frame: int) -> np.ndarray:
    from bl_helpers import evaluated_positions

    return evaluated_positions(obj, frame)


def _without_rig(obj, frame: int) -> np.ndarray:
    """The evaluated mesh at ``frame`` with our rig's modifier off (the shape key alone)."""
    modifier = obj.modifiers["NeuROK Rig"]
    modifier.show_viewport = False
    try:
        return _shown(obj, frame)
    finally:
        modifier.show_viewport = True


def _main() -> int:
    here = Path(__file__).resolve().parent
    sys.path[:0] = [str(here / "blender")]
    import bpy
    from bl_helpers import install

    name, params = sys.argv[1], json.loads(sys.argv[2])
    bpy.ops.ed.undo_push(message="start")
    install(params["zip"])
    out = {"fit_flow": fit_flow}[name](params)
    Path(params["result"]).write_text(json.dumps(out, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(_main())
