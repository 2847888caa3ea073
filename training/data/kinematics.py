"""A small kinematic tree (revolute, prismatic, continuous joints) and its forward kinematics.

Joints are given in the world frame at the zero configuration (every q_j = 0), as twists: a unit
axis and, for rotations, a point on the axis. Forward kinematics is the product of exponentials
(Murray, Li, Sastry, "A Mathematical Introduction to Robotic Manipulation", 1994, eq. 3.13):

    T_link(q) = T_parent(q) exp(xi_j q_j),
    exp(xi q) = [[R(a, q), (I - R(a, q)) p], [0, 1]]   (revolute, continuous: axis a through p)
    exp(xi q) = [[I, a q], [0, 1]]                      (prismatic along a)

so link geometry is written once, at the zero configuration, in world coordinates. Link 0 is the
fixed base.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

JOINT_KINDS = ("revolute", "prismatic", "continuous")


@dataclass(frozen=True)
class Joint:
    """One joint moving ``child`` relative to ``parent`` (link indices, parent < child).

    axis: (3,) unit vector, world frame at the zero configuration.
    point: (3,) a point on a rotation axis (ignored for prismatic joints), metres.
    lower, upper: limits in radians or metres (continuous joints: unbounded, use +-inf).
    closed: the joint's stowed value (a lid shut, a drawer in), inside the limits.
    """

    name: str
    kind: str
    parent: int
    child: int
    axis: np.ndarray
    point: np.ndarray
    lower: float
    upper: float
    closed: float = 0.0

    def __post_init__(self):
        if self.kind not in JOINT_KINDS:
            raise ValueError(f"joint {self.name}: kind {self.kind!r} not in {JOINT_KINDS}")
        if not 0 <= self.parent < self.child:
            raise ValueError(f"joint {self.name}: parent {self.parent} must precede {self.child}")
        if self.kind != "continuous" and not self.lower <= self.closed <= self.upper:
            raise ValueError(f"joint {self.name}: closed {self.closed} outside its limits")


@dataclass
class KinematicTree:
    """Links 0..L-1 (0 = the fixed base) and one joint per non-base link."""

    link_names: list[str] = field(default_factory=lambda: ["base"])
    joints: list[Joint] = field(default_factory=list)

    @property
    def num_links(self) -> int:
        return len(self.link_names)

    def add_link(self, name: str) -> int:
        self.link_names.append(name)
        return len(self.link_names) - 1

    def add_joint(self, joint: Joint) -> None:
        if joint.child >= self.num_links or any(j.child == joint.child for j in self.joints):
            raise ValueError(f"joint {joint.name}: link {joint.child} missing or already driven")
        self.joints.append(joint)

    def limits(self) -> tuple[np.ndarray, np.ndarray]:
        """(J,), (J,) lower and upper limits (infinite for continuous joints)."""
        lo = np.array([j.lower if j.kind != "continuous" else -np.inf for j in self.joints])
        hi = np.array([j.upper if j.kind != "continuous" else np.inf for j in self.joints])
        return lo, hi

    def link_transforms(self, q: np.ndarray) -> np.ndarray:
        """World transforms of the links.

        q: (T, J) joint values. Returns (T, L, 4, 4) float64; link 0 is the identity.
        """
        q = np.asarray(q, dtype=np.float64)
        t = q.shape[0]
        out = np.tile(np.eye(4), (t, self.num_links, 1, 1))  # (T, L, 4, 4)
        # parent < child, so visiting joints by child index sees every parent first
        for col in sorted(range(len(self.joints)), key=lambda i: self.joints[i].child):
            j = self.joints[col]
            out[:, j.child] = out[:, j.parent] @ joint_exponential(j, q[:, col])
        return out


def joint_exponential(joint: Joint, values: np.ndarray) -> np.ndarray:
    """exp(xi q) for each value: (T,) -> (T, 4, 4)."""
    values = np.asarray(values, dtype=np.float64)
    a = np.asarray(joint.axis, dtype=np.float64)
    a = a / np.linalg.norm(a)
    out = np.tile(np.eye(4), (len(values), 1, 1))
    if joint.kind == "prismatic":
        out[:, :3, 3] = values[:, None] * a
        return out
    k = np.array([[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]])
    s, c = np.sin(values)[:, None, None], np.cos(values)[:, None, None]
    r = np.eye(3) + s * k + (1 - c) * (k @ k)  # (T, 3, 3) Rodrigues
    p = np.asarray(joint.point, dtype=np.float64)
    out[:, :3, :3] = r
    out[:, :3, 3] = p - r @ p
    return out


def pose_vertices(vertices: np.ndarray, link_of_vertex: np.ndarray, transforms: np.ndarray):
    """Move each vertex with its link.

    vertices: (N, 3) zero-configuration positions; link_of_vertex: (N,) int;
    transforms: (T, L, 4, 4). Returns (T, N, 3) float64.
    """
    out = np.empty((transforms.shape[0],) + vertices.shape)
    for link in np.unique(link_of_vertex):
        sel = link_of_vertex == link
        r, t = transforms[:, link, :3, :3], transforms[:, link, :3, 3]  # (T, 3, 3), (T, 3)
        out[:, sel] = np.einsum("tij,nj->tni", r, vertices[sel]) + t[:, None]
    return out
