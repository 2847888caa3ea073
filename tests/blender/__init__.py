"""Helpers for the tests that run in real Blender (the bpy module), one fresh process each."""
