"""Materials that mean what they say (``rigspace.material``): an object's stiffness is its
lowest vibration frequency, for a bending solid, a rope and a jointed lid alike."""

import numpy as np
import pytest

from neurok_core.dynamics.conditions import Force, InitialVelocity
from neurok_core.rigspace.material import rigid_mode_count
from neurok_core.rigspace.space import build_rig_space
from training.eval.materials import ring, sag
from training.eval.scene_meshes import jelly_beam, laptop, rope


@pytest.mark.parametrize("hz", [1.0, 2.0, 4.0])
def test_a_cantilever_rings_at_its_stiffness(hz):
    """The jelly beam (a bending solid, one end held), tapped at its tip: its first mode
    within 15% of the stiffness (``training.eval.materials``' measure)."""
    m = jelly_beam()
    tap = Force((0.0, 0.0, 1.0), 2.0, vertex=m.landmarks["tip"], end_frame=2)
    assert ring(m, hz, "tip", 2, forces=(tap,)) == pytest.approx(hz, rel=0.15)


def test_a_cantilever_sags_as_its_frequency_says():
    """Under gravity a cantilever's tip sags about 1.55 g / omega^2 (Euler-Bernoulli): a 2 Hz
    beam about 96 mm, a 4 Hz one a quarter of that (before: 11 mm for both)."""
    m = jelly_beam()
    sags = []
    for hz in (2.0, 4.0):
        sags.append(sag(m, hz))
        expected = 1.55 * 9.81 / (2 * np.pi * hz) ** 2
        assert sags[-1] == pytest.approx(expected, rel=0.3)
    assert sags[0] / sags[1] == pytest.approx(4.0, rel=0.2)


def test_a_lid_turns_on_its_hinge_at_its_stiffness():
    """A laptop's lid (base held) springs about its hinge at the stiffness."""
    m = laptop(edge=0.04)
    tap = Force((0.0, 1.0, 0.0), 0.5, vertex=m.landmarks["lid_edge"], end_frame=2)
    for hz in (1.0, 4.0):
        assert ring(m, hz, "lid_edge", 1, forces=(tap,)) == pytest.approx(hz, rel=0.15)


def test_a_rope_swings_at_its_stiffness():
    """A rope (stiff in stretch, the stiffness its bending), held at its top, tapped at its
    end: without gravity it rings at the stiffness."""
    m = rope()
    tap = InitialVelocity((0.05, 0.0, 0.0), vertex=m.landmarks["end"])
    for hz in (2.0, 4.0):
        assert ring(m, hz, "end", 0, velocities=(tap,)) == pytest.approx(hz, rel=0.15)


def test_rigid_motions_are_counted_per_free_group_of_parts():
    """Free objects move as wholes at no cost: 6 such motions each, none once held."""
    m = laptop(edge=0.04)
    held = build_rig_space(m.vertices, m.faces, mass=1.0, pins=tuple(int(i) for i in m.pins))
    free = build_rig_space(m.vertices, m.faces, mass=1.0)
    assert rigid_mode_count(held) == 0
    assert rigid_mode_count(free) == 6  # the lid is joined to the base: one group
