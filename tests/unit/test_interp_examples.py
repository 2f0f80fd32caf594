"""Every example kernel, compiled with `tilec.compile` and run in the interpreter, against its
numpy reference (`examples/*_reference.py`): at awkward shapes (1, primes, not multiples of
the tile size, larger than one tile in every dimension) and at shapes hypothesis picks.
Also the hand-written IR of `examples/ir/` and `@tilec.jit` kernels in interpret mode."""

from __future__ import annotations

import glob
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilec
from tilec.example_cases import case_kernel
from tilec.frontend import analyze, parse_file
from tilec.interp import run_kernel
from tilec.interp.runner import check_kernel, load_reference, reference_path
from tilec.ir import parse_module, verify
from tilec.runtime import NoGPUError, gpu_available

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(ROOT, "examples")

_compiled: dict[tuple[str, str], tilec.CompiledProgram] = {}


def program(name: str, dtypes: dict[str, str] | None = None) -> tilec.CompiledProgram:
    """The example's kernels, their dtype parameters bound by `dtypes` (else the defaults)."""
    key = (name, repr(sorted((dtypes or {}).items())))
    if key not in _compiled:
        path = os.path.join(EXAMPLES, f"{name}.tile")
        _compiled[key] = tilec.compile(path, options={"dtypes": dtypes} if dtypes else None)
    return _compiled[key]


def check(example: str, case: str, sizes: dict[str, int], **options) -> None:
    """`case` is a kernel's name, or `"name[T=bf16]"` for a binding of its dtype parameters."""
    path = os.path.join(EXAMPLES, f"{example}.tile")
    kernel, dtypes = case_kernel(case)
    report = check_kernel(
        program(example, dtypes),
        kernel,
        sizes,
        reference=load_reference(reference_path(path)),
        **options,
    )
    assert report.reference is not None, report.note
    assert report.checks and report.passed, report.render()


# (example file, kernel, sizes): with the default tile size 16, the last of each is larger
# than one tile in every tiled dimension, and no size is a multiple of 16.
AWKWARD = [
    ("vector_add", "vector_add", [{"N": 1}, {"N": 17}, {"N": 1009}]),
    ("vector_add", "saxpy", [{"N": 1}, {"N": 1009}]),
    ("row_sum", "row_sum", [{"M": 1, "N": 1}, {"M": 17, "N": 31}, {"M": 67, "N": 131}]),
    ("row_sum", "row_sum_whole", [{"M": 1, "N": 1}, {"M": 67, "N": 131}]),
    ("logsumexp", "logsumexp", [{"M": 1, "N": 1}, {"M": 3, "N": 9001}, {"M": 67, "N": 131}]),
    ("bias_gelu", "bias_gelu", [{"M": 1, "N": 1}, {"M": 17, "N": 31}, {"M": 5, "N": 1001}]),
    (
        "seq_mean",
        "seq_mean",
        [{"B": 1, "S": 1, "D": 1}, {"B": 3, "S": 301, "D": 45}, {"B": 5, "S": 17, "D": 131}],
    ),
    ("softmax", "softmax", [{"M": 1, "N": 1}, {"M": 17, "N": 31}, {"M": 67, "N": 131}]),
    ("layernorm", "layernorm", [{"M": 1, "N": 1}, {"M": 17, "N": 31}, {"M": 67, "N": 131}]),
    ("transpose", "transpose", [{"M": 1, "N": 1}, {"M": 17, "N": 31}, {"M": 67, "N": 131}]),
    (
        "matmul",
        "matmul",
        [{"M": 1, "N": 1, "K": 1}, {"M": 17, "N": 31, "K": 13}, {"M": 67, "N": 45, "K": 129}],
    ),
    ("matmul_bf16", "matmul_bf16", [{"M": 1, "N": 1, "K": 1}, {"M": 67, "N": 45, "K": 129}]),
    # Pinned to 128 x 128 x 32: 131 x 257 x 67 spans two tiles of M, three of N and K.
    ("matmul", "matmul_pinned", [{"M": 1, "N": 1, "K": 1}, {"M": 131, "N": 257, "K": 67}]),
    (
        "matmul_bias_gelu",
        "matmul_bias_gelu",
        [{"M": 1, "N": 1, "K": 1}, {"M": 67, "N": 45, "K": 129}],
    ),
    (
        "attention",
        "attention",
        [
            {"B": 1, "H": 1, "M": 1, "N": 1, "D": 1},
            {"B": 2, "H": 3, "M": 37, "N": 53, "D": 13},
        ],
    ),
    (
        "attention",
        "attention_causal",
        [
            {"B": 1, "H": 1, "S": 1, "T": 1, "D": 1},
            {"B": 2, "H": 1, "S": 53, "T": 37, "D": 64},
            {"B": 1, "H": 2, "S": 19, "T": 61, "D": 7},
        ],
    ),  # Query head h reads KV head h // (H // G): 4 heads in 2 groups, and 6 heads in 3.
    (
        "attention",
        "attention_gqa",
        [
            {"B": 1, "H": 1, "G": 1, "M": 1, "N": 1, "D": 1},
            {"B": 2, "H": 4, "G": 2, "M": 37, "N": 53, "D": 13},
            {"B": 1, "H": 6, "G": 3, "M": 17, "N": 19, "D": 8},
        ],
    ),
    # W = 20 keys (the reference's SCALARS), tiles of 16: some rows' first key tiles are
    # hidden, the window spans two or three tiles, and 19 queries fit in one window.
    (
        "attention_window",
        "attention_window",
        [
            {"B": 1, "H": 1, "S": 1, "T": 1, "D": 1},
            {"B": 2, "H": 1, "S": 53, "T": 53, "D": 13},
            {"B": 1, "H": 2, "S": 19, "T": 19, "D": 7},
        ],
    ),
    (
        "gemm_layouts",
        "gemm_nn",
        [{"M": 1, "N": 1, "K": 1}, {"M": 17, "N": 31, "K": 13}, {"M": 67, "N": 45, "K": 129}],
    ),
    (
        "gemm_layouts",
        "gemm_nt",
        [{"M": 1, "N": 1, "K": 1}, {"M": 17, "N": 31, "K": 13}, {"M": 67, "N": 45, "K": 129}],
    ),
    (
        "gemm_layouts",
        "gemm_tn",
        [{"M": 1, "N": 1, "K": 1}, {"M": 17, "N": 31, "K": 13}, {"M": 67, "N": 45, "K": 129}],
    ),
    (
        "gemm_layouts",
        "gemm_tt",
        [{"M": 1, "N": 1, "K": 1}, {"M": 17, "N": 31, "K": 13}, {"M": 67, "N": 45, "K": 129}],
    ),
    ("gemm_layouts", "gemm_nn_bf16", [{"M": 1, "N": 1, "K": 1}, {"M": 67, "N": 45, "K": 129}]),
    ("gemm_layouts", "gemm_nt_bf16", [{"M": 1, "N": 1, "K": 1}, {"M": 67, "N": 45, "K": 129}]),
    ("gemm_layouts", "gemm_tn_bf16", [{"M": 1, "N": 1, "K": 1}, {"M": 67, "N": 45, "K": 129}]),
    ("gemm_layouts", "gemm_tt_bf16", [{"M": 1, "N": 1, "K": 1}, {"M": 67, "N": 45, "K": 129}]),
    ("bmm", "bmm", [{"Z": 1, "M": 1, "N": 1, "K": 1}, {"Z": 3, "M": 37, "N": 45, "K": 67}]),
    (
        "int8_gemm",
        "int8_gemm",
        [{"M": 1, "N": 1, "K": 1}, {"M": 17, "N": 31, "K": 13}, {"M": 67, "N": 45, "K": 129}],
    ),
    ("int8_gemm", "int8_gemm_nt", [{"M": 1, "N": 1, "K": 1}, {"M": 67, "N": 45, "K": 129}]),
    ("fp8_gemm", "fp8_gemm", [{"M": 1, "N": 1, "K": 1}, {"M": 67, "N": 45, "K": 129}]),
    ("fp8_gemm", "fp8_gemm_e5m2", [{"M": 1, "N": 1, "K": 1}, {"M": 17, "N": 31, "K": 13}]),
    ("rmsnorm", "rmsnorm", [{"M": 1, "N": 1}, {"M": 17, "N": 31}, {"M": 67, "N": 131}]),
    ("softmax", "softmax_f16", [{"M": 1, "N": 1}, {"M": 17, "N": 31}, {"M": 67, "N": 131}]),
    # V spans many tiles, so the running max and sum are rescaled many times.
    (
        "cross_entropy",
        "cross_entropy",
        [{"M": 1, "V": 1}, {"M": 17, "V": 31}, {"M": 37, "V": 1009}],
    ),
    ("swiglu", "swiglu", [{"M": 1, "N": 1}, {"M": 17, "N": 31}, {"M": 67, "N": 131}]),
    ("dropout", "dropout", [{"M": 1, "N": 1}, {"M": 17, "N": 31}, {"M": 67, "N": 131}]),
    ("dropout", "dropout_f16", [{"M": 1, "N": 1}, {"M": 3, "N": 1025}]),
    (
        "swiglu_backward",
        "swiglu_backward",
        [{"M": 1, "N": 1}, {"M": 17, "N": 31}, {"M": 67, "N": 131}],
    ),
    ("rmsnorm_backward", "rmsnorm_dx", [{"M": 2, "N": 9}, {"M": 17, "N": 31}, {"M": 67, "N": 131}]),
    ("rmsnorm_backward", "rmsnorm_dw", [{"M": 1, "N": 1}, {"M": 67, "N": 31}, {"M": 131, "N": 67}]),
    (
        "cross_entropy_backward",
        "cross_entropy_backward",
        [{"M": 1, "V": 1}, {"M": 17, "V": 31}, {"M": 9, "V": 1031}],
    ),
    ("rmsnorm", "rmsnorm[T=f32]", [{"M": 1, "N": 1}, {"M": 17, "N": 31}]),
    ("swiglu", "swiglu[T=f32]", [{"M": 1, "N": 1}, {"M": 17, "N": 31}]),
    ("swiglu_backward", "swiglu_backward[T=f32]", [{"M": 1, "N": 1}, {"M": 17, "N": 31}]),
    ("rotary", "rotary[T=f32]", [{"S": 1, "H": 1, "HALF": 1}, {"S": 17, "H": 2, "HALF": 5}]),
    ("head_gate", "head_gate", [{"S": 1, "H": 1, "D": 1}, {"S": 17, "H": 3, "D": 96}]),
    # 17 queries and keys: two tiles each, the causal mask cutting through the second.
    *(
        (
            "attention_backward",
            kernel,
            [{"B": 1, "H": 1, "S": 1, "T": 1, "D": 1}, {"B": 2, "H": 1, "S": 17, "T": 17, "D": 5}],
        )
        for kernel in ("attention_lse", "attention_dkdv", "attention_dq")
    ),
    (
        "attention_backward",
        "attention_delta",
        [{"B": 1, "H": 1, "S": 1, "D": 1}, {"B": 2, "H": 3, "S": 17, "D": 5}],
    ),
    *(
        ("linear", kernel, [{"M": 1, "N": 1, "K": 1}, {"M": 17, "N": 19, "K": 33}])
        for kernel in ("linear", "linear_dx", "linear_dw")
    ),
    # The training model's bf16 kernels (examples/torch/): the same kernels, T bound to bf16.
    *(
        ("linear", f"{kernel}[T=bf16]", [{"M": 17, "N": 19, "K": 33}])
        for kernel in ("linear", "linear_dx", "linear_dw")
    ),
    *(
        (
            "attention_backward",
            f"{kernel}[DT=bf16]",
            [{"B": 2, "H": 1, "S": 17, "T": 17, "D": 5}],
        )
        for kernel in ("attention_lse", "attention_dkdv", "attention_dq")
    ),
    ("attention_backward", "attention_delta[DT=bf16]", [{"B": 2, "H": 3, "S": 17, "D": 5}]),
    ("rmsnorm_backward", "rmsnorm_dx[T=bf16]", [{"M": 17, "N": 31}]),
    ("rmsnorm_backward", "rmsnorm_dw[T=bf16]", [{"M": 67, "N": 31}]),
    ("cross_entropy", "cross_entropy[T=bf16]", [{"M": 17, "V": 31}]),
    ("cross_entropy_backward", "cross_entropy_backward[T=bf16]", [{"M": 9, "V": 1031}]),
    ("rotary", "rotary[T=bf16]", [{"S": 17, "H": 2, "HALF": 5}]),
    ("embedding", "embedding[T=f32,I=i32]", [{"V": 7, "D": 31, "M": 67}]),
    ("col_sum", "col_sum", [{"M": 1, "N": 1}, {"M": 17, "N": 31}, {"M": 1013, "N": 37}]),
    # One row in the table; more ids than rows (repeats); rows past one tile of D.
    (
        "embedding",
        "embedding",
        [{"V": 1, "D": 1, "M": 1}, {"V": 7, "D": 31, "M": 67}, {"V": 131, "D": 67, "M": 17}],
    ),
    ("embedding", "embedding_scale", [{"V": 1, "D": 1, "M": 3}, {"V": 37, "D": 13, "M": 67}]),
    # Blocks of M and N: many blocks add into each column, in the interpreter's shuffled order.
    (
        "col_sum_atomic",
        "col_sum_atomic",
        [{"M": 1, "N": 1}, {"M": 17, "N": 31}, {"M": 1013, "N": 37}],
    ),
    # Repeated bins within one tile and across blocks: every lane counts.
    ("histogram", "histogram", [{"N": 1, "B": 1}, {"N": 17, "B": 3}, {"N": 1013, "B": 37}]),
    # More ids than rows (repeats sum); rows past one tile of D.
    (
        "embedding_backward",
        "embedding_backward",
        [{"V": 1, "D": 1, "M": 1}, {"V": 7, "D": 31, "M": 67}, {"V": 131, "D": 67, "M": 17}],
    ),
    (
        "embedding_backward",
        "embedding_backward[T=f32,I=i32]",
        [{"V": 1, "D": 1, "M": 3}, {"V": 5, "D": 13, "M": 67}],
    ),
    (
        "layernorm_backward",
        "layernorm_backward",
        [{"M": 1, "N": 1}, {"M": 17, "N": 31}, {"M": 67, "N": 131}],
    ),
    # N spans many tiles of columns: the carried total crosses every boundary.
    ("cumsum", "cumsum_rows", [{"M": 1, "N": 1}, {"M": 17, "N": 31}, {"M": 5, "N": 1009}]),
    ("cumsum", "running_max_rows", [{"M": 1, "N": 1}, {"M": 17, "N": 31}, {"M": 6, "N": 2050}]),
    # 60 experts pad to 64 lanes (topk must skip the padding); 2 is the smallest E for k = 2.
    ("topk_softmax", "topk_softmax", [{"T": 1, "E": 2}, {"T": 17, "E": 60}, {"T": 5, "E": 131}]),
    ("topk_softmax", "greedy_token", [{"M": 1, "V": 1}, {"M": 17, "V": 31}, {"M": 5, "V": 1009}]),
    (
        "rotary",
        "rotary",
        [{"S": 1, "H": 1, "HALF": 1}, {"S": 17, "H": 3, "HALF": 31}, {"S": 37, "H": 2, "HALF": 64}],
    ),
    # Random offsets in [-8, 8) (unsorted, empty, overlapping experts) and E1 = E + 1.
    (
        "moe_gemm",
        "moe_gemm",
        [
            {"T": 1, "K": 1, "N": 1, "E": 1, "E1": 2},
            {"T": 37, "K": 19, "N": 21, "E": 3, "E1": 4},
        ],
    ),
    # Random context lengths are below 8: one page at most (tests/unit/test_scalar_control.py
    # walks many pages); the table's pages are drawn in range.
    (
        "paged_decode",
        "paged_decode",
        [
            {"B": 1, "H": 1, "G": 1, "D": 1, "PAGES": 1, "MAXP": 1},
            {"B": 5, "H": 6, "G": 3, "D": 33, "PAGES": 9, "MAXP": 4},
        ],
    ),
    # Random lengths (negative, past the padding) and ids drawn in range; every table dtype.
    (
        "embedding_bag",
        "embedding_bag",
        [{"V": 1, "D": 1, "B": 1, "L": 1}, {"V": 57, "D": 70, "B": 6, "L": 9}],
    ),
    ("embedding_bag", "embedding_bag[T=bf16]", [{"V": 57, "D": 70, "B": 6, "L": 9}]),
]


@pytest.mark.parametrize(
    ("example", "kernel", "sizes"),
    [(e, k, s) for e, k, all_sizes in AWKWARD for s in all_sizes],
    ids=lambda v: v if isinstance(v, str) else ",".join(f"{k}={n}" for k, n in v.items()),
)
def test_example_matches_its_reference(example, kernel, sizes):
    check(example, kernel, sizes)


def test_every_example_kernel_has_a_reference_and_a_case():
    covered = {(e, case_kernel(k)[0]) for e, k, _ in AWKWARD}
    for path in sorted(glob.glob(os.path.join(EXAMPLES, "*.tile"))):
        example = os.path.splitext(os.path.basename(path))[0]
        reference = load_reference(reference_path(path))
        for kernel in analyze(parse_file(path)).kernels:
            assert callable(getattr(reference, kernel.name, None)), (example, kernel.name)
            assert (example, kernel.name) in covered, (example, kernel.name)


def test_a_wrong_reference_fails_with_a_report():
    class Wrong:
        __file__ = "wrong_reference.py"

        @staticmethod
        def softmax(x, y):
            wide = x.astype(np.float64)
            e = np.exp(wide)  # forgot to normalise
            return e.astype(np.float32)

    report = check_kernel(program("softmax"), "softmax", {"M": 5, "N": 9}, reference=Wrong)
    assert not report.passed
    text = report.render()
    assert "FAILED" in text and "FAIL: y differ(s) from wrong_reference.py" in text
    assert "out of tolerance" in text


def test_a_gpu_tolerance_applies_to_the_gpu_run_only():
    from tilec.interp.runner import reference_tolerance

    module = load_reference(reference_path(os.path.join(EXAMPLES, "fp8_gemm.tile")))
    assert reference_tolerance(module, "fp8_gemm_e5m2", gpu=True) == 2e-3
    assert reference_tolerance(module, "fp8_gemm_e5m2") is None  # the interpreter: f32's
    assert reference_tolerance(module, "fp8_gemm", gpu=True) is None


def test_references_may_set_scalars_and_tolerances():
    class Loose:
        __file__ = "loose_reference.py"
        SCALARS = {"saxpy": {"alpha": 0.1}}
        TOLERANCES = {"saxpy": 1e-2}

        @staticmethod
        def saxpy(alpha, x, y, out):
            assert alpha.dtype == np.float32 and alpha == np.float32(0.1)  # as the kernel sees it
            return (alpha * x + y) * np.float32(1.001)  # 0.1% off

    report = check_kernel(program("vector_add"), "saxpy", {"N": 40}, reference=Loose)
    assert report.passed, report.render()
    assert "alpha=0.1" in report.render() and "(rtol 0.01: set by loose_reference.py)" in (
        report.render()
    )
    strict = check_kernel(program("vector_add"), "saxpy", {"N": 40}, reference=Loose, rtol=1e-5)
    assert not strict.passed


# ---------------------------------------------------------------------------------------------
# Shapes hypothesis chooses: 1 to 300, tile sizes 16 to 64


SIZES = st.integers(min_value=1, max_value=300)
TILES = st.sampled_from([16, 32, 64])


@settings(max_examples=15, deadline=None)
@given(m=SIZES, n=SIZES, k=SIZES, bm=TILES, bn=TILES, bk=TILES)
def test_matmul_at_any_shape(m, n, k, bm, bn, bk):
    check("matmul", "matmul", {"M": m, "N": n, "K": k}, tile_sizes={"M": bm, "N": bn, "K": bk})


@settings(max_examples=15, deadline=None)
@given(m=SIZES, n=SIZES, bm=TILES, bn=TILES)
def test_transpose_and_row_sum_at_any_shape(m, n, bm, bn):
    tiles = {"M": bm, "N": bn}
    check("transpose", "transpose", {"M": m, "N": n}, tile_sizes=tiles)
    check("row_sum", "row_sum", {"M": m, "N": n}, tile_sizes=tiles)


@settings(max_examples=15, deadline=None)
@given(m=SIZES, n=SIZES, bm=TILES, seed=st.integers(0, 2**16))
def test_softmax_and_layernorm_at_any_shape(m, n, bm, seed):
    check("softmax", "softmax", {"M": m, "N": n}, tile_sizes={"M": bm}, seed=seed)
    check("layernorm", "layernorm", {"M": m, "N": n}, tile_sizes={"M": bm}, seed=seed)


@settings(max_examples=15, deadline=None)
@given(
    s=st.integers(1, 150),
    t=st.integers(1, 150),
    d=st.integers(1, 80),
    bs=TILES,
    bt=TILES,
)
def test_causal_attention_at_any_shape(s, t, d, bs, bt):
    sizes = {"B": 1, "H": 1, "S": s, "T": t, "D": d}
    check("attention", "attention_causal", sizes, tile_sizes={"S": bs, "T": bt})


# ---------------------------------------------------------------------------------------------
# Hand-written IR and @tilec.jit


def test_the_hand_written_ir_examples_run():
    rng = np.random.default_rng(0)
    modules = {}
    for name in ("matmul", "softmax", "vector_add"):
        with open(os.path.join(EXAMPLES, "ir", f"{name}.tir")) as f:
            modules[name] = parse_module(f.read(), f"{name}.tir")
        verify(modules[name])
    a = rng.uniform(-1, 1, (37, 29)).astype(np.float16)
    b = rng.uniform(-1, 1, (29, 45)).astype(np.float16)
    c = np.zeros((37, 45), np.float32)
    run_kernel(modules["matmul"], None, [a, b, c], grid=(3, 2), tile_sizes={"BM": 16, "BN": 32})
    assert np.allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-5, atol=1e-5)

    x = rng.uniform(-1, 1, (7, 50)).astype(np.float32)
    y = np.zeros_like(x)
    run_kernel(modules["softmax"], None, [x, y], grid=(7,), tile_sizes={"BN": 64})
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    assert np.allclose(y, e / e.sum(axis=1, keepdims=True), rtol=1e-6)

    u, v = rng.uniform(-1, 1, (2, 100)).astype(np.float32)
    w = np.zeros(100, np.float32)
    run_kernel(modules["vector_add"], None, [u, v, w], grid=(4,), tile_sizes={"BLOCK": 32})
    assert np.array_equal(w, u + v)


def test_jit_kernels_run_in_interpret_mode(monkeypatch, tmp_path):
    source = tmp_path / "jit_kernels.py"
    source.write_text(
        "from __future__ import annotations\n"
        "import tilec\n\n\n"
        '@tilec.jit(tile={"M": 32})\n'
        "def scaled_add(x: f32[M, N], y: f32[M, N], out: f32[M, N], alpha: f32):\n"
        "    for tm, tn in tiles(M, N):\n"
        "        out[tm, tn] = alpha * x[tm, tn] + y[tm, tn]\n\n\n"
        "@tilec.jit(interpret=True)\n"
        "def row_max(x: f16[M, N], out: f16[M]):\n"
        "    for tm in tiles(M):\n"
        "        out[tm] = max(x[tm, :], axis=1)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import jit_kernels

    rng = np.random.default_rng(1)
    x, y = rng.uniform(-1, 1, (2, 45, 70)).astype(np.float32)
    out = np.zeros_like(x)
    monkeypatch.delenv("TILEC_INTERPRET", raising=False)
    if not gpu_available():  # without the variable, calls go to the GPU
        with pytest.raises(NoGPUError, match="TILEC_INTERPRET=1"):
            jit_kernels.scaled_add(x, y, out, 2.0)
    monkeypatch.setenv("TILEC_INTERPRET", "1")
    jit_kernels.scaled_add(x, y, out, 2.0)
    assert np.array_equal(out, np.float32(2.0) * x + y)
    jit_kernels.scaled_add(x, y, out=out, alpha=-1.0)
    assert np.array_equal(out, y - x)

    monkeypatch.delenv("TILEC_INTERPRET")
    h = rng.uniform(-1, 1, (33, 17)).astype(np.float16)
    best = np.zeros(33, np.float16)
    jit_kernels.row_max(h, best)  # interpret=True in its decorator
    assert np.array_equal(best, h.max(axis=1))
    with pytest.raises(tilec.TileError, match="expected dtype f16, got float32"):
        jit_kernels.row_max(h.astype(np.float32), best)
