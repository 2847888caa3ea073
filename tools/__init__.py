# SPDX-License-Identifier: GPL-3.0-or-later
"""Development tools run from the repository root, never shipped in the extension zip:
``build`` (the zip, with Blender's own builder), ``demo`` (the headless demo) with its
``examples`` (the demo's objects) and ``demo_render`` (its preview)."""
