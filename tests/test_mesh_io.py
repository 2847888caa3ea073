"""Mesh files read with every vertex in the file's order (``neurok_core.meshio``), and the
command line's results in the file's vertices: loose ones carried along unmoved, indices that
name the file's vertices, a point cache that fits the file."""

import struct

import numpy as np
import pytest
import trimesh

from neurok_core.cli import main
from neurok_core.errors import MeshError
from neurok_core.meshio import read_mesh
from neurok_core.pc2 import read_pc2
from neurok_core.results import load_result

# a unit square of two quads (six corners) above z = 0, a loose vertex between its corners and a
# loose duplicate of corner 0: eight vertices in the file, six in faces
SQUARE = np.array(
    [[0, 0, 1], [1, 0, 1], [2, 0, 1], [0, 1, 1], [9, 9, 9], [1, 1, 1], [2, 1, 1], [0, 0, 1]],
    dtype=np.float64,
)
LOOSE = [4, 7]


def _obj_with_uvs(path):
    """As Blender writes an OBJ: normals, UVs, ``v/vt/vn`` corners, a quad given with negative
    (relative) indices; a different UV at every corner, so a seam-splitting reader grows it."""
    lines = ["# NeuROK test", "mtllib none.mtl", "o square"]
    lines += [f"v {x:g} {y:g} {z:g}" for x, y, z in SQUARE]
    lines += [f"vt {0.1 * i:g} {0.05 * i:g}" for i in range(8)]
    lines += ["vn 0 0 1", "s 0", "usemtl none"]
    lines.append("f 1/1/1 2/2/1 6/3/1 4/4/1")
    lines.append("f -7/5/1 -6/6/1 -2/7/1 -3/8/1")  # 2 3 7 6: after 8 vertices, -1 is vertex 8
    path.write_text("\n".join(lines) + "\n")
    return path


def _triangles_cover(faces, quads):
    """Whether ``faces`` (F, 3) split exactly the quads (each a set of 4 corners) in two."""
    return len(faces) == 2 * len(quads) and all(
        sum(set(f) <= q for f in faces.tolist()) == 2 for q in quads
    )


def test_obj_keeps_every_vertex_in_file_order_without_splitting_seams(tmp_path):
    vertices, faces = read_mesh(_obj_with_uvs(tmp_path / "square.obj"))
    np.testing.assert_array_equal(vertices, SQUARE)
    assert _triangles_cover(faces, [{0, 1, 5, 3}, {1, 2, 6, 5}])
    assert not set(LOOSE) & set(faces.reshape(-1).tolist())


def test_obj_errors_name_the_line(tmp_path):
    bad = tmp_path / "bad.obj"
    bad.write_text("v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 -4\n")
    with pytest.raises(MeshError, match="line 4: vertex index -4 names no vertex"):
        read_mesh(bad)
    bad.write_text("v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 5\n")
    with pytest.raises(MeshError, match="a face uses vertex 5, but the file has 3"):
        read_mesh(bad)
    bad.write_text("v 0 0 0\nv 1 0 0\nv 0 1 0\n")
    with pytest.raises(MeshError, match="3 vertices but no faces"):
        read_mesh(bad)


def test_ply_keeps_loose_and_duplicate_vertices_in_file_order(tmp_path):
    path = tmp_path / "square.ply"
    header = [
        "ply",
        "format ascii 1.0",
        f"element vertex {len(SQUARE)}",
        "property float x",
        "property float y",
        "property float z",
        "element face 2",
        "property list uchar int vertex_indices",
        "end_header",
    ]
    body = [f"{x:g} {y:g} {z:g}" for x, y, z in SQUARE] + ["4 0 1 5 3", "4 1 2 6 5"]
    path.write_text("\n".join(header + body) + "\n")
    vertices, faces = read_mesh(path)
    np.testing.assert_array_equal(vertices, SQUARE)
    assert _triangles_cover(faces, [{0, 1, 5, 3}, {1, 2, 6, 5}])


def test_stl_corners_at_one_position_are_one_vertex_in_order_of_first_appearance(tmp_path):
    """STL has no shared vertices (three corners per facet); corners at bit-for-bit the same
    position are one vertex, numbered as they first appear (as Blender's STL import does)."""
    triangles = np.array(
        [
            [[0, 0, 0], [1, 0, 0], [0, 1, 0]],
            [[1, 0, 0], [1, 1, 0], [0, 1, 0]],
            [[5, 5, 5], [6, 5, 5], [5, 6, 5]],  # a separate part
            [[1, 1, 0], [1, 0, 0], [1, 1, 0]],  # degenerate: a repeated corner
        ],
        dtype=np.float32,
    )
    path = tmp_path / "soup.stl"
    with open(path, "wb") as fh:  # binary STL, written by hand
        fh.write(b"\0" * 80 + struct.pack("<I", len(triangles)))
        for tri in triangles:
            fh.write(struct.pack("<3f", 0, 0, 1) + tri.astype("<f4").tobytes() + b"\0\0")
    vertices, faces = read_mesh(path)
    first_seen: dict[tuple, int] = {}  # the reference: a dictionary over the corners in order
    for corner in triangles.reshape(-1, 3).tolist():
        first_seen.setdefault(tuple(corner), len(first_seen))
    np.testing.assert_array_equal(vertices, np.array(list(first_seen), dtype=np.float64))
    want = [[first_seen[tuple(c)] for c in tri] for tri in triangles.tolist()]
    np.testing.assert_array_equal(faces, want)


def _square_mesh(tmp_path, suffix):
    """The square (8 file vertices, 2 loose) as OBJ with UVs, or through trimesh as PLY."""
    if suffix == ".obj":
        return _obj_with_uvs(tmp_path / "square.obj")
    mesh = trimesh.Trimesh(SQUARE, [[0, 1, 5], [0, 5, 3], [1, 2, 6], [1, 6, 5]], process=False)
    path = tmp_path / f"square{suffix}"
    mesh.export(path)
    return path


@pytest.mark.parametrize("suffix", [".obj", ".ply"])
def test_results_hold_every_file_vertex_and_indices_name_them(tmp_path, capsys, suffix):
    """A point cache of the rig-space dynamics (no model) has the file's 8 vertices: the loose
    ones at rest, the pinned file vertex 6 (after the loose vertex 4) still, the rest moving;
    the .npz's rig plays the file's vertices back."""
    mesh = _square_mesh(tmp_path, suffix)
    args = ["simulate", str(mesh), "--dynamics", "rig", "--frames", "6", "--quiet"]
    args += ["--force", "0:0,0,1:20:0-3", "--pin", "6", "--no-gravity"]
    assert main([*args, "--out", str(tmp_path / "a.pc2")]) == 0
    frames = read_pc2(tmp_path / "a.pc2").frames  # (T, 8, 3)
    assert frames.shape == (6, 8, 3)
    np.testing.assert_allclose(frames[:, LOOSE], np.broadcast_to(SQUARE[LOOSE], (6, 2, 3)))
    np.testing.assert_allclose(frames[:, 6], np.broadcast_to(SQUARE[6], (6, 3)), atol=1e-6)
    assert np.abs(frames[-1, 0] - SQUARE[0]).max() > 1e-3  # the pushed corner moved
    assert "8 vertices (2 in no face, unmoved)" in capsys.readouterr().out
    assert main([*args, "--out", str(tmp_path / "a.npz")]) == 0
    result = load_result(tmp_path / "a.npz")
    np.testing.assert_allclose(result.positions, frames, atol=1e-6)
    for t in range(6):
        np.testing.assert_allclose(result.rig.skin(SQUARE, t), frames[t], atol=1e-5)
    assert result.conditions["pins"] == [6]  # the file's numbering


def test_an_stl_result_has_its_welded_vertices(tmp_path, capsys):
    mesh = trimesh.creation.box((0.4, 0.2, 0.1))
    mesh.export(tmp_path / "box.stl")  # 36 corners in the file, 8 positions
    args = ["simulate", str(tmp_path / "box.stl"), "--dynamics", "rig", "--frames", "3"]
    args += ["--quiet", "--no-gravity", "--force", "0:0,0,1:5", "--out", str(tmp_path / "a.pc2")]
    assert main(args) == 0
    assert read_pc2(tmp_path / "a.pc2").frames.shape == (3, 8, 3)


def test_a_force_on_a_loose_vertex_is_refused(tmp_path, capsys):
    mesh = _obj_with_uvs(tmp_path / "square.obj")
    args = ["simulate", str(mesh), "--dynamics", "rig", "--frames", "4", "--quiet"]
    assert main([*args, "--force", "4:0,0,1:5", "--out", str(tmp_path / "a.pc2")]) == 2
    assert "force on vertex 4, which no face uses" in capsys.readouterr().err
    assert main([*args, "--force", "8:0,0,1:5", "--out", str(tmp_path / "a.pc2")]) == 2
    assert "the mesh has 8 vertices" in capsys.readouterr().err


def test_numeric_options_take_negative_numbers_in_exponent_notation(tmp_path, capsys):
    box = trimesh.creation.box((0.4, 0.2, 0.1))
    box.apply_translation((0.0, 0.0, 1.0))
    box.export(tmp_path / "box.obj")
    args = ["simulate", str(tmp_path / "box.obj"), "--dynamics", "rig", "--frames", "3"]
    args += ["--ground", "-2e-09", "--gravity", "-0,0,-9.81", "--pin-below", "-1E+3"]
    args += ["--force", "-0.2,0,1:0,0,1:2", "--quiet", "--out", str(tmp_path / "a.npz")]
    assert main(args) == 0, capsys.readouterr().err
    conditions = load_result(tmp_path / "a.npz").conditions
    assert conditions["ground"] == -2e-09 and conditions["gravity"] == [-0.0, 0.0, -9.81]
    assert conditions["forces"][0]["point"] == [-0.2, 0.0, 1.0] and conditions["pins"] == []


def test_the_latent_path_carries_loose_vertices_unmoved(tmp_path, tiny_skinned_checkpoint):
    """With a model with bones: the .npz's positions and its rig (dual quaternions, one more
    bone that never moves) hold the file's vertices, the loose one at rest."""
    slab = trimesh.creation.box((0.4, 0.2, 0.05)).subdivide()
    rest = np.vstack([slab.vertices[:5], [[2.0, 2.0, 2.0]], slab.vertices[5:]])  # loose: 5
    faces = np.where(slab.faces >= 5, slab.faces + 1, slab.faces)
    lines = [f"v {x!r} {y!r} {z!r}" for x, y, z in rest] + [
        f"f {a + 1} {b + 1} {c + 1}" for a, b, c in faces
    ]
    (tmp_path / "slab.obj").write_text("\n".join(lines) + "\n")
    args = ["simulate", str(tmp_path / "slab.obj"), "--checkpoint", str(tiny_skinned_checkpoint)]
    args += ["--force", "6:0,0,1:1.0:0-3", "--frames", "5", "--no-gravity", "--quiet"]
    assert main([*args, "--out", str(tmp_path / "a.npz"), "--cache-dir", str(tmp_path)]) == 0
    result = load_result(tmp_path / "a.npz")
    assert result.positions.shape == (5, len(rest), 3)
    np.testing.assert_allclose(result.positions[:, 5], np.broadcast_to(rest[5], (5, 3)))
    assert np.abs(result.positions[-1] - rest).max() > 1e-4  # the slab moved
    for t in range(5):
        np.testing.assert_allclose(result.rig.skin(rest, t), result.positions[t], atol=1e-4)
