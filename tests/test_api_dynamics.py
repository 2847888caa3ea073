"""``NeuROK.simulate`` integrates in the rig space unless told otherwise; each dynamics takes its
own settings type and refuses the other's."""

import pytest

from neurok_core.api import NeuROK
from neurok_core.dynamics import DynamicsSettings, Force, SimulationConditions
from neurok_core.dynamics.conditions import DEFAULT_DYNAMICS
from neurok_core.rigspace import RigSettings


def _push():
    return SimulationConditions(
        frames=4, gravity=(0, 0, 0), forces=(Force(vertex=0, direction=(0, 0, 1), strength=2.0),)
    )


def test_the_rig_space_is_the_default_and_each_dynamics_takes_its_own_settings(
    tiny_checkpoint, tiny_slab_space
):
    assert DEFAULT_DYNAMICS == "rig"
    engine = NeuROK.load(tiny_checkpoint, device="cpu")
    result = engine.simulate(tiny_slab_space, _push())
    assert result.info["dynamics"] == "rig" and result.rig.blend == "lbs"
    assert result.info["edge_strain_max"] < 1e-6 and result.info["integration"] == "complete"
    learned = engine.simulate(tiny_slab_space, _push(), dynamics="latent")
    assert "frames_on_barrier" in learned.info and "dynamics" not in learned.info
    with pytest.raises(TypeError, match="must be a RigSettings, got a DynamicsSettings"):
        engine.simulate(tiny_slab_space, _push(), settings=DynamicsSettings())
    with pytest.raises(TypeError, match="must be a DynamicsSettings, got a RigSettings"):
        engine.simulate(tiny_slab_space, _push(), settings=RigSettings(), dynamics="latent")
    assert engine.simulate(tiny_slab_space, _push(), settings=RigSettings()).info["dynamics"] == (
        "rig"
    )
