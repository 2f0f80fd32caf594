"""numpy reference for head_gate.tile (`tilec run` checks the kernel against it).

Returns the expected `y`: each head of x times the gate of its position, in f32, rounded to f16
once.
"""

import numpy as np


def head_gate(x: np.ndarray, g: np.ndarray, y: np.ndarray) -> np.ndarray:
    return (x.astype(np.float32) * g[:, None, :]).astype(np.float16)
