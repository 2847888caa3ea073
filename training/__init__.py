"""Headless reproduction of NeuROK: 4D data generation, training, evaluation, benchmarks."""
