"""numpy reference for transpose.tile (`tilec run` checks the kernel against it)."""

import numpy as np


def transpose(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return x.T  # moves elements only: must match to the bit
