"""Speed measurements of the engine's parts: ``python -m training.benchmarks.<name>``."""
