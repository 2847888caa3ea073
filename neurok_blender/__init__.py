# SPDX-License-Identifier: GPL-3.0-or-later
"""NeuROK add-on: everything that imports bpy. Never imports torch (Blender's Python has none).

Layout: ``properties/`` (PropertyGroups), ``operators/``, ``ui/`` (panels), ``gizmos.py``,
``gather.py`` (scene -> request), ``bake.py`` (frames -> shape keys / point cache),
``fit_gather.py`` and ``fit_bake.py`` (Fit to Target's request and keys) and ``engine/`` (the
worker's client: child processes and jobs, no bpy). ``request.py`` and
``engine/`` import without Blender, so they can be tested in plain Python.
"""


def register() -> None:
    from . import registration

    registration.register()


def unregister() -> None:
    from . import registration

    registration.unregister()
