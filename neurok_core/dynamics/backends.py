"""The right-hand side of the dynamics, two ways: on tensors, or in NumPy from the local model.

Both give the same quantities for the integrator (``integrator``), which never asks which one it
has:

- ``evaluate(q, q', frame, t, hands)``: the points' kinematics x, J, D^2x[q', q'] at the state
  (cached for a repeated state) and the motion there (q'', power, kinetic and potential energy);
- ``stage(q, q', frame, t, hands)``: (q'', power, the contact's share of the power) of an
  inner RK4 stage, in the backend's own array type (the stages' kinematics are not kept);
- ``check(kin, q)``: None, or why the state is a blow-up ("nonfinite", "bounds", "latent");
- ``energies(kin, q, q', frame)``: (kinetic, potential, power) of a frame inside a multi-frame
  step, from Jacobian-only kinematics;
- ``native`` / ``tensor``: to and from the backend's array type.

:class:`TorchBackend` evaluates the system's kinematics (the decoder, or its Taylor-mode hook) and
the equations of motion of ``lagrangian`` on tensors. :class:`NumpyBackend` takes every right-hand
side from the local quadratic model of the decoder (``local``) and evaluates the same equations in
NumPy (``fastrhs``): a few microseconds of arithmetic per stage, which tensors would cost more
than. The two are tested against each other (``tests/test_local_model.py``).
"""

from __future__ import annotations

import math
from typing import Protocol

import numpy as np
import torch
from torch import Tensor

from .fastrhs import NumpyDynamics
from .lagrangian import Motion, equations_of_motion, state_energies
from .loads import Loads
from .local import LocalQuadratic
from .settings import DynamicsSettings
from .system import MechanicalSystem, PointKinematics, point_kinematics


class Blowup(Exception):
    """A state the integrator must not accept; ``reason`` says why (see ``integrator``)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def finite(t: Tensor) -> bool:
    """Whether every entry is finite: NaN and inf survive a sum (one sync instead of two; the
    magnitudes here are far below float64 overflow)."""
    return math.isfinite(float(t.sum()))


class DynamicsBackend(Protocol):
    """What the integrator needs of a right-hand side (module docstring)."""

    evaluations: int

    def evaluate(
        self, q: Tensor, qdot: Tensor, frame: int, t: float, hands: list
    ) -> tuple[PointKinematics, Motion]: ...

    def forget(self) -> None: ...

    def stage(self, q, v, frame: int, t: float, hands: list) -> tuple: ...

    def check(self, kin: PointKinematics, q: Tensor) -> str | None: ...

    def energies(
        self, kin: PointKinematics, q: Tensor, qd: Tensor, frame: int
    ) -> tuple[float, float, float]: ...

    def native(self, t: Tensor): ...

    def tensor(self, a) -> Tensor: ...


class _Cached:
    """The shared part: evaluation count and the kinematics of the last state evaluated."""

    def __init__(self, loads: Loads, settings: DynamicsSettings) -> None:
        self.loads, self.settings = loads, settings
        self.bound = settings.limits.max_displacement * loads.size
        self.evaluations = 0
        self._last: tuple[Tensor, Tensor, PointKinematics] | None = None

    def forget(self) -> None:
        """Drop the cached kinematics (the model they came from changed)."""
        self._last = None

    def evaluate(
        self, q: Tensor, qdot: Tensor, frame: int, t: float, hands: list
    ) -> tuple[PointKinematics, Motion]:
        if not (finite(q) and finite(qdot)):
            raise Blowup("nonfinite")
        cached = self._last
        if cached is not None and torch.equal(cached[0], q) and torch.equal(cached[1], qdot):
            kin = cached[2]  # same state (e.g. every stage of a step at rest): same kinematics
        else:
            kin = self._kinematics(q, qdot)
            self.evaluations += 1
            self._last = (q, qdot, kin)
        return kin, self.motion(kin, q, qdot, frame, t, hands)

    def tensor(self, a) -> Tensor:
        """A backend array (or tensor) as a tensor, without a copy."""
        return torch.as_tensor(a)

    def _kinematics(self, q: Tensor, qdot: Tensor) -> PointKinematics:
        raise NotImplementedError

    def motion(self, kin, q, qdot, frame, t, hands) -> Motion:
        raise NotImplementedError


class TorchBackend(_Cached):
    """The system's own kinematics and the tensor equations of motion."""

    def __init__(self, system: MechanicalSystem, loads: Loads, settings: DynamicsSettings):
        super().__init__(loads, settings)
        self.system = system

    def _kinematics(self, q: Tensor, qdot: Tensor) -> PointKinematics:
        return point_kinematics(self.system, q, qdot)

    def motion(self, kin, q, qdot, frame, t, hands) -> Motion:
        motion = equations_of_motion(kin, self.loads, q, qdot, frame, t, hands)
        if not (finite(motion.qddot) and math.isfinite(motion.power)):
            raise Blowup("nonfinite")
        return motion

    def stage(self, q, v, frame, t, hands):
        motion = self.evaluate(q, v, frame, t, hands)[1]
        return motion.qddot, motion.power, motion.contact_power

    def check(self, kin: PointKinematics, q: Tensor) -> str | None:
        if not finite(kin.x):
            return "nonfinite"
        if float((kin.x - self.loads.rest_points).norm(dim=1).max()) > self.bound:
            return "bounds"
        barrier = self.loads.barrier
        if barrier is not None and barrier.excess(q) > self.settings.limits.max_latent_excess:
            return "latent"
        if float(q.abs().max()) > self.settings.limits.max_coordinate:
            return "latent"
        return None

    def energies(self, kin, q, qd, frame):
        return state_energies(kin, self.loads, q, qd, frame)

    def native(self, t: Tensor) -> Tensor:
        return t


class NumpyBackend(_Cached):
    """Every right-hand side from the local quadratic model, the equations in NumPy."""

    def __init__(self, local: LocalQuadratic, loads: Loads, settings: DynamicsSettings):
        super().__init__(loads, settings)
        self.local = local
        self.dynamics = NumpyDynamics(loads)

    def _kinematics(self, q: Tensor, qdot: Tensor) -> PointKinematics:
        x, jac, bias = self.local.model(q.numpy(), qdot.numpy())
        return PointKinematics(*(torch.from_numpy(a) for a in (x, jac, bias)))

    def motion(self, kin, q, qdot, frame, t, hands) -> Motion:
        qddot, power, kinetic, potential, contact_power = self.dynamics.motion(
            kin.x.numpy(),
            kin.jac.numpy(),
            kin.bias.numpy(),
            q.numpy(),
            qdot.numpy(),
            frame,
            t,
            hands,
        )
        if not (math.isfinite(float(qddot.sum())) and math.isfinite(power)):
            raise Blowup("nonfinite")
        return Motion(torch.from_numpy(qddot), power, kinetic, potential, contact_power)

    def stage(self, q: np.ndarray, v: np.ndarray, frame: int, t: float, hands: list):
        """(q'', power, contact power) of an inner RK4 stage, all in NumPy (no tensors)."""
        if not math.isfinite(float(q.sum() + v.sum())):
            raise Blowup("nonfinite")
        x, jac, bias = self.local.model(q, v)
        self.evaluations += 1
        qddot, power, _, _, contact = self.dynamics.motion(x, jac, bias, q, v, frame, t, hands)
        if not math.isfinite(float(qddot.sum()) + power):
            raise Blowup("nonfinite")
        return qddot, power, contact

    def check(self, kin: PointKinematics, q: Tensor) -> str | None:
        x = kin.x.numpy()
        if not math.isfinite(float(x.sum())):
            return "nonfinite"
        dx = x - self.dynamics.rest
        if float((dx * dx).sum(1).max()) > self.bound * self.bound:
            return "bounds"
        qn = q.numpy()
        if self.dynamics.excess(qn) > self.settings.limits.max_latent_excess:
            return "latent"
        if float(np.abs(qn).max()) > self.settings.limits.max_coordinate:
            return "latent"
        return None

    def energies(self, kin, q, qd, frame):
        return self.dynamics.energies(kin.x.numpy(), kin.jac.numpy(), q.numpy(), qd.numpy(), frame)

    def native(self, t: Tensor) -> np.ndarray:
        return t.numpy()
