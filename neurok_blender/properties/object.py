# SPDX-License-Identifier: GPL-3.0-or-later
"""The per-object root (``Object.neurok``): physics and output of a simulated mesh, the record
of what a bake added (so re-simulating and Clear touch nothing else), the target of Fit to
Target and how its result is keyed, and, on an Empty, the settings of the condition it stands
for."""

import bpy
from bpy.props import (
    BoolProperty,
    CollectionProperty,
    EnumProperty,
    FloatProperty,
    IntProperty,
    PointerProperty,
    StringProperty,
)

from ..core import CLOTH_MATERIALS, DEFAULT_DYNAMICS, DYNAMICS
from .condition import NeuROKConditionSettings
from .structure import NeuROKStructure

# the engine's dynamics (``core.DYNAMICS``, the request's ``dynamics``) as the panel shows them
_DYNAMICS_ITEMS = {
    "latent": (
        "Learned Space",
        "The motion in the learned model's latent space: the shapes the model learned for such"
        " objects (needs the model)",
    ),
    "rig": (
        "Rig Space",
        "The bones' rigid motions as the coordinates, with joints, elasticity and contact as"
        " energies: parts stay rigid and lids turn on their hinges, a cloth moves at its own"
        " resolution; needs no model, and Automatic bakes it as a rig (a cloth as shape keys)",
    ),
}


class NeuROKPhysicsSettings(bpy.types.PropertyGroup):
    mass: FloatProperty(
        name="Mass",
        description="Total mass of the object, spread over its surface by area",
        default=1.0,
        min=1e-6,
        soft_min=0.01,
        soft_max=1000.0,
        unit="MASS",
    )
    stiffness: FloatProperty(
        name="Stiffness",
        description=(
            "The object's lowest vibration frequency, in Hz: how fast it springs back to its"
            " rest shape (0: no pull back, as a free hinge; a few Hz: a wobbly jelly)"
        ),
        default=0.0,
        min=0.0,
        max=100.0,
        soft_max=10.0,
    )
    damping: FloatProperty(
        name="Damping",
        description="How fast motion dies out, per second (0: no loss)",
        default=0.2,
        min=0.0,
        soft_max=20.0,
    )
    cloth_material: EnumProperty(
        name="Cloth Material",
        description=(
            "For a cloth (a mesh of open sheets, in the rig space): moves as Blender's cloth"
            " preset of that name (its stretch, bending and air damping, added to Damping)"
        ),
        items=(("NONE", "Default", "The cloth's own material; Damping is its air damping", 0),)
        + tuple(
            (name.upper(), name.capitalize(), f"As Blender's {name.capitalize()} cloth preset", i)
            for i, name in enumerate(CLOTH_MATERIALS, 1)
        ),
        default="NONE",
    )
    cloth_self_collision: BoolProperty(
        name="Self Collision",
        description=(
            "For a cloth: keep its folds from passing through it, with friction between its"
            " layers (as Blender's cloth Self Collisions; several times slower; Live Preview"
            " leaves it out)"
        ),
        default=False,
    )
    use_gravity: BoolProperty(
        name="Gravity",
        description="Use the scene's gravity (Scene Properties > Gravity)",
        default=True,
    )
    pin_group: StringProperty(
        name="Pin Group",
        description="Vertices of this vertex group (weight of at least 0.5) stay where they are",
        default="",
    )
    use_ground: BoolProperty(
        name="Ground",
        description="A ground plane the object lands and rests on (Z up, world space)",
        default=False,
    )
    ground_at_lowest: BoolProperty(
        name="At Lowest Point",
        description="Put the ground at the object's lowest point at the start (else at Height)",
        default=True,
    )
    ground_height: FloatProperty(
        name="Height",
        description="World height of the ground plane",
        default=0.0,
        unit="LENGTH",
    )
    collider_source: EnumProperty(
        name="Colliders",
        description="Static objects the simulated object meets",
        items=(
            ("PHYSICS", "Collision Physics", "Every other mesh with Blender's Collision physics"),
            ("COLLECTION", "Collection", "The meshes of a collection"),
            ("NONE", "None", "No colliders"),
        ),
        default="PHYSICS",
    )
    collider_collection: PointerProperty(
        type=bpy.types.Collection,
        name="Collection",
        description="The collection whose meshes are colliders",
    )
    friction: FloatProperty(
        name="Friction",
        description="Friction of the contact with the ground and colliders (0: ice, 1: rubber)",
        default=0.5,
        min=0.0,
        max=10.0,
        soft_max=2.0,
    )
    bounciness: FloatProperty(
        name="Bounciness",
        description=(
            "How much an impact bounces back: the share of its speed the object keeps as it "
            "leaves the ground or a collider (0: none, 1: no loss); a dropped object rebounds "
            "to about bounciness squared of its height"
        ),
        default=0.1,
        min=0.0,
        max=1.0,
    )
    role: EnumProperty(
        name="Role",
        description="What this object does when it is simulated with other selected objects",
        items=(
            ("MOVES", "Moves", "Simulated with the other selected objects that move, meeting them"),
            ("STATIC", "Static Collider", "Holds the selected objects that move back; stays put"),
        ),
        default="MOVES",
    )
    dynamics: EnumProperty(
        name="Dynamics",
        description="The coordinates the motion is integrated in",
        items=tuple((name, *_DYNAMICS_ITEMS[name]) for name in DYNAMICS),
        default=DEFAULT_DYNAMICS,
    )


class NeuROKOutputSettings(bpy.types.PropertyGroup):
    bake_mode: EnumProperty(
        name="Bake As",
        items=(
            (
                "SHAPE_KEYS",
                "Shape Keys",
                "One shape key per frame, keyed on the timeline (editable, in the .blend)",
                "SHAPEKEY_DATA",
                0,
            ),
            (
                "POINT_CACHE",
                "Point Cache",
                "A PC2 file read by a Mesh Cache modifier (faster and smaller for big meshes)",
                "FILE_CACHE",
                1,
            ),
            (
                "RIG",
                "Rig",
                "An armature whose bones are keyed on every frame, with vertex groups and an"
                " Armature modifier: editable in the Graph Editor, light for any mesh size"
                " (the rig space's dynamics, or a model with bones)",
                "ARMATURE_DATA",
                2,
            ),
            (
                "AUTO",
                "Automatic",
                "A rig for the rig space's dynamics (but a cloth's) or a model with bones, else"
                " shape keys (a point cache above 50,000 vertices)",
                "AUTO",
                3,
            ),
        ),
        default="AUTO",
    )


class NeuROKResultItem(bpy.types.PropertyGroup):
    """One name (``name`` comes from PropertyGroup): a shape key or F-curve the bake added."""


class NeuROKResults(bpy.types.PropertyGroup):
    """What the last bake added to the object and its mesh; Clear removes exactly this."""

    mode: EnumProperty(
        items=(
            ("NONE", "None", ""),
            ("SHAPE_KEYS", "Shape Keys", ""),
            ("POINT_CACHE", "Point Cache", ""),
            ("RIG", "Rig", ""),
        ),
        default="NONE",
    )
    rig_object: PointerProperty(type=bpy.types.Object, description="The armature the bake made")
    rig_groups: CollectionProperty(type=NeuROKResultItem)
    shape_keys: CollectionProperty(type=NeuROKResultItem)
    created_basis: BoolProperty(default=False)
    basis_name: StringProperty(default="")
    action_name: StringProperty(default="", description="Action the bake created, if any")
    modifier_name: StringProperty(default="")
    cache_path: StringProperty(
        default="", subtype="FILE_PATH", options={"PATH_SUPPORTS_BLEND_RELATIVE"}
    )
    frame_start: IntProperty(default=1)
    frame_count: IntProperty(default=0)
    seconds: FloatProperty(default=0.0)
    frames_on_barrier: IntProperty(
        default=0,
        min=0,
        description="Frames of the last simulation whose motion pressed against the limits of "
        "the shapes the model learned for this object",
    )
    edge_strain: FloatProperty(
        default=0.0,
        min=0.0,
        description="Largest mean edge strain of the last simulation's frames (|l / l0 - 1|)",
    )
    penetration: FloatProperty(
        default=0.0,
        min=0.0,
        description="Deepest the last simulation went into the ground or a collider, in object"
        " sizes (the rig space's figure)",
    )
    dynamics: StringProperty(default="", description="The dynamics of the last simulation")


def _other_mesh(settings, obj) -> bool:
    """Fit to Target's choices: a mesh object other than the one fitted."""
    return obj.type == "MESH" and obj != settings.id_data


class NeuROKObjectSettings(bpy.types.PropertyGroup):
    condition: PointerProperty(type=NeuROKConditionSettings)
    physics: PointerProperty(type=NeuROKPhysicsSettings)
    output: PointerProperty(type=NeuROKOutputSettings)
    results: PointerProperty(type=NeuROKResults)
    structure: PointerProperty(type=NeuROKStructure)
    fit_target: PointerProperty(
        type=bpy.types.Object,
        name="Target",
        description="The mesh whose shape Fit to Target poses this object into (its shape as"
        " shown, modifiers applied; any topology)",
        poll=_other_mesh,
    )
    fit_key_as: EnumProperty(
        name="Key As",
        description="How the fitted shape is keyed at the current frame",
        items=(
            (
                "RIG",
                "Rig Pose",
                "The pose of the object's NeuROK rig (its parts' rigid motions), keyed at the"
                " current frame: editable and light for any mesh size",
                "ARMATURE_DATA",
                0,
            ),
            (
                "SHAPE_KEY",
                "Shape Key",
                "A shape key 'NeuROK Fit' holding the fitted shape, its value keyed to 1 at the"
                " current frame",
                "SHAPEKEY_DATA",
                1,
            ),
        ),
        default="RIG",
    )
