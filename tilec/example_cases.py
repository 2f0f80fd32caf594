"""The sizes every example's kernels run at on the GPU (`tests/gpu`, `python -m tilec.gpucheck`
and its sanitizer runs): one entry per `examples/<name>.tile`, one list of extents per kernel.

A kernel with dtype parameters runs at its default binding under its own name, and at other
bindings under `"name[T=f32]"` (`case_kernel`)."""

from __future__ import annotations

__all__ = ["CASES", "case_kernel"]


def case_kernel(key: str) -> tuple[str, dict[str, str]]:
    """The kernel a case key names and its dtype parameters' binding:
    `"rmsnorm[T=f32]"` -> `("rmsnorm", {"T": "f32"})`, `"rmsnorm"` -> `("rmsnorm", {})`."""
    name, _, rest = key.partition("[")
    if not rest:
        return key, {}
    pairs = (item.split("=") for item in rest.rstrip("]").split(","))
    return name, {p.strip(): d.strip() for p, d in pairs}


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
            {"M": 17, "N": 5003},
        ],
        "softmax_f16": [
            {"M": 1, "N": 1},
            {"M": 77, "N": 300},
            {"M": 33, "N": 1025},
            {"M": 40, "N": 3077},
            {"M": 9, "N": 4093},
        ],
    },
    "layernorm": {
        "layernorm": [
            {"M": 1, "N": 1},
            {"M": 77, "N": 300},
            {"M": 64, "N": 1024},
            {"M": 3, "N": 2500},
            {"M": 31, "N": 3001},
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
        "attention_gqa": [
            {"B": 2, "H": 8, "G": 2, "M": 37, "N": 29, "D": 64},
            {"B": 1, "H": 4, "G": 1, "M": 20, "N": 33, "D": 48},
        ],
    },
    # W = 20 (the reference's SCALARS): a window shorter than a tile, cutting across two.
    "attention_window": {
        "attention_window": [
            {"B": 2, "H": 3, "S": 150, "T": 150, "D": 64},
            {"B": 1, "H": 1, "S": 1, "T": 1, "D": 16},
            {"B": 1, "H": 2, "S": 300, "T": 300, "D": 128},
        ],
    },
    "gemm_layouts": {
        "gemm_nn": [
            {"M": 1, "N": 1, "K": 1},
            {"M": 130, "N": 77, "K": 100},
            {"M": 256, "N": 256, "K": 256},
        ],
        "gemm_nt": [
            {"M": 1, "N": 1, "K": 1},
            {"M": 130, "N": 77, "K": 100},
            {"M": 256, "N": 256, "K": 256},
            {"M": 264, "N": 392, "K": 200},
        ],
        "gemm_tn": [
            {"M": 1, "N": 1, "K": 1},
            {"M": 130, "N": 77, "K": 100},
            {"M": 256, "N": 256, "K": 256},
            {"M": 264, "N": 392, "K": 200},
        ],
        "gemm_tt": [
            {"M": 1, "N": 1, "K": 1},
            {"M": 130, "N": 77, "K": 100},
            {"M": 256, "N": 256, "K": 256},
            {"M": 264, "N": 392, "K": 200},
        ],
        "gemm_nn_bf16": [{"M": 130, "N": 77, "K": 100}, {"M": 256, "N": 256, "K": 256}],
        "gemm_nt_bf16": [{"M": 130, "N": 77, "K": 100}, {"M": 256, "N": 256, "K": 256}],
        "gemm_tn_bf16": [{"M": 130, "N": 77, "K": 100}, {"M": 256, "N": 256, "K": 256}],
        "gemm_tt_bf16": [{"M": 130, "N": 77, "K": 100}, {"M": 256, "N": 256, "K": 256}],
    },
    "bmm": {
        "bmm": [
            {"Z": 1, "M": 1, "N": 1, "K": 1},
            {"Z": 3, "M": 130, "N": 77, "K": 100},
            {"Z": 3, "M": 256, "N": 136, "K": 192},
        ]
    },
    "int8_gemm": {
        "int8_gemm": [
            {"M": 1, "N": 1, "K": 1},
            {"M": 130, "N": 77, "K": 100},
            {"M": 256, "N": 256, "K": 256},
        ],
        "int8_gemm_nt": [
            {"M": 130, "N": 77, "K": 100},
            {"M": 256, "N": 256, "K": 256},
            {"M": 300, "N": 520, "K": 400},  # wgmma k32: partial tiles, a partial K tile
        ],
    },
    "fp8_gemm": {
        "fp8_gemm": [
            {"M": 1, "N": 1, "K": 1},
            {"M": 130, "N": 77, "K": 100},  # rows of 100 bytes: widened to f16, copied per byte
            {"M": 300, "N": 520, "K": 400},  # wgmma k32 e4m3: partial tiles along M, N and K
        ],
        "fp8_gemm_e5m2": [{"M": 17, "N": 31, "K": 13}, {"M": 256, "N": 384, "K": 512}],
    },
    "rmsnorm": {
        "rmsnorm": [
            {"M": 1, "N": 1},
            {"M": 77, "N": 300},
            {"M": 3, "N": 2500},
            {"M": 64, "N": 4096},
            {"M": 50, "N": 5001},
        ],
        "rmsnorm[T=f32]": [{"M": 1, "N": 1}, {"M": 77, "N": 300}, {"M": 21, "N": 2047}],
    },
    "logsumexp": {
        # few long rows (split across blocks), many short ones (not split)
        "logsumexp": [{"M": 1, "N": 1}, {"M": 3, "N": 200003}, {"M": 1000, "N": 77}],
    },
    "bias_gelu": {
        # rows of 5000 (tiles of 1024 fill them), a power of two, one element, ragged edges
        "bias_gelu": [
            {"M": 1, "N": 1},
            {"M": 77, "N": 5000},
            {"M": 64, "N": 4096},
            {"M": 33, "N": 1001},
        ],
    },
    "seq_mean": {
        # few sequences of many features (split across blocks), many (not split), one element
        "seq_mean": [
            {"B": 1, "S": 1, "D": 1},
            {"B": 3, "S": 10007, "D": 77},
            {"B": 64, "S": 100, "D": 768},
        ],
    },
    "cross_entropy": {
        "cross_entropy": [{"M": 1, "V": 1}, {"M": 77, "V": 1000}, {"M": 37, "V": 3001}],
        "cross_entropy[T=bf16]": [{"M": 37, "V": 3001}],
    },
    "embedding": {
        "embedding": [
            {"V": 1, "D": 1, "M": 1},
            {"V": 37, "D": 300, "M": 77},
            {"V": 1000, "D": 1025, "M": 129},
        ],
        "embedding_scale": [{"V": 5, "D": 3, "M": 2}, {"V": 300, "D": 77, "M": 1000}],
        "embedding[T=f32,I=i32]": [{"V": 300, "D": 77, "M": 1000}],
    },
    "swiglu": {
        "swiglu": [{"M": 1, "N": 1}, {"M": 77, "N": 300}, {"M": 1000, "N": 1025}],
        "swiglu[T=f32]": [{"M": 1, "N": 1}, {"M": 77, "N": 300}],
    },
    "dropout": {
        "dropout": [{"M": 1, "N": 1}, {"M": 77, "N": 300}, {"M": 1000, "N": 1025}],
        "dropout_f16": [{"M": 1, "N": 1}, {"M": 33, "N": 4099}],
    },
    "rmsnorm_backward": {
        "rmsnorm_dx": [{"M": 2, "N": 9}, {"M": 77, "N": 300}, {"M": 33, "N": 2500}],
        "rmsnorm_dw": [{"M": 1, "N": 1}, {"M": 300, "N": 77}, {"M": 1030, "N": 130}],
        "rmsnorm_dx[T=bf16]": [{"M": 77, "N": 300}],
        "rmsnorm_dw[T=bf16]": [{"M": 1030, "N": 130}],
    },
    "attention_backward": {
        **{
            name: [
                {"B": 1, "H": 2, "S": 37, "T": 37, "D": 64},
                {"B": 2, "H": 1, "S": 1, "T": 1, "D": 16},
            ]
            for name in ("attention_lse", "attention_dkdv", "attention_dq")
        },
        "attention_delta": [{"B": 1, "H": 2, "S": 37, "D": 64}, {"B": 2, "H": 1, "S": 1, "D": 16}],
        # bf16: every dot on tensor cores (the training model's attention)
        **{
            f"{name}[DT=bf16]": [{"B": 2, "H": 2, "S": 130, "T": 130, "D": 64}]
            for name in ("attention_lse", "attention_dkdv", "attention_dq")
        },
        "attention_delta[DT=bf16]": [{"B": 2, "H": 2, "S": 130, "D": 64}],
    },
    "linear": {
        **{
            name: [
                {"M": 1, "N": 1, "K": 1},
                {"M": 130, "N": 77, "K": 100},
                {"M": 256, "N": 512, "K": 64},
            ]
            for name in ("linear", "linear_dx", "linear_dw")
        },
        **{
            f"{name}[T=bf16]": [{"M": 130, "N": 77, "K": 100}, {"M": 256, "N": 512, "K": 64}]
            for name in ("linear", "linear_dx", "linear_dw")
        },
    },
    "cross_entropy_backward": {
        "cross_entropy_backward": [{"M": 1, "V": 1}, {"M": 77, "V": 1000}, {"M": 37, "V": 3001}],
        "cross_entropy_backward[T=bf16]": [{"M": 37, "V": 3001}],
    },
    "swiglu_backward": {
        "swiglu_backward": [{"M": 1, "N": 1}, {"M": 77, "N": 300}, {"M": 513, "N": 1025}],
        "swiglu_backward[T=f32]": [{"M": 1, "N": 1}, {"M": 77, "N": 300}],
    },
    "col_sum": {"col_sum": [{"M": 1, "N": 1}, {"M": 1000, "N": 77}, {"M": 4099, "N": 130}]},
    "layernorm_backward": {
        "layernorm_backward": [
            {"M": 1, "N": 1},
            {"M": 77, "N": 300},
            {"M": 1000, "N": 1025},
            {"M": 3, "N": 2500},
        ]
    },
    "col_sum_atomic": {
        "col_sum_atomic": [{"M": 1, "N": 1}, {"M": 1000, "N": 77}, {"M": 4099, "N": 130}]
    },
    "histogram": {"histogram": [{"N": 1, "B": 1}, {"N": 1000, "B": 7}, {"N": 4099, "B": 256}]},
    "embedding_backward": {
        "embedding_backward": [
            {"V": 1, "D": 1, "M": 1},
            {"V": 37, "D": 300, "M": 77},
            {"V": 1000, "D": 1025, "M": 129},
        ],
        "embedding_backward[T=f32,I=i32]": [
            {"V": 5, "D": 3, "M": 2},
            {"V": 30, "D": 77, "M": 1000},
        ],
    },
    "cumsum": {
        "cumsum_rows": [{"M": 1, "N": 1}, {"M": 77, "N": 300}, {"M": 5, "N": 100003}],
        # 4 rows a block (a scanning loop's rows stay inside warps): 30 rows end mid-block
        "running_max_rows": [{"M": 1, "N": 1}, {"M": 30, "N": 10007}, {"M": 6, "N": 4099}],
    },
    "topk_softmax": {
        "topk_softmax": [{"T": 1, "E": 2}, {"T": 1000, "E": 60}, {"T": 4099, "E": 256}],
        "greedy_token": [{"M": 1, "V": 1}, {"M": 77, "V": 1000}, {"M": 5, "V": 32003}],
    },
    "rotary": {
        "rotary": [
            {"S": 1, "H": 1, "HALF": 1},
            {"S": 77, "H": 3, "HALF": 64},
            {"S": 130, "H": 8, "HALF": 33},
        ],
        "rotary[T=f32]": [{"S": 1, "H": 1, "HALF": 1}, {"S": 77, "H": 3, "HALF": 64}],
        "rotary[T=bf16]": [{"S": 77, "H": 3, "HALF": 64}],
    },
    # x's [BS, 1, D] f16 rows meet g's [BS, D] f32 tile; D = 96 pads the tile to 128
    "head_gate": {"head_gate": [{"S": 1, "H": 1, "D": 1}, {"S": 5000, "H": 12, "D": 96}]},
    # Random offsets lie in [-8, 8): unsorted and overlapping experts over the first rows
    # (tests/gpu/test_examples.py runs sorted, uneven splits); E1 = E + 1.
    "moe_gemm": {
        "moe_gemm": [
            {"T": 1, "K": 1, "N": 1, "E": 1, "E1": 2},
            {"T": 300, "K": 200, "N": 136, "E": 5, "E1": 6},
        ]
    },
    "paged_decode": {
        "paged_decode": [
            {"B": 1, "H": 1, "G": 1, "D": 1, "PAGES": 1, "MAXP": 1},
            {"B": 3, "H": 8, "G": 2, "D": 64, "PAGES": 13, "MAXP": 5},
            {"B": 2, "H": 4, "G": 4, "D": 128, "PAGES": 7, "MAXP": 3},
        ]
    },
}
