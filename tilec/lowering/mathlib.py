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
| `tanh` | abs(x) < 0.625: `x·P(x²)`, degree 5; else `1 − 2/(e^{2·abs(x)} + 1)` | 1.7 ulp |
| `erf` | abs(x) < 1: `x·P(x²)`, degree 6; 1 ≤ abs(x) < 4: `1 − e^{Q(abs(x))}`, degree 10; else ±1 | 2.3 ulp |
| `sin`, `cos` | x = k·π/2 + r in f64 (π/2 in three parts), `r + r³·P(r²)`, `1 − r²/2 + r⁴·Q(r²)` in f32, degree 3 | 0.7, 0.9 ulp on [−π/4, π/4] (emulated); GPU: see docs/lowering.md |
| `pow(x, y)` | `2^(y·log2 abs(x))` with C's special cases | relative ≈ 2 ulp + abs(y·log2 x)·2^-24 |
| `abs`, `floor`, `ceil`, `fma` | `llvm.fabs`, `cvt.rmi`, `cvt.rpi`, `fma.rn` | exact |

The polynomials were fitted by least squares on Chebyshev nodes against 40-digit references and
rounded to f32.
"""

from __future__ import annotations

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
TWO_OVER_PI = 0.6366197723675814  # 2/π rounded to f64
# π/2 = PIO2_PARTS[0] + [1] + [2] to about 160 bits (each part the f64 nearest the rest)
PIO2_PARTS = (1.5707963267948966, 6.123233995736766e-17, -1.4973849048591698e-33)

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
    a = _abs(b, x)
    small = b.fmul(x, _horner(b, TANH_SMALL, b.fmul(x, x)))
    e = exp(b, b.fmul(a, _c(2.0)))
    large = b.fsub(_c(1.0), b.fdiv(_c(2.0), b.fadd(e, _c(1.0))))
    large = _copysign(b, large, x)
    return b.select(b.fcmp_ordered("<", a, _c(0.625)), small, large)


def erf(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    a = _abs(b, x)
    small = b.fmul(x, _horner(b, ERF_SMALL, b.fmul(x, x)))
    clamped = b.select(b.fcmp_ordered("<", a, _c(4.0)), a, _c(4.0))  # erf(4) rounds to 1
    large = _copysign(b, b.fsub(_c(1.0), exp(b, _horner(b, ERF_LARGE, clamped))), x)
    r = b.select(b.fcmp_ordered("<", a, _c(1.0)), small, large)
    return b.select(b.fcmp_unordered("uno", x, x), x, r)  # NaN stays NaN


def _quadrant(b: ir.IRBuilder, x: ir.Value) -> tuple[ir.Value, ir.Value, ir.Value]:
    """x = k·π/2 + r with abs(r) ≤ π/4: (k mod 4 as i32, sin r, cos r).

    The reduction runs in f64 with π/2 in three parts (Cody and Waite), exact enough that r
    keeps f32 accuracy for abs(x) < 2^20 and an absolute error below 2^-47 up to 2^60; the
    polynomials run in f32. `sin.approx` alone was 4e-7 absolute on [-π, π] only, and
    1.6e-5 off at x = 3000 (the GPU fuzzer)."""
    xd = b.fpext(x, F64)
    k = call_intrinsic(b, "llvm.rint.f64", F64, [b.fmul(xd, ir.Constant(F64, TWO_OVER_PI))])
    r = xd
    for part in PIO2_PARTS:
        r = call_intrinsic(b, "llvm.fma.f64", F64, [b.fneg(k), ir.Constant(F64, part), r])
    # k mod 4, exactly in f64 (k is whole); NaN and inf (x infinite) give a NaN r anyway.
    k4 = call_intrinsic(b, "llvm.floor.f64", F64, [b.fmul(k, ir.Constant(F64, 0.25))])
    q = b.fsub(k, b.fmul(k4, ir.Constant(F64, 4.0)))
    quadrant = call_intrinsic(b, "llvm.fptosi.sat.i32.f64", I32, [q])
    r32 = b.fptrunc(r, F32)
    z = b.fmul(r32, r32)
    sin_r = _fma(b, r32, b.fmul(z, _horner(b, SIN_REDUCED, z)), r32)
    cos_r = _fma(b, z, _fma(b, z, _horner(b, COS_REDUCED, z), _c(-0.5)), _c(1.0))
    return quadrant, sin_r, cos_r


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


def pow(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    """C's powf: a negative base needs an integral exponent (odd ones keep the sign)."""
    a = _abs(b, x)
    r = exp2(b, b.fmul(y, log2(b, a)))
    floor = call_intrinsic(b, "llvm.floor.f32", F32, [y])
    integral = b.fcmp_ordered("==", floor, y)
    half = b.fmul(y, _c(0.5))
    odd = b.and_(
        integral, b.fcmp_ordered("!=", call_intrinsic(b, "llvm.floor.f32", F32, [half]), half)
    )
    negative = b.icmp_signed("<", b.bitcast(x, I32), ir.Constant(I32, 0))  # sign bit (-0.0 too)
    r = b.select(b.and_(negative, odd), b.fneg(r), r)
    r = b.select(b.and_(b.fcmp_ordered("<", x, _c(0.0)), b.not_(integral)), _c(float("nan")), r)
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
