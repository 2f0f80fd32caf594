"""Elementwise math functions as LLVM IR for NVPTX, and how exact each one is.

LLVM's NVPTX backend has no lowering for `llvm.exp`, `llvm.log`, `llvm.sin` and friends (they
would become calls to a math library that PTX does not have), so each function is written here
out of what the hardware has: IEEE `sqrt.rn`/`div.rn`, `fma`, and the approximate `ex2`, `lg2`,
`sin`, `cos` instructions. Everything is computed in f32; `f16` and `bf16` arguments are
widened to f32 and the result rounded once to nearest even. `f64` has `sqrt`, `rsqrt`, `abs`,
`floor`, `ceil`, `fma` and arithmetic; its transcendental functions are not lowered yet.

Precision in f32 (ulp = unit in the last place of the exact result), measured on an H200
against float64 references over 4M random arguments per function plus ±0, ±inf, NaN and
subnormals (docs/lowering.md has the same table):

| function | formulation | max error |
| --- | --- | --- |
| `sqrt`, `/` | `sqrt.rn.f32`, `div.rn.f32` | correctly rounded |
| `rsqrt` | `1 / sqrt(x)`, two IEEE roundings | 1.5 ulp |
| `exp2` | `ex2.approx.f32` | 2.1 ulp |
| `exp` | `2^t` with `t = x·log2(e)` rounded, corrected by `(x·log2(e) − t)·ln 2` | 2.5 ulp |
| `log`, `log2` | `x = 2^e·m` (√½ ≤ m < √2), `log1p(m − 1)` by a degree-10 polynomial | 0.9, 1.3 ulp (subnormal x: `lg2.approx`) |
| `tanh` | abs(x) < 0.625: `x·P(x²)`, degree 5; else `1 − 2/(e^{2·abs(x)} + 1)` by `ex2.approx` and `rcp.approx` with a Newton step | 3.5 ulp (bound; 1.7 ulp with `exp` and `div.rn`, at twice the instructions) |
| `erf` | abs(x) < 1: `x·P(x²)`, degree 6; 1 ≤ abs(x) < 4: `1 − e^{Q(abs(x))}`, degree 10, e^Q by `ex2.approx`; else ±1 | 2.3 ulp (with `exp`; measured again on the next GPU run) |
| `sin`, `cos` | x = k·π/2 + r in f64 (π/2 in three parts), `r + r³·P(r²)`, `1 − r²/2 + r⁴·Q(r²)` in f32, degree 3 | 0.7, 0.9 ulp on [−π/4, π/4] (emulated); GPU: see docs/lowering.md |
| `pow(x, y)` | `2^(y·log2 abs(x))` in f64 (log by the atanh series, 2^g by Taylor), C's special cases | the final rounding's: 0.5 ulp, exact for representable results (emulated) |
| `abs`, `floor`, `ceil`, `fma` | `llvm.fabs`, `cvt.rmi`, `cvt.rpi`, `fma.rn` | exact |

Where the `precision` pass marks an f32 division or `exp` `approx` (its result reaches memory
only as f16/bf16), `div_approx` (`div.approx.f32`, 2 ulp) and `exp_approx`
(`ex2.approx.ftz(x·log2 e)`, 2 ulp + abs(x)·2^-24, results below 2^-126 flushed to zero)
replace them.

The polynomials were fitted by least squares on Chebyshev nodes against 40-digit references and
rounded to f32.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from llvmlite import ir

__all__ = ["F32_FUNCTIONS", "call_intrinsic"]

F32 = ir.FloatType()
F64 = ir.DoubleType()
I32 = ir.IntType(32)

LOG2_E = 1.4426950216293335  # log2(e) rounded to f32
LOG2_E_LO = 1.925963033500011e-08  # log2(e) - LOG2_E
LN2 = 0.6931471824645996  # ln(2) rounded to f32
LN2_HI = 0.693145751953125  # 16 significant bits: e * LN2_HI is exact for |e| < 256
LN2_LO = 1.4286067653301870e-06  # ln(2) - LN2_HI
FLT_MIN = 1.1754943508222875e-38
LOG2_E_F64 = 1.4426950408889634  # log2(e) rounded to f64
LN2_F64 = 0.6931471805599453  # ln(2) rounded to f64
TWO_OVER_PI = 0.6366197723675814  # 2/π rounded to f64
# π/2 = PIO2_PARTS[0] + [1] + [2] to about 160 bits (each part the f64 nearest the rest)
PIO2_PARTS = (1.5707963267948966, 6.123233995736766e-17, -1.4973849048591698e-33)
# 2/π = Σ TWO_OVER_PI_BITS[i] · 2^(-24(i+1)): its first 216 bits, 24 at a time (Payne–Hanek)
TWO_OVER_PI_BITS = (
    10680707,
    7228996,
    1387004,
    2578385,
    16069853,
    12639074,
    9804092,
    4427841,
    16666979,
)

# Coefficients, highest degree first (fitted by least squares on Chebyshev nodes, rounded to f32).
ERF_SMALL = (  # erf(x) = x * P(x^2), |x| < 1
    7.898066542111337e-05,
    -0.0008024311973713338,
    0.005190048832446337,
    -0.026854805648326874,
    0.11283612251281738,
    -0.3761262893676758,
    1.128379225730896,
)
ERF_LARGE = (  # log(erfc(x)) = Q(x), 1 <= x <= 4
    -4.104991546682868e-08,
    9.60424472395971e-07,
    -8.219294613809325e-06,
    1.22828305393341e-05,
    0.00037654739571735263,
    -0.004206032492220402,
    0.025483964011073112,
    -0.10902511328458786,
    -0.6325819492340088,
    -1.1299219131469727,
    0.00026398987392894924,
)
TANH_SMALL = (  # tanh(x) = x * P(x^2), |x| < 0.625
    -0.00569737097248435,
    0.020630160346627235,
    -0.05373581498861313,
    0.1333136409521103,
    -0.33333274722099304,
    1.0,
)
SIN_REDUCED = (  # sin(r) = r + r^3 * P(r^2), |r| <= pi/4
    2.7180080905964132e-06,
    -0.0001983929832931608,
    0.008333329111337662,
    -0.1666666716337204,
)
COS_REDUCED = (  # cos(r) = 1 - r^2/2 + r^4 * P(r^2), |r| <= pi/4
    -2.720371981013159e-07,
    2.4799432139843702e-05,
    -0.0013888883404433727,
    0.0416666679084301,
)
LOG1P = (  # log1p(f) = f + f^2 * P(f), sqrt(1/2) - 1 <= f < sqrt(2) - 1
    -0.07473267614841461,
    0.12819615006446838,
    -0.13262024521827698,
    0.14196674525737762,
    -0.16608591377735138,
    0.200011745095253,
    -0.2500157654285431,
    0.3333333730697632,
    -0.49999988079071045,
)


def call_intrinsic(
    b: ir.IRBuilder, name: str, result: ir.Type, args: Sequence[ir.Value]
) -> ir.Value:
    """Call intrinsic `name` (declared in the module on first use)."""
    module = b.module
    fn = module.globals.get(name)
    if fn is None:
        fn = ir.Function(module, ir.FunctionType(result, [a.type for a in args]), name)
    return b.call(fn, list(args))


def _c(x: float) -> ir.Constant:
    return ir.Constant(F32, x)


def _fma(b: ir.IRBuilder, x: ir.Value, y: ir.Value, z: ir.Value) -> ir.Value:
    return call_intrinsic(b, "llvm.fma.f32", F32, [x, y, z])


def _horner(b: ir.IRBuilder, coefficients: Sequence[float], x: ir.Value) -> ir.Value:
    r: ir.Value = _c(coefficients[0])
    for c in coefficients[1:]:
        r = _fma(b, r, x, _c(c))
    return r


def _abs(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    return call_intrinsic(b, "llvm.fabs.f32", F32, [x])


def _copysign(b: ir.IRBuilder, magnitude: ir.Value, sign: ir.Value) -> ir.Value:
    return call_intrinsic(b, "llvm.copysign.f32", F32, [magnitude, sign])


def exp2(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    return call_intrinsic(b, "llvm.exp2.f32", F32, [x])  # ex2.approx.f32


def exp_approx(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """`ex2.approx.ftz(x·log2 e)`: 2 ulp plus abs(x)·2^-24 relative, for exps whose results
    reach memory only as f16/bf16 or through sums that hide such errors (`precision`).
    `.ftz` flushes results below 2^-126 to zero -- an absolute error under 2^-126, far below
    an f16's least subnormal (2^-24) -- and is one MUFU instruction where the non-ftz form
    scales subnormal results around it (four)."""
    return call_intrinsic(b, "llvm.nvvm.ex2.approx.ftz.f", F32, [b.fmul(x, _c(LOG2_E))])


def times_log2e(b: ir.IRBuilder, y: ir.Value) -> ir.Value:
    return b.fmul(y, _c(LOG2_E))


def exp2_fma_approx(
    b: ir.IRBuilder, x: ir.Value, y_log2e: ir.Value, x_log2e: ir.Value | None = None
) -> ir.Value:
    """`exp(x - y)` as `ex2.approx.ftz(fma(x, log2 e, -(y log2 e)))`, `y log2 e` given (a
    row's max, computed once): one rounding of the exponent where `exp_approx` of the
    difference has two. The error of `y log2 e`'s rounding adds abs(y)·2^-24·log2(e) to the
    exponent, a relative error of abs(y)·2^-24 in the result (6e-6 for abs(y) = 100, below an
    f16's half ulp while abs(y) < 8000): what FlashAttention's folded softmax accepts too.
    `x_log2e`: the multiplier in place of log2 e -- `c·log2 e` for `exp(x·c - y)` (the scale
    folded, `hoist-scale`), whose rounding adds abs(x·c)·2^-24·log2(e) to the exponent, as
    rounding the product `x·c` itself did."""
    neg = b.fneg(y_log2e)
    multiplier = _c(LOG2_E) if x_log2e is None else x_log2e
    t = call_intrinsic(b, "llvm.fma.f32", F32, [x, multiplier, neg])
    return call_intrinsic(b, "llvm.nvvm.ex2.approx.ftz.f", F32, [t])


def div_approx(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    """`div.approx.f32`: within 2 ulp for abs(y) in [2^-126, 2^126] (`precision`)."""
    return call_intrinsic(b, "llvm.nvvm.div.approx.f", F32, [x, y])


def exp(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    t = b.fmul(x, _c(LOG2_E))
    # What rounding x * log2(e) to t lost, so that large |x| keep their accuracy.
    rest = b.fadd(_fma(b, x, _c(LOG2_E), b.fneg(t)), b.fmul(x, _c(LOG2_E_LO)))
    r = exp2(b, t)
    corrected = _fma(b, r, b.fmul(rest, _c(LN2)), r)
    # Where 2^t is 0 or inf (|x| large or infinite) the correction is NaN: keep 2^t.
    return b.select(b.fcmp_unordered("uno", corrected, corrected), r, corrected)


def _log_parts(b: ir.IRBuilder, x: ir.Value) -> tuple[ir.Value, ir.Value, ir.Value]:
    """(e, log1p(m - 1), normal) with x = 2^e * m, sqrt(1/2) <= m < sqrt(2), for normal
    positive finite x (`normal` says which x those are)."""
    bits = b.bitcast(x, I32)
    exponent = b.ashr(b.sub(bits, ir.Constant(I32, 0x3F3504F3)), ir.Constant(I32, 23))
    m = b.bitcast(b.sub(bits, b.shl(exponent, ir.Constant(I32, 23))), F32)
    f = b.fsub(m, _c(1.0))
    log1p = _fma(b, b.fmul(f, f), _horner(b, LOG1P, f), f)
    normal = b.and_(b.fcmp_ordered(">=", x, _c(FLT_MIN)), b.fcmp_ordered("<", x, _c(float("inf"))))
    return b.sitofp(exponent, F32), log1p, normal


def _lg2_approx(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    # lg2.approx gives -inf at 0, NaN below 0 and for NaN, inf at inf, and handles subnormals.
    return call_intrinsic(b, "llvm.nvvm.lg2.approx.f", F32, [x])


def log(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    e, log1p, normal = _log_parts(b, x)
    r = _fma(b, e, _c(LN2_HI), _fma(b, e, _c(LN2_LO), log1p))
    return b.select(normal, r, b.fmul(_lg2_approx(b, x), _c(LN2)))


def log2(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    e, log1p, normal = _log_parts(b, x)
    r = _fma(b, log1p, _c(LOG2_E), _fma(b, log1p, _c(LOG2_E_LO), e))
    return b.select(normal, r, _lg2_approx(b, x))


def tanh(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """abs(x) < 0.625: `x·P(x²)`; else `1 − q`, `q = 2/(e + 1)`, `e = e^{2·abs(x)}`, with
    `e = ex2.approx(2·abs(x)·log2 e)` and `q = 1/(e/2 + 1/2)` by `rcp.approx` and one Newton
    step -- no correction of the exponent's rounding and no IEEE division (`div.rn`: a
    reciprocal, Newton steps and a checked slow path), which together took more instructions
    than the rest of the function. Neither is needed: the result's error is `q/(1 − q)` times
    q's relative error, and q/(1 − q) is at most 0.8 (at abs(x) = 0.625, where the exponent,
    1.8, loses under 2^-24 relative by its rounding) and falls as e^{-2·abs(x)} while the
    exponent's rounding error grows with it. Emulated with ex2 and rcp at their worst errors
    (2 and 1 ulp, either sign): 2.98 ulp at most, just above 0.625 (3.85 without the Newton
    step); the GPU test bounds 3.5. e = inf gives q = 0, 1; NaN stays NaN."""
    a = _abs(b, x)
    small = b.fmul(x, _horner(b, TANH_SMALL, b.fmul(x, x)))
    e = call_intrinsic(b, "llvm.nvvm.ex2.approx.ftz.f", F32, [b.fmul(a, _c(2.0 * LOG2_E))])
    half = _fma(b, e, _c(0.5), _c(0.5))
    guess = call_intrinsic(b, "llvm.nvvm.rcp.approx.ftz.f", F32, [half])
    # One Newton step (two FMAs): q within half an ulp, so that ex2's error is what remains.
    q = _fma(b, guess, _fma(b, b.fneg(half), guess, _c(1.0)), guess)
    large = _copysign(b, b.fsub(_c(1.0), q), x)
    return b.select(b.fcmp_ordered("<", a, _c(0.625)), small, large)


def erf(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """abs(x) < 1: `x·P(x²)`; else `1 − e^{Q(abs(x))}`, the exponential by `ex2.approx`
    without the correction `exp` makes for the rounding of its exponent: the result's error
    is `e^Q/(1 − e^Q)` (at most 0.19, at abs(x) = 1, where abs(Q) is 1.9 and the rounding
    loses 2^-23.5 relative) times e^Q's relative error, and that factor falls as fast as e^Q
    while the rounding error only grows with abs(Q) (at most 19, at 4)."""
    a = _abs(b, x)
    small = b.fmul(x, _horner(b, ERF_SMALL, b.fmul(x, x)))
    clamped = b.select(b.fcmp_ordered("<", a, _c(4.0)), a, _c(4.0))  # erf(4) rounds to 1
    tail = exp_approx(b, _horner(b, ERF_LARGE, clamped))  # in [e^-19, 0.16]: no subnormals
    large = _copysign(b, b.fsub(_c(1.0), tail), x)
    r = b.select(b.fcmp_ordered("<", a, _c(1.0)), small, large)
    return b.select(b.fcmp_unordered("uno", x, x), x, r)  # NaN stays NaN


def _reduce_small(b: ir.IRBuilder, x: ir.Value) -> tuple[ir.Value, ir.Value]:
    """x = k·π/2 + r, abs(r) ≤ π/4: (k mod 4 as i32, r in f64), in f64 with π/2 in three parts
    (Cody and Waite): r keeps f32 accuracy while abs(x) < 2^30."""
    xd = b.fpext(x, F64)
    k = call_intrinsic(b, "llvm.rint.f64", F64, [b.fmul(xd, ir.Constant(F64, TWO_OVER_PI))])
    r = xd
    for part in PIO2_PARTS:
        r = _fma64(b, b.fneg(k), _d(part), r)
    r = b.select(b.fcmp_ordered("==", k, _d(0.0)), xd, r)  # abs(x) ≤ π/4 as it is: sin(-0) = -0
    # k mod 4, exactly in f64 (k is whole); NaN and inf (x infinite) give a NaN r anyway.
    k4 = call_intrinsic(b, "llvm.floor.f64", F64, [b.fmul(k, _d(0.25))])
    q = b.fsub(k, b.fmul(k4, _d(4.0)))
    return call_intrinsic(b, "llvm.fptosi.sat.i32.f64", I32, [q]), r


def _mod4(b: ir.IRBuilder, t: ir.Value) -> ir.Value:
    """t - 4·floor(t/4): exact in f64 for the products below."""
    return b.fsub(
        t, b.fmul(call_intrinsic(b, "llvm.floor.f64", F64, [b.fmul(t, _d(0.25))]), _d(4.0))
    )


def _reduce_large(b: ir.IRBuilder, x: ir.Value) -> tuple[ir.Value, ir.Value]:
    """The same for finite abs(x) ≥ 2^30, by Payne and Hanek's method: with abs(x) = m·2^e
    (m < 2^24 whole) and 2/π = Σ d_i·2^(-24(i+1)) (`TWO_OVER_PI_BITS`), x·2/π mod 4 needs only
    the five terms m·d_i·2^(e-24(i+1)) whose exponents straddle 2^2 … 2^-70; each is a 48-bit
    product, exact in f64, and reduced mod 4 exactly."""
    I64 = ir.IntType(64)
    bits = b.bitcast(_abs(b, x), I32)
    e = b.sub(b.lshr(bits, ir.Constant(I32, 23)), ir.Constant(I32, 127 + 23))
    m = b.uitofp(b.or_(b.and_(bits, ir.Constant(I32, 0x7FFFFF)), ir.Constant(I32, 0x800000)), F64)
    first = b.udiv(b.sub(e, ir.Constant(I32, 2)), ir.Constant(I32, 24))  # terms before: ≡ 0 mod 4
    terms = []
    for j in range(5):
        d: ir.Value = _d(float(TWO_OVER_PI_BITS[j]))
        for i in range(1, len(TWO_OVER_PI_BITS) - 4):
            at = b.icmp_unsigned("==", first, ir.Constant(I32, i))
            d = b.select(at, _d(float(TWO_OVER_PI_BITS[i + j])), d)
        exponent = b.sub(e, b.mul(b.add(first, ir.Constant(I32, j + 1)), ir.Constant(I32, 24)))
        scale = b.shl(b.sext(b.add(exponent, ir.Constant(I32, 1023)), I64), ir.Constant(I64, 52))
        terms.append(b.fmul(b.fmul(m, d), b.bitcast(scale, F64)))  # both products exact
    high = _mod4(b, b.fadd(_mod4(b, terms[0]), _mod4(b, terms[1])))  # exact: 49 bits
    low = b.fadd(_mod4(b, terms[2]), b.fadd(terms[3], terms[4]))
    n = call_intrinsic(b, "llvm.rint.f64", F64, [b.fadd(high, low)])
    fraction = b.fadd(b.fsub(high, n), low)
    r = _fma64(b, fraction, _d(PIO2_PARTS[0]), b.fmul(fraction, _d(PIO2_PARTS[1])))
    q = call_intrinsic(b, "llvm.fptosi.sat.i32.f64", I32, [_mod4(b, n)])
    # x < 0: sin(-y) = -sin(y), so the quadrant and r change sign.
    negative = b.fcmp_ordered("<", x, _c(0.0))
    q = b.select(negative, b.and_(b.sub(ir.Constant(I32, 4), q), ir.Constant(I32, 3)), q)
    return q, b.select(negative, b.fneg(r), r)


def _quadrant(b: ir.IRBuilder, x: ir.Value) -> tuple[ir.Value, ir.Value, ir.Value]:
    """x = k·π/2 + r with abs(r) ≤ π/4: (k mod 4 as i32, sin r, cos r). The reduction is
    `_reduce_small`, or `_reduce_large` on a branch taken only for abs(x) ≥ 2^30 (and not
    inf or NaN); the polynomials run in f32. (`sin.approx` alone was 4e-7 absolute on
    [-π, π] only, and 1.6e-5 off at x = 3000: the GPU fuzzer.)"""
    quadrant, r = _reduce_small(b, x)
    magnitude = _abs(b, x)
    large = b.and_(
        b.fcmp_ordered(">=", magnitude, _c(2.0**30)),
        b.fcmp_ordered("<", magnitude, _c(float("inf"))),
    )
    before = b.block
    with b.if_then(large, likely=False):
        quadrant_large, r_large = _reduce_large(b, x)
        inside = b.block
    merged_quadrant = b.phi(I32)
    merged_quadrant.add_incoming(quadrant, before)
    merged_quadrant.add_incoming(quadrant_large, inside)
    merged_r = b.phi(F64)
    merged_r.add_incoming(r, before)
    merged_r.add_incoming(r_large, inside)
    r32 = b.fptrunc(merged_r, F32)
    z = b.fmul(r32, r32)
    sin_r = _fma(b, r32, b.fmul(z, _horner(b, SIN_REDUCED, z)), r32)
    sin_r = b.select(b.fcmp_ordered("==", r32, _c(0.0)), r32, sin_r)  # keeps the sign of -0
    cos_r = _fma(b, z, _fma(b, z, _horner(b, COS_REDUCED, z), _c(-0.5)), _c(1.0))
    return merged_quadrant, sin_r, cos_r


def _sin_from(b: ir.IRBuilder, quadrant: ir.Value, sin_r: ir.Value, cos_r: ir.Value) -> ir.Value:
    """sin(k·π/2 + r) for k mod 4 = `quadrant`: sin r, cos r, -sin r, -cos r."""
    odd = b.icmp_unsigned("!=", b.and_(quadrant, ir.Constant(I32, 1)), ir.Constant(I32, 0))
    negative = b.icmp_unsigned("!=", b.and_(quadrant, ir.Constant(I32, 2)), ir.Constant(I32, 0))
    value = b.select(odd, cos_r, sin_r)
    return b.select(negative, b.fneg(value), value)


def sin(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    return _sin_from(b, *_quadrant(b, x))


def cos(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    quadrant, sin_r, cos_r = _quadrant(b, x)  # cos x = sin(x + π/2)
    return _sin_from(b, b.add(quadrant, ir.Constant(I32, 1)), sin_r, cos_r)


def sqrt(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    return call_intrinsic(b, "llvm.sqrt.f32", F32, [x])  # sqrt.rn.f32


def rsqrt(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    return b.fdiv(_c(1.0), sqrt(b, x))


def _d(x: float) -> ir.Constant:
    return ir.Constant(F64, x)


def _fma64(b: ir.IRBuilder, x: ir.Value, y: ir.Value, z: ir.Value) -> ir.Value:
    return call_intrinsic(b, "llvm.fma.f64", F64, [x, y, z])


def _log2_wide(b: ir.IRBuilder, a: ir.Value) -> ir.Value:
    """log2(a) in f64 to about 1e-15 relative, for positive finite f32 `a` (subnormals too):
    a = 2^e * m, sqrt(1/2) <= m < sqrt(2), log m = 2 atanh(s) with s = (m-1)/(m+1), |s| < 0.172,
    by its series to s^15."""
    subnormal = b.fcmp_ordered("<", a, _c(FLT_MIN))
    a = b.select(subnormal, b.fmul(a, _c(2.0**24)), a)
    bits = b.bitcast(a, I32)
    exponent = b.ashr(b.sub(bits, ir.Constant(I32, 0x3F3504F3)), ir.Constant(I32, 23))
    m = b.fpext(b.bitcast(b.sub(bits, b.shl(exponent, ir.Constant(I32, 23))), F32), F64)
    e = b.sitofp(
        b.sub(exponent, b.select(subnormal, ir.Constant(I32, 24), ir.Constant(I32, 0))), F64
    )
    s_ = b.fdiv(b.fsub(m, _d(1.0)), b.fadd(m, _d(1.0)))
    z = b.fmul(s_, s_)
    series: ir.Value = _d(1.0 / 15)
    for k in (13, 11, 9, 7, 5, 3, 1):
        series = _fma64(b, series, z, _d(1.0 / k))
    return _fma64(b, b.fmul(s_, series), _d(2.0 * LOG2_E_F64), e)


def _exp2_wide(b: ir.IRBuilder, t: ir.Value) -> ir.Value:
    """2^t in f64 to about 1e-15 relative for |t| <= 200 (t clamped there: beyond it the f32
    result is 0 or inf anyway): 2^n * e^(g ln 2) with n = rint(t), |g| <= 1/2, Taylor to g^13."""
    t = call_intrinsic(b, "llvm.maxnum.f64", F64, [t, _d(-200.0)])
    t = call_intrinsic(b, "llvm.minnum.f64", F64, [t, _d(200.0)])
    n = call_intrinsic(b, "llvm.rint.f64", F64, [t])
    g = b.fmul(b.fsub(t, n), _d(LN2_F64))
    p: ir.Value = _d(1.0 / math.factorial(13))
    for k in range(12, -1, -1):
        p = _fma64(b, p, g, _d(1.0 / math.factorial(k)))
    I64 = ir.IntType(64)
    scale_bits = b.shl(b.add(b.fptosi(n, I64), ir.Constant(I64, 1023)), ir.Constant(I64, 52))
    return b.fmul(p, b.bitcast(scale_bits, F64))


def pow(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    """C's powf: 2^(y log2 abs(x)) computed in f64 (so integral results such as 7^8 come out
    exact, and the error is the final rounding's); a finite negative base needs an integral
    exponent (odd ones keep the sign); C's special cases for zeros, infinities and NaN."""
    a = _abs(b, x)
    finite_positive = b.and_(
        b.fcmp_ordered(">", a, _c(0.0)), b.fcmp_ordered("<", a, _c(float("inf")))
    )
    log = _log2_wide(b, b.select(finite_positive, a, _c(1.0)))
    # log2 0 = -inf, log2 inf = inf, NaN stays NaN: y * log then gives C's zero/inf results.
    log = b.select(b.fcmp_ordered("==", a, _c(0.0)), _d(float("-inf")), log)
    log = b.select(b.fcmp_ordered("==", a, _c(float("inf"))), _d(float("inf")), log)
    log = b.select(b.fcmp_unordered("uno", a, a), _d(float("nan")), log)
    t = b.fmul(b.fpext(y, F64), log)
    wide = _exp2_wide(b, t)
    wide = b.select(b.fcmp_ordered(">", t, _d(200.0)), _d(float("inf")), wide)
    wide = b.select(b.fcmp_ordered("<", t, _d(-200.0)), _d(0.0), wide)
    wide = b.select(b.fcmp_unordered("uno", t, t), _d(float("nan")), wide)
    r = b.fptrunc(wide, F32)
    floor = call_intrinsic(b, "llvm.floor.f32", F32, [y])
    integral = b.fcmp_ordered("==", floor, y)
    half = b.fmul(y, _c(0.5))
    odd = b.and_(
        integral, b.fcmp_ordered("!=", call_intrinsic(b, "llvm.floor.f32", F32, [half]), half)
    )
    negative = b.icmp_signed("<", b.bitcast(x, I32), ir.Constant(I32, 0))  # sign bit (-0.0 too)
    r = b.select(b.and_(negative, odd), b.fneg(r), r)
    # A finite negative base with a fractional exponent has no real power (-inf has: C).
    finite_negative = b.and_(
        b.fcmp_ordered("<", x, _c(0.0)), b.fcmp_ordered(">", x, _c(float("-inf")))
    )
    r = b.select(b.and_(finite_negative, b.not_(integral)), _c(float("nan")), r)
    # pow(x, 0) = 1 and pow(1, y) = 1 even for NaN; pow(-1, ±inf) = 1.
    one = b.or_(
        b.fcmp_ordered("==", y, _c(0.0)),
        b.or_(
            b.fcmp_ordered("==", x, _c(1.0)),
            b.and_(
                b.fcmp_ordered("==", a, _c(1.0)),
                b.fcmp_ordered("==", _abs(b, y), _c(float("inf"))),
            ),
        ),
    )
    return b.select(one, _c(1.0), r)


# math dialect op name -> f32 implementation (operands as a list).
F32_FUNCTIONS: dict[str, Callable[..., ir.Value]] = {
    "math.exp": exp,
    "math.exp2": exp2,
    "math.log": log,
    "math.log2": log2,
    "math.tanh": tanh,
    "math.erf": erf,
    "math.sin": sin,
    "math.cos": cos,
    "math.sqrt": sqrt,
    "math.rsqrt": rsqrt,
    "math.powf": pow,
    "math.absf": lambda b, x: _abs(b, x),
    "math.floor": lambda b, x: call_intrinsic(b, "llvm.floor.f32", F32, [x]),
    "math.ceil": lambda b, x: call_intrinsic(b, "llvm.ceil.f32", F32, [x]),
}


_I64 = ir.IntType(64)


def _float_bits(t: ir.Type) -> int:
    return 64 if isinstance(t, ir.DoubleType) else 32 if isinstance(t, ir.FloatType) else 16


def warp_shuffle(b: ir.IRBuilder, v: ir.Value, mode: str, operand: ir.Value | int) -> ir.Value:
    """`shfl.sync.<mode>` of `v` over the whole warp (`operand`: the delta, lane mask or
    source lane); values wider or narrower than 32 bits go as 32-bit pieces."""
    clamp = 0 if mode == "up" else 31
    amount = ir.Constant(I32, operand) if isinstance(operand, int) else operand
    name = f"llvm.nvvm.shfl.sync.{mode}.i32"

    def shuffle32(x: ir.Value) -> ir.Value:
        args = [ir.Constant(I32, -1), x, amount, ir.Constant(I32, clamp)]
        return call_intrinsic(b, name, I32, args)

    width = v.type.width if isinstance(v.type, ir.IntType) else _float_bits(v.type)
    bits = v if isinstance(v.type, ir.IntType) else b.bitcast(v, ir.IntType(width))
    if width == 64:
        low = shuffle32(b.trunc(bits, I32))
        high = shuffle32(b.trunc(b.lshr(bits, ir.Constant(_I64, 32)), I32))
        out = b.or_(b.zext(low, _I64), b.shl(b.zext(high, _I64), ir.Constant(_I64, 32)))
    elif width == 32:
        out = shuffle32(bits)
    else:
        out = b.trunc(shuffle32(b.zext(bits, I32)), ir.IntType(width))
    return out if isinstance(v.type, ir.IntType) else b.bitcast(out, v.type)
