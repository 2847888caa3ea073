"""The headless demo, end to end at a tiny size: build, install, conditions through the
extension's operators, a real engine process (the rig space; a tiny untrained model as the
checkpoint preference), bake, save, render. The
saved .blend is then opened in a fresh Blender without the extension and checked there."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from conftest import ROOT

pytestmark = [pytest.mark.blender, pytest.mark.slow]

FRAMES = 4
SIZE = (192, 108)

# Opens the saved file in a fresh Blender without the extension; prints what it sees.
CHECK = ROOT / "tests" / "blender" / "check_demo_blend.py"


def _png(path):
    """(H, W, 3) uint8 of a PNG (Pillow comes with matplotlib in the dev environment)."""
    image = pytest.importorskip("PIL.Image")
    with image.open(path) as im:
        return np.asarray(im.convert("RGB"))


def test_demo_end_to_end(tmp_path, tiny_checkpoint):
    pytest.importorskip("bpy")
    out = tmp_path / "demo"
    (tmp_path / "tmpdir").mkdir()
    env = dict(os.environ, OMP_NUM_THREADS="1", TMPDIR=str(tmp_path / "tmpdir"))
    env.pop("PYTHONPATH", None)
    env.pop("BLENDER_USER_RESOURCES", None)
    proc = subprocess.run(
        [sys.executable, "-m", "tools.demo", "--out", str(out)]
        + ["--frames", str(FRAMES), "--detail", "4", "--size", f"{SIZE[0]}x{SIZE[1]}"]
        + ["--checkpoint", str(tiny_checkpoint), "--device", "cpu"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    # nothing failed on the way, the extension's disabling at the end included
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "total" in proc.stdout and str(out / "neurok_demo.blend") in proc.stdout
    summary = json.loads((out / "summary.json").read_text())
    # both move in the rig space; the laptop bakes as an editable rig, the flag (a cloth, at
    # its own resolution) as shape keys
    assert summary["simulations"]["Laptop"]["baked_as"] == "RIG"
    assert summary["simulations"]["Flag"]["baked_as"] == "SHAPE_KEYS"
    # each object's plausibility scores (the scenes benchmark's), consistent with its motion
    lid, cloth = (summary["motion"][n]["scene_scores"] for n in ("Laptop", "Flag"))
    assert lid["frames"] == FRAMES and lid["pinned_drift"] < 1e-3
    assert {"part_residual", "lid_turn_max_deg", "motion"} <= set(lid)
    assert cloth["edge_strain"]["max"] >= cloth["edge_strain"]["mean"] >= 0
    assert lid["motion"] > 0 and cloth["motion"] > 0  # both move (object sizes)
    # the lid stays a lid and the flag keeps its size
    assert lid["part_residual"] < 0.01 and lid["penetration_parts"] <= 0.01
    assert cloth["edge_strain"]["max"] < 0.05
    # the temporary Blender user folder and the engine's job folders are gone
    assert not any((tmp_path / "tmpdir").glob("neurok-*")), list((tmp_path / "tmpdir").iterdir())

    # the saved file, opened by a Blender that has no NeuROK installed
    user = tmp_path / "plain_user"
    env["BLENDER_USER_RESOURCES"] = str(user)
    check = subprocess.run(
        [sys.executable, str(CHECK), str(out / "neurok_demo.blend")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = [ln for ln in check.stdout.splitlines() if ln.startswith("RESULT ")]
    assert check.returncode == 0 and lines, check.stdout[-3000:] + check.stderr[-3000:]
    seen = json.loads(lines[-1][len("RESULT ") :])
    assert seen["frames"] == [1, FRAMES] and seen["camera"]
    laptop, flag = seen["Laptop"], seen["Flag"]
    # the conditions were added by the extension's operators and saved with the file
    assert laptop["conditions"] == ["FORCE"] and flag["conditions"] == ["DRAG"]
    # the laptop is played by an Armature modifier (no shape keys), the flag by its shape
    # keys (no modifier); frame 1 is the rest shape, later ones move
    assert [k for k, _ in laptop["modifiers"]] == ["ARMATURE"], laptop["modifiers"]
    assert laptop["shape_keys"] == 0
    assert flag["modifiers"] == [] and flag["shape_keys"] > 1, flag
    for example in (laptop, flag):
        assert example["motion"][0] < 1e-4 and max(example["motion"][1:]) > 1e-4, example

    # the preview: one stamped PNG per frame, a contact sheet and a GIF
    frames = [out / "frames" / f"frame_{f:04d}.png" for f in range(1, FRAMES + 1)]
    assert [str(p) for p in frames] == summary["frames"]
    first = _png(frames[0])
    assert first.shape == (SIZE[1], SIZE[0], 3)
    # both objects in view: the flag's red and the laptop's dark screen cover some pixels
    r, g, b = (first[..., i].astype(int) for i in range(3))
    red = (r > 2 * g) & (r > 2 * b) & (r > 60)
    screen = (b > r + 12) & (r < 70)
    assert red.sum() > 0.01 * red.size and screen.sum() > 0.01 * screen.size

    def orange(image):
        r, g, b = (image[..., i].astype(int) for i in range(3))
        return int(((r > b + 60) & (g > b + 30) & (r > g + 10)).sum())

    # the force arrow is drawn while the force acts (frames 1-2), and gone at the end
    assert orange(first) > 0 and orange(_png(frames[-1])) == 0
    sheet = _png(out / "contact_sheet.png")
    assert sheet.shape == (SIZE[1], FRAMES * SIZE[0], 3)
    assert np.abs(sheet[:, : SIZE[0]].astype(int) - first).max() <= 1
    from PIL import Image

    with Image.open(out / "preview.gif") as gif:
        assert gif.n_frames == FRAMES and gif.size == SIZE
