"""The mechanical system seen by the dynamics: any differentiable map from reduced coordinates to
tracked points, their mass weights, and optionally the latent map for the prior barrier.

The dynamics never see the network. The caller (the kinematic space) provides

    decode_points: q (kq,) -> x (S, 3), metres, q = 0 the rest shape,

built from torch operations so that ``torch.func.jacfwd`` and nested ``torch.func.jvp``
(forward over forward) go through it. Its S rows are the surface sample points that carry mass
followed by zero-weight tracked points (force, drag, velocity and pin anchors).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import torch
from torch import Tensor
from torch.func import jacfwd, jvp


@runtime_checkable
class KinematicsHook(Protocol):
    """A faster replacement of the automatic derivatives of ``decode_points``: (q, q') ->
    (x (S, 3), J (S, 3, kq), D^2x[q', q'] (S, 3)) (``MechanicalSystem.kinematics``)."""

    def __call__(self, q: Tensor, qdot: Tensor) -> tuple[Tensor, Tensor, Tensor]: ...


@runtime_checkable
class RestrictableKinematics(KinematicsHook, Protocol):
    """A hook that can make a pass carrying only the tangents of a subspace q = basis r (the
    decoder's Taylor-mode pass, and the pin clamp around it); ``restrict`` asks for it."""

    def restricted(self, basis: Tensor) -> KinematicsHook: ...


@runtime_checkable
class HessianKinematics(KinematicsHook, Protocol):
    """A hook that also gives x, J and the Hessian d^2x/dq^2 (S, 3, kq, kq) in one pass, which
    the local quadratic model (``local``) is built from, when ``has_hessian``."""

    has_hessian: bool

    def hessian(self, q: Tensor) -> tuple[Tensor, Tensor, Tensor]: ...


@dataclass(frozen=True)
class LatentMap:
    """z(q) = rest + basis @ q with the prior N(prior_mean, I) (design section 7).

    rest: (k,) the rest latent; basis: (k, kq) the active subspace W; prior_mean: (k,) mu_cond.
    """

    rest: Tensor
    basis: Tensor
    prior_mean: Tensor

    def __post_init__(self):
        k = self.rest.shape[0] if self.rest.ndim == 1 else -1
        if k < 1 or self.basis.ndim != 2 or self.basis.shape[0] != k:
            raise ValueError(
                f"latent map: rest must be (k,) and basis (k, kq), got {tuple(self.rest.shape)} "
                f"and {tuple(self.basis.shape)}"
            )
        if tuple(self.prior_mean.shape) != (k,):
            raise ValueError(f"latent map: prior_mean must be ({k},)")


@dataclass(frozen=True)
class MechanicalSystem:
    """What the simulator integrates.

    decode_points: q (kq,) -> (S, 3) positions in metres (see the module docstring).
    point_weights: (S,) >= 0 relative mass of each row (e.g. the surface area a sample point
        stands for); zero for tracked-only points. Scaled to the user's total mass by the loads.
    num_coords: kq.
    latent: the latent map for the prior barrier, or None for no barrier.
    dtype, device: what ``decode_points`` expects for q.
    kinematics: optional faster replacement of the automatic derivatives,
        (q, qdot) -> (x (S, 3), J (S, 3, kq), D^2x[qdot, qdot] (S, 3)); it must agree with
        ``point_kinematics`` on ``decode_points`` (e.g. hand-derived for an analytic decoder).
    point_groups: optional (S,) int64 loose part of each row (-1: none); the shape-keeping
        springs (``shapekeep``) join only rows with mass of one group. None: one group.
    translation: optional (3, kq) linear map from q to a translation shared by every point
        (coordinates that move the whole object, e.g. a free translation added to a learned
        space: ``neurok_core.freebody``); the stiffness then pulls the shape back to rest,
        not the object back to where it started. None: no such coordinates.
    contact_weights: optional (S,) >= 0, which rows meet obstacles and how much of the mass's
        contact each stands for (e.g. a spread subset of the mesh's vertices, so that no vertex
        sinks between the mass points); scaled to the total mass by the loads. None: the rows
        with mass (``point_weights``).
    """

    decode_points: Callable[[Tensor], Tensor]
    point_weights: Tensor
    num_coords: int
    latent: LatentMap | None = None
    dtype: torch.dtype = torch.float32
    device: torch.device | str = "cpu"
    kinematics: Callable[[Tensor, Tensor], tuple[Tensor, Tensor, Tensor]] | None = None
    point_groups: Tensor | None = None
    translation: Tensor | None = None
    contact_weights: Tensor | None = None

    def __post_init__(self):
        w = self.point_weights
        if w.ndim != 1 or w.shape[0] < 1:
            raise ValueError(f"point_weights must be (S,), got {tuple(w.shape)}")
        if not bool(torch.isfinite(w).all()) or bool((w < 0).any()) or float(w.sum()) <= 0:
            raise ValueError("point_weights must be finite, >= 0, with a positive sum")
        if self.num_coords < 1:
            raise ValueError(f"num_coords must be >= 1, got {self.num_coords}")
        if self.latent is not None and self.latent.basis.shape[1] != self.num_coords:
            raise ValueError(
                f"latent basis has {self.latent.basis.shape[1]} columns, expected {self.num_coords}"
            )
        if self.translation is not None and tuple(self.translation.shape) != (3, self.num_coords):
            raise ValueError(f"translation must be (3, {self.num_coords})")
        cw = self.contact_weights
        if cw is not None and (
            tuple(cw.shape) != tuple(w.shape) or bool((cw < 0).any()) or float(cw.sum()) <= 0
        ):
            raise ValueError("contact_weights must be (S,), >= 0, with a positive sum")
        object.__setattr__(self, "device", torch.device(self.device))

    @property
    def num_points(self) -> int:
        return int(self.point_weights.shape[0])

    @property
    def work_dtype(self) -> torch.dtype:
        """float64 for the point-level sums, except on MPS, which has no float64."""
        return torch.float32 if self.device.type == "mps" else torch.float64


@dataclass(frozen=True)
class PointKinematics:
    """Positions and derivatives of the tracked points at one state (work dtype, on device).

    x: (S, 3) positions; jac: (S, 3, kq) J = dx/dq; bias: (S, 3) D^2 x(q)[q', q'], the
    acceleration of the points when q'' = 0 (x'' = J q'' + D^2 x[q', q']).
    """

    x: Tensor
    jac: Tensor
    bias: Tensor

    def velocity(self, qdot: Tensor) -> Tensor:
        """(S, 3) point velocities J q'."""
        return self.jac @ qdot.to(self.jac)


def _with_aux(decode: Callable[[Tensor], Tensor]) -> Callable[[Tensor], tuple[Tensor, Tensor]]:
    def f(p: Tensor) -> tuple[Tensor, Tensor]:
        x = decode(p)
        return x, x

    return f


def decoder_kinematics(
    decode: Callable[[Tensor], Tensor], q: Tensor, qdot: Tensor
) -> tuple[Tensor, Tensor, Tensor]:
    """x (S, 3), J (S, 3, kq) by ``jacfwd`` and D^2x[q', q'] (S, 3) by a nested forward JVP.

    D^2 x[v, v] = d/ds (J(q + s v) v) at s = 0: the outer ``jvp`` differentiates q -> J(q) v
    (itself an inner ``jvp``) along v, so no second-derivative tensor is ever formed. Pure
    ``torch.func``, so it can be wrapped by ``torch.compile`` and passed as
    ``MechanicalSystem.kinematics`` (measured: about 2x faster with backend "aot_eager", about 6x
    with "inductor" after a long first compilation).
    """
    jac, x = jacfwd(_with_aux(decode), has_aux=True)(q)  # (S, 3, kq), (S, 3)

    def directional(p: Tensor) -> Tensor:
        return jvp(decode, (p,), (qdot,))[1]  # (S, 3) J(p) v

    bias = jvp(directional, (q,), (qdot,))[1]  # (S, 3)
    return x, jac, bias


def point_kinematics(system: MechanicalSystem, q: Tensor, qdot: Tensor) -> PointKinematics:
    """x(q), J(q) and D^2 x(q)[q', q'] of the system (``decoder_kinematics``), the nested JVP
    skipped (zero) when q' = 0. q, qdot: (kq,) any float dtype; cast to the decoder's.
    Uses ``system.kinematics`` instead when the system provides it.
    """
    dev, dt, wt = system.device, system.dtype, system.work_dtype
    qd = q.to(device=dev, dtype=dt)
    vd = qdot.to(device=dev, dtype=dt)
    if system.kinematics is not None:
        x, jac, bias = system.kinematics(qd, vd)
        return PointKinematics(x=x.to(wt), jac=jac.to(wt), bias=bias.to(wt))
    if bool((vd == 0).all()):
        jac, x = jacfwd(_with_aux(system.decode_points), has_aux=True)(qd)  # (S, 3, kq), (S, 3)
        bias = torch.zeros_like(x)
    else:
        x, jac, bias = decoder_kinematics(system.decode_points, qd, vd)
    return PointKinematics(x=x.to(wt), jac=jac.to(wt), bias=bias.to(wt))


def object_size(points: Tensor) -> float:
    """Longest side of the bounding box of ``points`` (P, 3), the length unit of tolerances."""
    if points.shape[0] == 0:
        return 1.0
    ext = float((points.max(0).values - points.min(0).values).max())
    return ext if math.isfinite(ext) and ext > 0 else 1.0


ROUNDING_MARGIN = 100.0  # derivative_errors: errors are measured against 100x the rounding


def derivative_errors(
    system: MechanicalSystem,
    q: Tensor,
    direction: Tensor,
    step: float | None = None,
    *,
    extrapolate: bool = False,
) -> tuple[float, float]:
    """Relative errors of J v and D^2x[v, v] against central differences along v = direction.

    A guard against decoders whose forward-mode derivatives are silently wrong (some fused
    kernels are; e.g. torch's layer_norm under nested JVP, pytorch/pytorch issue 196700), which
    would break energy conservation. Errors are |auto - fd| / max(|fd|, |auto|, 0.1 |J v|),
    norms over all points, with v scaled to unit length. The difference step (in q, within
    [1e-3, 0.1]) moves the points by up to 1e-2 object sizes (default), so that float32 rounding
    stays far below the differences however little the direction moves the object. Costs three
    kinematics evaluations (two without the nested JVP; five with ``extrapolate``).

    Central differences are off by O(step^2) where the decoder is strongly curved; with
    ``extrapolate`` they are Richardson-extrapolated from ``step`` and ``step / 2`` (error
    O(step^4), two more evaluations), so that only a derivative that is really wrong, whose error
    does not shrink with the step, stays large.

    A direction that moves the object so little that even the largest step moves the points by
    little more than the rounding of their positions (eps |x|, in the system's dtype) cannot be
    checked by differences: the denominator is at least ``ROUNDING_MARGIN`` times that rounding
    over the step, so such a direction's errors come out small instead of being its rounding
    (e.g. the one direction a pin clamp leaves a float32 object far from the origin).
    """
    v = direction.to(torch.float64)
    v = v / v.norm().clamp_min(1e-300)
    q = q.to(torch.float64)
    zero = torch.zeros_like(v)
    kin = point_kinematics(system, q, v)
    jv = kin.velocity(v)  # (S, 3)
    if step is None:
        speed = float(jv.norm(dim=1).max())
        size = object_size(kin.x)
        step = min(max(1e-2 * size / speed, 1e-3), 0.1) if speed > 0 else 1e-3

    def differences(h: float) -> tuple[Tensor, Tensor]:
        plus = point_kinematics(system, q + h * v, zero)
        minus = point_kinematics(system, q - h * v, zero)
        fd1 = (plus.x - minus.x) / (2 * h)  # (S, 3)
        fd2 = (plus.velocity(v) - minus.velocity(v)) / (2 * h)  # (S, 3)
        return fd1, fd2

    fd1, fd2 = differences(step)
    if extrapolate:
        half1, half2 = differences(step / 2)
        fd1, fd2 = (4 * half1 - fd1) / 3, (4 * half2 - fd2) / 3
    rounding = torch.finfo(system.dtype).eps * float(kin.x.norm()) / step  # the differences'
    floor = max(0.1 * float(jv.norm()), ROUNDING_MARGIN * rounding) + 1e-30
    err1 = float((jv - fd1).norm()) / max(float(fd1.norm()), float(jv.norm()), floor)
    err2 = float((kin.bias - fd2).norm()) / max(float(fd2.norm()), float(kin.bias.norm()), floor)
    return err1, err2


def restrict(system: MechanicalSystem, basis: Tensor) -> MechanicalSystem:
    """The system in the coordinates r of a subspace, q = basis @ r; basis (kq, r) float64.

    Positions are the same functions of r; J becomes J basis and D^2x[r', r'] = D^2x[q', q'] for
    q' = basis r'. A ``kinematics`` hook with a ``restricted(basis)`` method (the decoder's
    Taylor-mode pass) is asked for a pass that carries only the r tangents.
    """
    if basis.ndim != 2 or basis.shape[0] != system.num_coords or basis.shape[1] < 1:
        raise ValueError(f"basis must be ({system.num_coords}, r >= 1), got {tuple(basis.shape)}")
    b = basis.to(device=system.device, dtype=system.dtype)  # (kq, r)
    decode = system.decode_points

    def decode_points(r: Tensor) -> Tensor:
        return decode(b @ r)

    kinematics = None
    hook = system.kinematics
    if isinstance(hook, RestrictableKinematics):
        kinematics = hook.restricted(b)
    elif hook is not None:

        def kinematics(r: Tensor, rdot: Tensor) -> tuple[Tensor, Tensor, Tensor]:
            x, jac, bias = hook(b @ r, b @ rdot)
            return x, jac @ b, bias

    latent = system.latent
    if latent is not None:
        latent = LatentMap(
            rest=latent.rest,
            basis=latent.basis @ basis.to(latent.basis),
            prior_mean=latent.prior_mean,
        )
    return MechanicalSystem(
        decode_points=decode_points,
        point_weights=system.point_weights,
        num_coords=int(basis.shape[1]),
        latent=latent,
        dtype=system.dtype,
        device=system.device,
        kinematics=kinematics,
        point_groups=system.point_groups,
        translation=(
            None
            if system.translation is None
            else system.translation.to(torch.float64) @ basis.to(torch.float64)
        ),
        contact_weights=system.contact_weights,
    )
