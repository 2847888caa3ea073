"""Exceptions of the engine.

Every error the engine raises on bad input is a ``NeuROKError`` with a message written for the
person who supplied the input (what is wrong and what to do), so the Blender side and the CLI can
show it as it is. Subclasses also derive from the matching builtin so callers that catch
``ValueError`` / ``OSError`` keep working.
"""


class NeuROKError(Exception):
    """Base class of every error the engine reports to a user."""


class MeshError(NeuROKError, ValueError):
    """The input mesh cannot be used (empty, non-finite, bad indices, degenerate)."""


class CheckpointError(NeuROKError, OSError):
    """A checkpoint is missing, truncated, corrupt or does not match its config."""


class ConditionError(NeuROKError, ValueError):
    """A simulation condition (force, drag, pin, mass, ...) has an invalid value."""


class SimulationError(NeuROKError, RuntimeError):
    """The simulation could not proceed (blow-up that step reduction could not fix, ...)."""


class SequenceError(NeuROKError, ValueError):
    """A 4D sequence file does not follow the format of design section 5."""


class StructureError(NeuROKError, ValueError):
    """A structure file (parts and joints, ``docs/structure.md``) is malformed or does not fit
    its mesh."""
