# SPDX-License-Identifier: GPL-3.0-or-later
"""The client side of the engine worker: child processes, their jobs and messages (no bpy)."""
