# SPDX-License-Identifier: GPL-3.0-or-later
"""The demo's preview: a camera framing the animation, Workbench lighting, frame-numbered PNGs,
a contact sheet and a GIF.

Workbench renders headless in the ``bpy`` module (software OpenGL, about a second a frame at
640 x 360); Eevee renders too but compiles its shaders in software first (minutes).
"""

from __future__ import annotations

from pathlib import Path

import bpy
import numpy as np
from mathutils import Vector

VIEW_DIRECTION = Vector((0.45, 1.0, -0.42)).normalized()  # from the camera into the scene
MARGIN = 0.12  # extra distance, relative to the fitted one


def animated_points(objects, frames) -> np.ndarray:
    """World positions of ``objects`` (after shape keys and modifiers) over ``frames``, (P, 3)."""
    scene = bpy.context.scene
    chunks = []
    for frame in frames:
        scene.frame_set(frame)
        depsgraph = bpy.context.evaluated_depsgraph_get()
        for obj in objects:
            ev = obj.evaluated_get(depsgraph)
            mesh = ev.to_mesh()
            co = np.empty(len(mesh.vertices) * 3, dtype=np.float64)
            mesh.vertices.foreach_get("co", co)
            ev.to_mesh_clear()
            m = np.array(obj.matrix_world)  # (4, 4)
            chunks.append(co.reshape(-1, 3) @ m[:3, :3].T + m[:3, 3])
    return np.concatenate(chunks)


def add_camera(points: np.ndarray, *, lens: float = 50.0) -> bpy.types.Object:
    """A camera looking along VIEW_DIRECTION that frames every point (P, 3) with a margin."""
    scene = bpy.context.scene
    cam = bpy.data.objects.new("Preview Camera", bpy.data.cameras.new("Preview Camera"))
    scene.collection.objects.link(cam)
    cam.data.lens = lens
    cam.rotation_euler = VIEW_DIRECTION.to_track_quat("-Z", "Y").to_euler()
    scene.camera = cam
    bpy.context.view_layer.update()
    depsgraph = bpy.context.evaluated_depsgraph_get()
    location, _scale = cam.camera_fit_coords(depsgraph, points.astype(np.float32).ravel())
    centre = Vector(points.mean(axis=0))
    distance = (Vector(location) - centre).length
    cam.location = Vector(location) - VIEW_DIRECTION * (MARGIN * distance)
    return cam


def setup_render(out_dir: Path, size: tuple[int, int], engine: str = "WORKBENCH") -> str:
    """Render settings: engine, size, lighting, the frame-number stamp; returns the path pattern."""
    scene = bpy.context.scene
    render = scene.render
    render.engine = "BLENDER_WORKBENCH" if engine == "WORKBENCH" else "BLENDER_EEVEE"
    render.resolution_x, render.resolution_y = size
    render.resolution_percentage = 100
    render.image_settings.file_format = "PNG"
    render.image_settings.color_mode = "RGB"
    shading = scene.display.shading
    shading.light = "STUDIO"
    shading.color_type = "MATERIAL"
    shading.show_shadows = True
    shading.shadow_intensity = 0.35
    shading.show_cavity = True
    shading.cavity_type = "WORLD"
    scene.display.light_direction = (0.4, -0.3, 0.87)
    world = scene.world or bpy.data.worlds.new("World")
    scene.world = world
    world.color = (0.55, 0.62, 0.72)
    scene.view_settings.view_transform = "Standard"
    render.use_stamp = True
    for flag in (
        "use_stamp_date",
        "use_stamp_time",
        "use_stamp_render_time",
        "use_stamp_camera",
        "use_stamp_lens",
        "use_stamp_scene",
        "use_stamp_filename",
        "use_stamp_marker",
        "use_stamp_frame_range",
        "use_stamp_memory",
        "use_stamp_hostname",
        "use_stamp_sequencer_strip",
    ):
        if hasattr(render, flag):
            setattr(render, flag, False)
    render.use_stamp_frame = True
    render.use_stamp_note = True
    render.stamp_note_text = "NeuROK demo"
    render.stamp_font_size = max(12, size[1] // 20)
    out_dir.mkdir(parents=True, exist_ok=True)
    render.filepath = str(out_dir / "frame_")
    render.use_file_extension = True
    return str(out_dir / "frame_{:04d}.png")


def render_frames(pattern: str) -> list[Path]:
    """Render the scene's frame range; returns the PNG paths in frame order."""
    scene = bpy.context.scene
    bpy.ops.render.render(animation=True)
    paths = [Path(pattern.format(f)) for f in range(scene.frame_start, scene.frame_end + 1)]
    missing = [p for p in paths if not p.is_file()]
    if missing:
        raise RuntimeError(f"the renderer did not write {missing[0]}")
    return paths


def _read_png(path: Path) -> np.ndarray:
    """(H, W, 4) float32, top row first."""
    image = bpy.data.images.load(str(path), check_existing=False)
    w, h = image.size
    pixels = np.empty(w * h * 4, dtype=np.float32)
    image.pixels.foreach_get(pixels)
    bpy.data.images.remove(image)
    return pixels.reshape(h, w, 4)[::-1]


def contact_sheet(paths: list[Path], out_path: Path, *, columns: int = 4, count: int = 8) -> Path:
    """A grid of ``count`` frames spread over ``paths`` (first and last included), as one PNG."""
    picks = sorted({round(i) for i in np.linspace(0, len(paths) - 1, min(count, len(paths)))})
    tiles = [_read_png(paths[i]) for i in picks]
    h, w, _ = tiles[0].shape
    columns = min(columns, len(tiles))
    rows = -(-len(tiles) // columns)
    sheet = np.ones((rows * h, columns * w, 4), dtype=np.float32)
    for k, tile in enumerate(tiles):
        r, c = divmod(k, columns)
        sheet[r * h : (r + 1) * h, c * w : (c + 1) * w] = tile
    image = bpy.data.images.new("contact sheet", columns * w, rows * h, alpha=False)
    image.pixels.foreach_set(sheet[::-1].ravel())
    image.filepath_raw = str(out_path)
    image.file_format = "PNG"
    image.save()
    bpy.data.images.remove(image)
    return out_path


def gif(paths: list[Path], out_path: Path, fps: float) -> Path | None:
    """An animated GIF of the frames (needs Pillow; None without it)."""
    try:
        from PIL import Image
    except ImportError:
        return None
    frames = [Image.open(p).convert("RGB") for p in paths]
    palette = [f.quantize(colors=255, method=Image.Quantize.MEDIANCUT) for f in frames]
    palette[0].save(
        out_path,
        save_all=True,
        append_images=palette[1:],
        duration=round(1000 / fps),
        loop=0,
    )
    return out_path
