# SPDX-License-Identifier: GPL-3.0-or-later
"""An object's structure (``Object.neurok.structure``): its parts and the joints between them,
as the engine found them (Find Structure) and as the artist edited them; saved with the .blend,
undone with the scene, and sent with every Simulate and preview while **Use** is on.

Points and axes are kept in the object's own (local) frame, so that the structure follows the
object when it is moved; the request carries them in world space (``structure_data``). The
part of every vertex is kept as base64 int32 (``vertex_parts``), one per vertex of the mesh it
was found on (``vertex_count``): a mesh with another count must find it again.
"""

import bpy
from bpy.props import (
    BoolProperty,
    CollectionProperty,
    EnumProperty,
    FloatProperty,
    FloatVectorProperty,
    IntProperty,
    StringProperty,
)

# the engine's names (``neurok_core.structure.JOINT_TYPES``, ``PART_KINDS``)
JOINT_TYPE_ITEMS = (
    ("fixed", "Fixed", "Welded: the two parts move as one rigid body"),
    ("hinge", "Hinge", "Turns about its axis through its point"),
    ("slider", "Slider", "Slides along its axis, without turning"),
    ("ball", "Ball", "Turns about its point"),
    ("contact", "Contact Only", "Touching, not attached: stopped by contact alone"),
)
AXIS_TYPES = frozenset({"hinge", "slider"})
# the engine's part kinds (``neurok_core.structure.PART_KINDS``), as the panel offers them
PART_KINDS = ("rigid", "bending solid", "rope", "cloth")
PART_KIND_ITEMS = (
    ("RIGID", "Rigid", "Moves as one rigid body (a handle, a link)", 0),
    ("BENDING", "Bending Solid", "Bends and wobbles as its Stiffness says (a jelly, rubber)", 1),
    ("ROPE", "Rope", "Bends freely along its length (a rope, a cable)", 2),
    ("CLOTH", "Cloth", "An open, flat sheet, simulated as cloth (the mesh's own kind)", 3),
)


def _kind_index(self) -> int:
    return PART_KINDS.index(self.kind) if self.kind in PART_KINDS else 0


def _set_kind(self, value: int) -> None:
    self.kind = PART_KINDS[value]


class NeuROKStructurePart(bpy.types.PropertyGroup):
    kind: StringProperty(name="Kind", description="rigid, bending solid, cloth or rope")
    found_kind: StringProperty(name="Found", description="The kind the geometry gave")
    kind_choice: EnumProperty(
        name="Kind",
        description="What the part is: Simulate moves it as such (a rope made a rigid handle)",
        items=PART_KIND_ITEMS,
        get=_kind_index,
        set=_set_kind,
    )
    confidence: FloatProperty(name="Confidence", min=0.0, max=1.0)
    vertex_count: IntProperty(name="Vertices", min=0)


class NeuROKStructureJoint(bpy.types.PropertyGroup):
    type: EnumProperty(
        name="Type",
        description="How the two parts move relative to each other",
        items=JOINT_TYPE_ITEMS,
        default="fixed",
    )
    found_type: StringProperty(name="Found", description="The type the geometry gave")
    part_a: IntProperty(name="Part", min=-1)
    part_b: IntProperty(name="Part", min=-1, description="-1: the world (the pinned parts)")
    axis: FloatVectorProperty(
        name="Axis",
        description="A hinge's turning axis, a slider's direction (object space)",
        size=3,
        subtype="DIRECTION",
        default=(0.0, 0.0, 1.0),
    )
    point: FloatVectorProperty(
        name="Point",
        description="A point on the axis, or the interface's centre (object space)",
        size=3,
        subtype="TRANSLATION",
    )
    use_limits: BoolProperty(name="Limits", description="Whether the found limits are sent")
    limits: FloatVectorProperty(name="Limits", size=2)
    confidence: FloatProperty(name="Confidence", min=0.0, max=1.0)


class NeuROKStructure(bpy.types.PropertyGroup):
    use: BoolProperty(
        name="Use in Simulate",
        description=(
            "Simulate and the live preview hold these joints instead of the ones the geometry"
            " gives (the Rig Space)"
        ),
        default=True,
    )
    show: BoolProperty(
        name="Show Joints", description="Draw the joints' axes in the viewport", default=True
    )
    parts: CollectionProperty(type=NeuROKStructurePart)
    joints: CollectionProperty(type=NeuROKStructureJoint)
    vertex_count: IntProperty(min=0)
    vertex_parts: StringProperty(description="Each vertex's part, base64 int32", options={"HIDDEN"})
