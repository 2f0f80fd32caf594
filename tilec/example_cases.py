"""The sizes every example's kernels run at on the GPU (`tests/gpu`, `python -m tilec.gpucheck`
and its sanitizer runs): one entry per `examples/<name>.tile`, one list of extents per kernel."""

from __future__ import annotations

__all__ = ["CASES"]

# Each kernel of each example at several sizes, including the awkward ones: one element,
# extents that no tile divides, a whole dimension just past a power of two.
CASES: dict[str, dict[str, list[dict[str, int]]]] = {
    "vector_add": {
        "vector_add": [{"N": 1}, {"N": 1000}, {"N": 4097}, {"N": 1048579}],
        "saxpy": [{"N": 1}, {"N": 5000}],
    },
    "softmax": {
        "softmax": [
            {"M": 1, "N": 1},
            {"M": 77, "N": 300},
            {"M": 128, "N": 1024},
            {"M": 33, "N": 1025},
            {"M": 5, "N": 3000},
        ]
    },
    "layernorm": {
        "layernorm": [
            {"M": 1, "N": 1},
            {"M": 77, "N": 300},
            {"M": 64, "N": 1024},
            {"M": 3, "N": 2500},
        ]
    },
    "matmul": {
        "matmul": [
            {"M": 1, "N": 1, "K": 1},
            {"M": 130, "N": 77, "K": 100},
            {"M": 256, "N": 256, "K": 256},
            {"M": 300, "N": 200, "K": 33},
        ],
        "matmul_pinned": [{"M": 300, "N": 200, "K": 100}, {"M": 129, "N": 257, "K": 70}],
    },
    "matmul_bf16": {
        "matmul_bf16": [{"M": 130, "N": 77, "K": 100}, {"M": 256, "N": 256, "K": 256}],
    },
    "matmul_bias_gelu": {
        "matmul_bias_gelu": [{"M": 130, "N": 77, "K": 100}, {"M": 64, "N": 64, "K": 64}]
    },
    "row_sum": {
        "row_sum": [{"M": 1, "N": 1}, {"M": 77, "N": 300}, {"M": 1000, "N": 33}],
        "row_sum_whole": [{"M": 77, "N": 300}, {"M": 3, "N": 1500}],
    },
    "transpose": {"transpose": [{"M": 1, "N": 1}, {"M": 70, "N": 45}, {"M": 300, "N": 513}]},
    "attention": {
        "attention": [
            {"B": 2, "H": 3, "M": 37, "N": 29, "D": 64},
            {"B": 1, "H": 2, "M": 20, "N": 33, "D": 48},
        ],
        "attention_causal": [
            {"B": 2, "H": 3, "S": 50, "T": 50, "D": 64},
            {"B": 1, "H": 1, "S": 1, "T": 1, "D": 16},
        ],
    },
}
