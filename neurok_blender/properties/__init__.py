# SPDX-License-Identifier: GPL-3.0-or-later
"""The add-on's settings: one root PropertyGroup per object (``Object.neurok``) and per scene
(``Scene.neurok``); everything else hangs off those two."""

from .condition import NeuROKConditionSettings
from .object import (
    NeuROKObjectSettings,
    NeuROKOutputSettings,
    NeuROKPhysicsSettings,
    NeuROKResultItem,
    NeuROKResults,
)
from .scene import NeuROKSceneSettings
from .structure import NeuROKStructure, NeuROKStructureJoint, NeuROKStructurePart

# Registration order: nested groups before the groups that point to them.
CLASSES = (
    NeuROKConditionSettings,
    NeuROKPhysicsSettings,
    NeuROKOutputSettings,
    NeuROKResultItem,
    NeuROKResults,
    NeuROKStructurePart,
    NeuROKStructureJoint,
    NeuROKStructure,
    NeuROKObjectSettings,
    NeuROKSceneSettings,
)
