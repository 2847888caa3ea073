"""NeuROK engine: networks, geometry, metrics, kinematic space and dynamics.

Never imports Blender (``bpy``); the Blender side talks to it through a worker process.
"""

__version__ = "0.1.0"

from .errors import (  # noqa: F401
    CheckpointError,
    ConditionError,
    MeshError,
    NeuROKError,
    SequenceError,
    SimulationError,
)
