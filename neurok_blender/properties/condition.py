# SPDX-License-Identifier: GPL-3.0-or-later
"""The settings of one condition: a force arrow, a drag handle or a velocity arrow.

A condition is an Empty parented to the simulated object; these settings live on the Empty
(``empty.neurok.condition``), so deleting, duplicating or hiding the Empty does the obvious thing.
Where the condition acts is the Empty itself: its location is the point (force, velocity) or the
target (drag) and its local Z axis the direction.
"""

import bpy
from bpy.props import BoolProperty, EnumProperty, FloatProperty, FloatVectorProperty, IntProperty

KINDS = (
    ("NONE", "None", "Not a NeuROK condition"),
    ("FORCE", "Force", "A constant force on a surface point, along the arrow", "FORCE_FORCE", 1),
    ("DRAG", "Drag", "Grab a surface point and bring it to the handle by a frame", "VIEW_PAN", 2),
    ("VELOCITY", "Velocity", "An initial velocity of a point, along the arrow", "FORCE_WIND", 3),
)
# The first item has no icon and number; Blender needs all five fields when any has them.
KINDS = ((KINDS[0][0], KINDS[0][1], KINDS[0][2], "BLANK1", 0), *KINDS[1:])


class NeuROKConditionSettings(bpy.types.PropertyGroup):
    kind: EnumProperty(name="Kind", items=KINDS, default="NONE")
    strength: FloatProperty(
        name="Strength",
        description=(
            "Force in newtons (drag the arrow gizmo in the viewport: its range is 0 to 100 N;"
            " type larger values, up to 1 MN; Simulate says when a force would throw the object"
            " beyond the shapes it can take, and what it accepts)"
        ),
        default=10.0,
        min=0.0,
        max=1e6,
        soft_max=100.0,
        unit="NONE",
    )
    speed: FloatProperty(
        name="Speed",
        description="Initial speed in metres per second, along the arrow",
        default=1.0,
        min=0.0,
        max=1e4,
        soft_max=20.0,
        unit="VELOCITY",
    )
    whole_object: BoolProperty(
        name="Whole Object",
        description="Give the whole object this initial velocity instead of one point",
        default=False,
    )
    use_frame_range: BoolProperty(
        name="Frame Range",
        description="Act only between two frames (otherwise during the whole animation)",
        default=False,
    )
    frame_start: IntProperty(name="Start", description="First frame the force acts", default=1)
    frame_end: IntProperty(name="End", description="Last frame the force acts", default=250)
    frame: IntProperty(
        name="Arrive At",
        description="Frame at which the grabbed point reaches the handle (then it is let go)",
        default=24,
    )
    anchor_vertex: IntProperty(
        name="Vertex",
        description="Mesh vertex this condition grabs (-1: a surface point)",
        default=-1,
        min=-1,
    )
    anchor_point: FloatVectorProperty(
        name="Grabbed Point",
        description="The grabbed surface point, in the object's local coordinates",
        size=3,
        subtype="XYZ",
        unit="LENGTH",
    )
