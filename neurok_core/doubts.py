"""Whether a simulation's result is likely implausible, from its info: the rule and the words
of the warning, for both dynamics, shared by the CLI's summary and the extension's report.

Plain Python (no numpy, no torch), so the extension imports it as it imports the conditions.

- The learned space (``simulate``'s info): the motion pressed against the limits of what the
  model learned (``frames_on_barrier``) in more than ``BARRIER_WARNING_SHARE`` of the frames and
  the mesh stretched or crumpled there (``edge_strain_max`` over ``STRAIN_WARNING``). Resting
  against those limits with the mesh intact (a lid at its stop, a small push) is not doubtful.
- The rig space (``rigspace.plausibility``'s figures, ``"dynamics": "rig"``): the mean edge
  strain over ``STRAIN_WARNING`` in some frame (a cloth stretched as no cloth stretches), or a
  vertex deeper than ``PENETRATION_WARNING`` of the object's size in the ground or a collider.
"""

from __future__ import annotations

BARRIER_WARNING_SHARE = 0.25  # of the frames on the learned space's barrier, past which it may warn
STRAIN_WARNING = 0.05  # mean edge strain past which a motion is doubtful
PENETRATION_WARNING = 0.01  # of the object's size: the deepest a rig-space motion may go in


def _count(value) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return 0


def _figure(info, key: str, frame_key: str) -> tuple[float, int]:
    """(info[key], info[frame_key]) as a non-negative number and a frame, (0, 0) when absent or
    malformed."""
    if not isinstance(info, dict):
        return 0.0, 0
    value = info.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        return 0.0, 0
    return float(value), _count(info.get(frame_key))


def frames_on_barrier(info) -> int:
    """The engine's ``frames_on_barrier`` from a result's info, 0 when absent or malformed."""
    return _count(info.get("frames_on_barrier") if isinstance(info, dict) else None)


def edge_strain(info) -> tuple[float, int]:
    """The largest mean edge strain over the frames and its frame, (0, 0) when absent."""
    return _figure(info, "edge_strain_max", "edge_strain_frame")


def penetration(info) -> tuple[float, int]:
    """The deepest a vertex went into the ground or a collider (object sizes) and its frame, (0,
    0) when absent (the learned space does not report it)."""
    return _figure(info, "penetration_max", "penetration_frame")


def is_rig(info) -> bool:
    """Whether the result is the rig space's (its info says ``"dynamics": "rig"``)."""
    return isinstance(info, dict) and info.get("dynamics") == "rig"


def doubtful(pressed: int, frames: int, strain: float) -> bool:
    """The learned space's rule (module docstring): ``pressed`` of ``frames`` on the barrier."""
    return frames > 0 and pressed > BARRIER_WARNING_SHARE * frames and strain > STRAIN_WARNING


def rig_doubtful(strain: float, depth: float) -> bool:
    """The rig space's rule (module docstring): ``depth`` in object sizes."""
    return strain > STRAIN_WARNING or depth > PENETRATION_WARNING


def warning(info, frames: int) -> str | None:
    """The warning for a result of ``frames`` frames whose info is ``info`` (what went wrong,
    where, and what to change), or None when nothing says it is implausible."""
    strain, at = edge_strain(info)
    if is_rig(info):
        depth, deepest = penetration(info)
        if not rig_doubtful(strain, depth):
            return None
        found = []
        if strain > STRAIN_WARNING:
            found.append(f"the mesh stretched by {strain:.0%} on average by frame {at}")
        if depth > PENETRATION_WARNING:
            found.append(
                f"it went {depth:.1%} of its size into the ground or a collider by frame {deepest}"
            )
        return (
            f"In the rig space {' and '.join(found)}: the result is likely implausible there."
            " Use gentler forces, lower speeds or drag targets closer to the object"
        )
    pressed = frames_on_barrier(info)
    if not doubtful(pressed, frames, strain):
        return None
    return (
        f"In {pressed} of {frames} frames the motion pressed against the limits of what the"
        f" model learned for this object, and the mesh stretched by {strain:.0%} on average by"
        f" frame {at}: the result is likely implausible there. Use gentler forces or drag"
        " targets closer to the object, or raise its stiffness or damping"
    )


def short_warning(rig: bool, frames: int, pressed: int, strain: float, depth: float) -> str | None:
    """The warning in a few words (a panel's line), from the figures kept with a bake, or
    None (the rules of :func:`warning`)."""
    if rig:
        if not rig_doubtful(strain, depth):
            return None
        found = [f"stretched {strain:.0%}"] if strain > STRAIN_WARNING else []
        found += [f"{depth:.1%} into an obstacle"] if depth > PENETRATION_WARNING else []
        return f"Likely implausible: {', '.join(found)}"
    if not doubtful(pressed, frames, strain):
        return None
    return f"Beyond the learned shapes in {pressed} of {frames} frames (stretched {strain:.0%})"
