"""Procedural articulated objects: rigid parts from watertight primitives joined by joints.

Families (category "articulated"): laptop, chest, cabinet, drawers, door, oven (furniture);
desk_lamp, fan, wheel, scissors (mechanisms); robot_arm, sliding_window (machines);
random_assembly (random parts and joints, for diversity).

Held out from training (split "unseen"), to measure generalisation to unseen categories:
- ``scissors``: a flat two-blade tool turning about a pivot in its own plane; its revolute
  kinematics are seen in training (laptop, door) but not its shape, thin layered blades and rings.
- ``sliding_window``: panes sliding in tracks; prismatic kinematics are seen (drawers, gripper)
  but not a thin planar frame whose moving part slides across a fixed one.
Both keep their joint types in training, so what is measured is generalisation across shapes and
categories, as in the paper, rather than to a kind of joint the model never met.

Every family draws its proportions, joint limits and joint placement at random; the vertex
count (a few hundred to ~20k), the rest pose (closed or random within the limits) and the
trajectory (smooth minimum-jerk moves of one, several or all joints) are drawn by ``builder``.
"""

from . import assemblies, furniture, machines, mechanisms  # noqa: F401  (registers the families)
from .builder import ARTICULATED, Articulation, ObjectBuilder, articulate

__all__ = ["ARTICULATED", "Articulation", "ObjectBuilder", "articulate"]
