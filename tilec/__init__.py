"""tilec: a tile compiler for NVIDIA GPUs."""

__version__ = "0.1.0"
