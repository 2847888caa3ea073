"""The local model's life during a run: when it is re-expanded, and what the state keeps then.

Given a :class:`~.local.LocalQuadratic`, every right-hand side comes from it instead of the
decoder (``backends.NumpyBackend``). It is re-expanded at the start of an RK4 step whose state
left its trusted radius (or at a frame boundary every few frames); a step retried from an earlier
state uses that state's own expansion. At a re-expansion the state keeps its energy: the new
model's energy at (q, q') differs from the old one's by the models' error (with the Jacobian
within 1%, the kinetic energy within about 2%), and hundreds of such jumps would add up to an
energy drift of tens of per cent in an undamped run; so q' is scaled by sqrt(1 - jump / T) (T
the new kinetic energy, quadratic in q'), which leaves the energy as it was
(``local_energy_match``; a change of speed within the model's own error). What a bounded scale
cannot take (a jump near a turning point, where T is tiny) is booked with the work, as the whole
jump is without the match, so that the energy balance keeps measuring the integration alone.
"""

from __future__ import annotations

import math
from dataclasses import replace

from .backends import Blowup, DynamicsBackend
from .local import LocalQuadratic
from .settings import DynamicsSettings
from .steps import State

SPEED_MATCH = (0.8, 1.25)  # bounds of the speed scale that keeps the energy at a re-expansion


class LocalModelDriver:
    """Re-expands ``local`` as the state moves (module docstring); ``evaluate(q, q', frame, t)``
    gives (kin, motion) and ``check(kin, q)`` raises on a blow-up, both the integrator's."""

    def __init__(
        self, local: LocalQuadratic, backend: DynamicsBackend, settings: DynamicsSettings
    ) -> None:
        self.local, self.backend, self.settings = local, backend, settings

    @property
    def expansions(self) -> int:
        return self.local.stats.expansions

    @property
    def radius(self) -> float:
        return self.local.radius

    @property
    def current(self):
        """The expansion the kinematics come from now."""
        return self.local.current

    @property
    def stats(self):
        """The model's ``LocalStats`` (expansions, reuses, errors, energy jumps)."""
        return self.local.stats

    def start(self, q0) -> None:
        self.local.expand(q0)

    def at_frame(self, s: State, frame: int, t: float, evaluate, check) -> State:
        """At a frame boundary: re-expand when due (radius or frame count)."""
        if not self.local.needs_expansion(s.q):
            return s
        return self.refresh(s, frame, t, evaluate, check, force=True)

    def frames_done(self, count: int) -> None:
        self.local.advance_frames(count)

    def refresh(self, s: State, frame: int, t: float, evaluate, check, force=False) -> State:
        """Re-expand at s when s is beyond the trusted radius (or ``force``), and give s the
        kinematics of the current expansion, with its energy kept (module docstring)."""
        local = self.local
        if s.model is not None and s.model is not local.current:
            local.restore(s.model)  # a step retried from s (or the best of failed attempts)
            self.backend.forget()
        far = local.needs_expansion(s.q, within_frame=True)
        if force or far:
            try:  # a kept expansion near s may serve, except for the periodic fresh one
                local.expand(s.q, fresh=not far)
            except FloatingPointError:
                raise Blowup("nonfinite") from None
        version = local.current
        if s.model is version:
            return s
        self.backend.forget()
        kin, motion = evaluate(s.q, s.qdot, frame, t)
        check(kin, s.q)
        before = s.energy
        jump = motion.kinetic + motion.potential - before
        qdot = s.qdot
        if self.settings.local.energy_match and jump != 0.0 and motion.kinetic > 0.0:
            # the same energy in the new model: scale q' (T is quadratic in q'), at most by
            # the bounds, which a model within its tolerances never needs
            low, high = SPEED_MATCH
            scale = math.sqrt(min(max(1.0 - jump / motion.kinetic, low * low), high * high))
            qdot = s.qdot * scale
            kin, motion = evaluate(s.q, qdot, frame, t)
            jump = motion.kinetic + motion.potential - before
        local.stats.energy_jumps.append(jump)
        return replace(s, qdot=qdot, work=s.work + jump, kin=kin, motion=motion, model=version)
