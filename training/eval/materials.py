"""Does a stiffness mean what it says? Each object set to f Hz, tapped (no gravity, undamped):
the frequency it rings at; the cantilever also left to sag under gravity (damped).

    python -m training.eval.materials [--hz 1 2 4] [--json out.json]

Objects (``training.eval.scene_meshes``): the jelly beam (a 60 cm bending solid, one end held),
the laptop's lid (its base held: the lid springs about its hinge) and the rope (held at its
top). The frequency is the strongest of the key vertex's motion (a Hann-windowed FFT of 3 s,
or 6 periods, at 120 fps). The sag: the beam's tip after 4 s at damping 3/s, against the
Euler-Bernoulli cantilever's 1.55 g / omega^2. Prints a table; one JSON with every figure.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from neurok_core.dynamics import SimulationConditions
from neurok_core.dynamics.conditions import Force, InitialVelocity
from neurok_core.rigspace import simulate_rig
from training.eval.scene_meshes import jelly_beam, laptop, rope

FPS = 120.0


def ring(mesh, hz: float, mark: str, axis: int, **loads) -> float:
    """The strongest frequency (Hz) at which ``mesh``, set to ``hz`` (its pins held, no
    gravity, undamped), rings at its landmark ``mark`` along ``axis`` after ``loads``."""
    seconds = max(3.0, 6.0 / hz)
    c = SimulationConditions(
        frames=int(seconds * FPS),
        fps=FPS,
        stiffness=hz,
        gravity=(0.0, 0.0, 0.0),
        pins=tuple(int(i) for i in mesh.pins),
        **loads,
    )
    z = simulate_rig(mesh.vertices, mesh.faces, c).positions[5:, mesh.landmarks[mark], axis]
    z = z - z.mean()
    spec = np.abs(np.fft.rfft(z * np.hanning(len(z)), n=8 * len(z)))
    return float(np.fft.rfftfreq(8 * len(z), 1 / FPS)[np.argmax(spec[1:]) + 1])


def sag(mesh, hz: float) -> float:
    """The beam's tip sag (m) under gravity, settled."""
    c = SimulationConditions(
        frames=96, fps=24.0, stiffness=hz, damping=3.0, pins=tuple(int(i) for i in mesh.pins)
    )
    tip = mesh.landmarks["tip"]
    return float(
        mesh.vertices[tip, 2] - simulate_rig(mesh.vertices, mesh.faces, c).positions[-1, tip, 2]
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hz", type=float, nargs="+", default=[1.0, 2.0, 4.0])
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    beam, lid, cord = jelly_beam(), laptop(edge=0.04), rope()
    rows = []
    for hz in args.hz:
        row = {
            "set_hz": hz,
            "beam_hz": ring(
                beam,
                hz,
                "tip",
                2,
                forces=(Force((0, 0, 1.0), 2.0, vertex=beam.landmarks["tip"], end_frame=2),),
            ),
            "lid_hz": ring(
                lid,
                hz,
                "lid_edge",
                1,
                forces=(Force((0, 1.0, 0), 0.5, vertex=lid.landmarks["lid_edge"], end_frame=2),),
            ),
            "rope_hz": ring(
                cord,
                hz,
                "end",
                0,
                velocities=(InitialVelocity((0.05, 0, 0), vertex=cord.landmarks["end"]),),
            ),
            "beam_sag_m": sag(beam, hz),
            "cantilever_sag_m": 1.55 * 9.81 / (2 * np.pi * hz) ** 2,
        }
        rows.append(row)
        print(json.dumps({k: round(v, 4) for k, v in row.items()}), flush=True)
    print("| set (Hz) | beam rings at | lid | rope | beam sag / cantilever's |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['set_hz']:g} | {r['beam_hz']:.2f} | {r['lid_hz']:.2f} | {r['rope_hz']:.2f} |"
            f" {1000 * r['beam_sag_m']:.0f} / {1000 * r['cantilever_sag_m']:.0f} mm |"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
