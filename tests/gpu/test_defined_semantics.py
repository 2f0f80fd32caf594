"""Operations whose LLVM instructions are poison or undefined for some operands give, on the
GPU, the values the interpreter defines: float-to-integer conversions saturate (NaN gives 0),
`x // 0` is -1 and `x % 0` is x, shifts by the width or more shift everything out. And `sin`
and `cos` keep their accuracy far from zero. Each was a mismatch the GPU fuzzer found
(`python -m tilec.fuzz.gpu`, docs/testing.md)."""

# ruff: noqa: F821 - kernel bodies use the tile language's names (f32, tiles, N), not Python's

from __future__ import annotations

import numpy as np
import pytest
import torch

import tilec

pytestmark = pytest.mark.gpu


@tilec.jit
def to_i8(x: f32[N], y: i8[N]):
    for tn in tiles(N):
        y[tn] = x[tn].to(i8)


@tilec.jit
def to_i16(x: f64[N], y: i16[N]):
    for tn in tiles(N):
        y[tn] = x[tn].to(i16)


@tilec.jit
def to_i32(x: f32[N], y: i32[N]):
    for tn in tiles(N):
        y[tn] = x[tn].to(i32)


@tilec.jit
def int_ops(a: i32[N], b: i32[N], q: i32[N], r: i32[N], left: i32[N], right: i32[N]):
    for tn in tiles(N):
        q[tn] = a[tn] // b[tn]
        r[tn] = a[tn] % b[tn]
        left[tn] = a[tn] << b[tn]
        right[tn] = a[tn] >> b[tn]


@tilec.jit
def sin_cos(x: f32[N], s: f32[N], c: f32[N]):
    for tn in tiles(N):
        s[tn] = sin(x[tn])
        c[tn] = cos(x[tn])


@tilec.jit
def tanh_erf(x: f32[N], t: f32[N], e: f32[N]):
    for tn in tiles(N):
        t[tn] = tanh(x[tn])
        e[tn] = erf(x[tn])


SPECIAL = [0.0, -0.0, 0.5, -0.5, 1.7, -1.7, 126.9, 127.0, 127.5, 128.0, 255.0, 300.0, -128.0]
SPECIAL += [-128.9, -129.0, -1000.0, 40000.0, -40000.0, 3e9, -3e9, 1e30, -1e30]
SPECIAL += [float("inf"), float("-inf"), float("nan")]


def _saturated(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    info = np.iinfo(dtype)
    wide = np.trunc(np.nan_to_num(x.astype(np.float64), nan=0.0))
    return np.clip(wide, info.min, info.max).astype(dtype)


@pytest.mark.parametrize(
    ("kernel", "source", "target"),
    [(to_i8, np.float32, np.int8), (to_i16, np.float64, np.int16), (to_i32, np.float32, np.int32)],
)
def test_float_to_int_saturates_and_nan_gives_zero(kernel, source, target):
    x = np.array(SPECIAL * 3, dtype=source)
    y = np.zeros(x.shape, dtype=target)
    kernel(x, y)
    np.testing.assert_array_equal(y, _saturated(x, target))
    in_interpreter = np.zeros_like(y)
    kernel._interpret((x, in_interpreter), {})
    np.testing.assert_array_equal(y, in_interpreter)


def test_integer_division_by_zero_and_shifts_out_of_range():
    a = np.array([7, -7, 0, 50, -(2**31), -(2**31), 5, -5, 1, -1, 123, -123], dtype=np.int32)
    b = np.array([0, 0, 0, 0, -1, 0, 32, 33, -1, 40, 31, 31], dtype=np.int32)
    q, r, left, right = (np.zeros_like(a) for _ in range(4))
    int_ops(a, b, q, r, left, right)
    in_interpreter = [np.zeros_like(a) for _ in range(4)]
    int_ops._interpret((a, b, *in_interpreter), {})
    for got, want in zip((q, r, left, right), in_interpreter):
        np.testing.assert_array_equal(got, want)
    # and what docs/language.md promises: x // 0 is -1, x % 0 is x, floor semantics otherwise
    wide_a, wide_b = a.astype(np.int64), b.astype(np.int64)
    safe = np.where(wide_b == 0, 1, wide_b)
    floor_q = np.where(wide_b == 0, -1, np.floor_divide(wide_a, safe))
    floor_r = np.where(wide_b == 0, wide_a, np.mod(wide_a, safe))
    np.testing.assert_array_equal(q, floor_q.astype(np.int32))  # INT_MIN // -1 wraps
    np.testing.assert_array_equal(r, floor_r.astype(np.int32))
    shift_out = (b < 0) | (b >= 32)
    amount = np.where(shift_out, 0, b)
    np.testing.assert_array_equal(left, np.where(shift_out, 0, np.left_shift(a, amount)))
    sign = np.where(a < 0, -1, 0).astype(np.int32)
    np.testing.assert_array_equal(right, np.where(shift_out, sign, np.right_shift(a, amount)))


@pytest.mark.parametrize("scale", [4.0, 3000.0, 2.0**20, 1e9])
def test_sin_and_cos_accuracy_far_from_zero(scale):
    rng = np.random.default_rng(0)
    x = (rng.uniform(-1, 1, 1 << 20) * scale).astype(np.float32)
    # Arguments next to multiples of pi/2, where the reduction cancels most bits.
    near = np.round(rng.uniform(-1, 1, 4096) * scale / (np.pi / 2)) * (np.pi / 2)
    x[: near.size] = near.astype(np.float32)
    xs, s, c = torch.from_numpy(x).cuda(), *(torch.empty(x.size, device="cuda") for _ in "sc")
    sin_cos(xs, s, c)
    exact = x.astype(np.float64)
    for got, want in ((s.cpu().numpy(), np.sin(exact)), (c.cpu().numpy(), np.cos(exact))):
        error = np.abs(got.astype(np.float64) - want)
        if scale <= 2.0**20:  # within 2 ulp of the exact result, or 2^-24 absolute near zero
            bound = np.maximum(2 * np.spacing(np.abs(want).astype(np.float32)), 2.0**-24)
        else:  # the reduction's absolute error bound
            bound = np.full(want.shape, 2.0**-20)
        worst = np.argmax(error / bound)
        assert error[worst] <= bound[worst], (x[worst], got[worst], want[worst])


def test_sin_and_cos_of_special_values():
    x = np.array([0.0, -0.0, float("inf"), float("-inf"), float("nan"), 1e-30], np.float32)
    s, c = np.zeros_like(x), np.zeros_like(x)
    sin_cos(x, s, c)
    np.testing.assert_array_equal(np.signbit(s[:2]), [False, True])
    assert np.isnan(s[2:5]).all() and np.isnan(c[2:5]).all()
    assert s[5] == np.float32(1e-30) and c[5] == 1.0 and c[0] == 1.0


def _ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """abs(got - want) in units of the f32 spacing at want (the least normal's below it)."""
    spacing = np.spacing(np.maximum(np.abs(want), 2.0**-126).astype(np.float32)).astype(np.float64)
    return np.abs(got.astype(np.float64) - want) / spacing


def test_tanh_and_erf_within_their_stated_ulps():
    """docs/lowering.md: tanh within 3.5 ulp (`ex2.approx` and `rcp.approx` above 0.625),
    erf within 2.5 (e^Q by `ex2.approx`), over 4M arguments where each formulation changes and
    far beyond, and the special values."""
    import math

    rng = np.random.default_rng(1)
    x = np.concatenate(
        [
            rng.uniform(-1.5, 1.5, 1 << 21),  # both branches of both, and the switch
            rng.uniform(-10, 10, 1 << 20),
            np.exp(rng.uniform(-30, 5, 1 << 20)) * rng.choice([-1, 1], 1 << 20),
            [0.0, -0.0, 0.625, -0.625, 1.0, -1.0, 4.0, -4.0, 9.0, 1e-30, 1e30, -1e30],
        ]
    ).astype(np.float32)
    t, e = np.zeros_like(x), np.zeros_like(x)
    tanh_erf(x, t, e)
    wide = x.astype(np.float64)
    tanh_ulps = _ulps(t, np.tanh(wide))
    erf_ulps = _ulps(e, np.vectorize(math.erf)(wide))
    worst_t, worst_e = int(np.argmax(tanh_ulps)), int(np.argmax(erf_ulps))
    print(f"tanh: {tanh_ulps[worst_t]:.2f} ulp at {x[worst_t]!r}; erf: {erf_ulps[worst_e]:.2f} ulp")
    assert tanh_ulps[worst_t] <= 3.5, (x[worst_t], t[worst_t])
    assert erf_ulps[worst_e] <= 2.5, (x[worst_e], e[worst_e])
    specials = np.array([float("inf"), float("-inf"), float("nan")], np.float32)
    ts, es = np.zeros_like(specials), np.zeros_like(specials)
    tanh_erf(specials, ts, es)
    np.testing.assert_array_equal(ts[:2], [1.0, -1.0])
    np.testing.assert_array_equal(es[:2], [1.0, -1.0])
    assert np.isnan(ts[2]) and np.isnan(es[2])
