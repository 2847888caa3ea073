"""Evaluation: the IK and motion tables, the plausibility scenes, articulation and reach probes."""
