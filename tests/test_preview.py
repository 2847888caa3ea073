"""The live preview's engine side: spaces kept between runs (``rigspace.shelf``), the contact's
geometry kept with its space, and the serving worker's preview task, stopped by a newer request."""

import json
import subprocess
from dataclasses import replace

import numpy as np
import pytest
from test_worker import _answer, start

from neurok_core.dynamics import SimulationConditions
from neurok_core.dynamics.conditions import Force
from neurok_core.rigspace import simulate_rig
from neurok_core.rigspace.shelf import SpaceShelf, mesh_digest, space_key
from neurok_core.rigspace.space import RigSettings, RigSpace
from training.eval.scene_meshes import laptop


def _lid():
    """The scenes' laptop (a base, pinned, and a lid open at 105 degrees) at a coarse edge."""
    m = laptop(edge=0.04)
    return m.vertices, m.faces, tuple(int(i) for i in m.pins), m.landmarks["lid_edge"]


def _with_force(pins, vertex, strength):
    return SimulationConditions(
        frames=10,
        fps=24.0,
        damping=0.2,
        pins=pins,
        ground=-0.001,
        forces=(Force(direction=(0, 1, 0), strength=strength, vertex=vertex, end_frame=4),),
    )


@pytest.fixture(scope="module")
def lid():
    return _lid()


def test_a_kept_space_gives_the_same_motion_as_a_fresh_one(lid):
    """A second run on the shelf reuses the space and its contact's geometry (the same
    obstacles, not rebuilt) and moves exactly as a run that builds everything anew."""
    v, f, pins, top = lid
    shelf = SpaceShelf()
    first = simulate_rig(v, f, _with_force(pins, top, 4.0), shelf=shelf)
    assert shelf.hits == 0
    (space,) = [s for s in shelf._spaces.values() if isinstance(s, RigSpace)]
    (kept,) = space.memo["contact"].values()
    obstacles = [o for o, *_ in kept.obstacles]
    stronger = _with_force(pins, top, 8.0)
    second = simulate_rig(v, f, stronger, shelf=shelf)
    assert shelf.hits == 2  # the mesh's welding answer and its space
    (again,) = space.memo["contact"].values()
    assert [o for o, *_ in again.obstacles] == obstacles  # the same objects
    fresh = simulate_rig(v, f, stronger)
    np.testing.assert_array_equal(second.positions, fresh.positions)
    # and the loads did change the motion: the stronger push turns the lid further
    assert np.abs(second.positions - first.positions).max() > 1e-3


def test_the_shelf_key_follows_what_the_space_depends_on(lid):
    v, f, pins, top = lid
    c = _with_force(pins, top, 4.0)
    key = space_key(c, RigSettings())
    assert space_key(replace(c, forces=(), damping=0.9, frames=3), RigSettings()) == key
    for other in (replace(c, mass=2.0), replace(c, pins=pins[:-1]), replace(c, stiffness=2.0)):
        assert space_key(other, RigSettings()) != key
    assert mesh_digest(v + 1e-3, f) != mesh_digest(v, f)
    assert space_key(c, RigSettings(glue_hz=41.0)) != key


def test_the_shelf_gives_up_the_least_recently_used_space():
    shelf = SpaceShelf(size=2)
    made = []
    for key in ("a", "b", "a", "c", "b"):
        shelf.get(key, lambda k=key: made.append(k) or k)
    assert made == ["a", "b", "c", "b"] and shelf.hits == 1 and len(shelf) == 2


def _preview_request(folder, v, f, conditions, frames):
    folder.mkdir()
    np.savez(folder / "mesh.npz", vertices=v.astype(np.float32), faces=f.astype(np.int32))
    request = {
        "protocol": 1,
        "task": "preview",
        "mesh": "mesh.npz",
        "conditions": conditions.to_dict(),
        "preview": {"frames": frames},
        "output": {"frames": "frames.npy"},
    }
    (folder / "request.json").write_text(json.dumps(request))
    return folder / "request.json"


def test_a_serving_worker_stops_a_preview_when_a_newer_request_arrives(tmp_path, lid):
    """The first preview (a long one) is still running when the second arrives: it stops
    with a Superseded error, and the second runs its K frames on the kept space, moving as
    the same preview run alone in a fresh worker does."""
    v, f, pins, top = lid
    long_run = replace(_with_force(pins, top, 4.0), frames=1000)
    old = _preview_request(tmp_path / "old", v, f, long_run, 1000)
    new = _preview_request(tmp_path / "new", v, f, _with_force(pins, top, 8.0), 6)
    alone = _preview_request(tmp_path / "alone", v, f, _with_force(pins, top, 8.0), 6)
    proc = start(["--serve"], stdin=subprocess.PIPE)
    try:
        assert json.loads(proc.stdout.readline())["type"] == "ready"
        for path in (old, new):
            proc.stdin.write(json.dumps({"request": str(path)}) + "\n")
        proc.stdin.flush()
        stopped, answered = _answer(proc), _answer(proc)
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0
    finally:
        proc.kill()
    assert stopped[-1]["type"] == "error" and stopped[-1]["kind"] == "Superseded", stopped[-1]
    assert len([m for m in stopped if m["type"] == "frame"]) < 1000
    done = answered[-1]
    assert done["type"] == "done" and done["count"] == 6, done
    assert [m["index"] for m in answered if m["type"] == "frame"] == list(range(6))
    frames = np.load(done["frames"])
    assert frames.shape == (6, len(v), 3)
    proc = start(["--request", str(alone)])
    out, _ = proc.communicate(timeout=300)
    fresh = np.load(json.loads(out.splitlines()[-1])["frames"])
    np.testing.assert_array_equal(frames, fresh)


def test_a_preview_request_needs_its_frames(tmp_path, lid):
    v, f, pins, top = lid
    path = _preview_request(tmp_path / "bad", v, f, _with_force(pins, top, 4.0), 0)
    proc = start(["--request", str(path)])
    out, _ = proc.communicate(timeout=300)
    last = json.loads(out.splitlines()[-1])
    assert proc.returncode == 2 and last["kind"] == "RequestError" and "preview" in last["message"]


def test_a_kept_cloth_mesh_gives_the_same_motion(tmp_path):
    """A cloth's simulation mesh kept on the shelf: the same motion as a fresh run; without a
    rig asked for, none is made."""
    from training.eval.scene_meshes import flag

    m = flag(edge=0.1)
    c = SimulationConditions(frames=6, fps=24.0, damping=0.2, pins=tuple(int(i) for i in m.pins))
    shelf = SpaceShelf()
    simulate_rig(m.vertices, m.faces, c, shelf=shelf)
    kept = simulate_rig(m.vertices, m.faces, c, shelf=shelf, want_rig=False)
    assert shelf.hits == 2 and kept.rig is None  # the welding answer and the cloth's mesh
    fresh = simulate_rig(m.vertices, m.faces, c)
    assert fresh.rig is not None
    np.testing.assert_array_equal(kept.positions, fresh.positions)


def test_previews_waiting_behind_a_newer_one_are_skipped_before_their_setup(tmp_path, lid):
    """Four long previews of a moved object (a new mesh each: no space kept) sent at once, as
    a drag sends them: all but the last stop before their setup or after their first frame,
    and the last runs to its end."""
    v, f, pins, top = lid
    paths = []
    for k in range(4):
        moved = v + (0.01 * k, 0.0, 0.0)
        c = replace(_with_force(pins, top, 4.0), frames=1000, ground=None)
        frames = 6 if k == 3 else 1000
        paths.append(_preview_request(tmp_path / f"p{k}", moved, f, c, frames))
    proc = start(["--serve"], stdin=subprocess.PIPE)
    try:
        assert json.loads(proc.stdout.readline())["type"] == "ready"
        proc.stdin.write("".join(json.dumps({"request": str(p)}) + "\n" for p in paths))
        proc.stdin.flush()
        answers = [_answer(proc) for _ in paths]
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0
    finally:
        proc.kill()
    for answer in answers[:3]:
        assert answer[-1].get("kind") == "Superseded", answer[-1]
        assert len([m for m in answer if m["type"] == "frame"]) <= 1
    assert answers[3][-1]["type"] == "done" and answers[3][-1]["count"] == 6
