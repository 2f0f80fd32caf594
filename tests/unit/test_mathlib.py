"""The math functions of `tilec.lowering.mathlib` that are built from generic LLVM operations
only (`sin`, `cos`, `pow`: no `ex2.approx`), compiled for this machine's CPU with llvmlite's
JIT and measured against float64 numpy: the accuracy docs/lowering.md states, without a GPU.
(The GPU test tests/gpu/test_defined_semantics.py measures the same on the H200.)"""

from __future__ import annotations

import contextlib
import ctypes

import llvmlite.binding as llvm
import numpy as np
import pytest
from llvmlite import ir

from tilec.lowering import mathlib

F32 = ir.FloatType()
I64 = ir.IntType(64)


@pytest.fixture(scope="module")
def host():
    """name -> f(x, y) running the mathlib function over float32 arrays on the CPU."""
    with contextlib.suppress(RuntimeError):  # llvmlite >= 0.44 initializes itself
        llvm.initialize()
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    module = ir.Module(name="mathlib_on_the_host")
    functions = {"sin": (mathlib.sin, 1), "cos": (mathlib.cos, 1), "pow": (mathlib.pow, 2)}
    for name, (function, arity) in functions.items():
        pointer = F32.as_pointer()
        fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [pointer] * 3 + [I64]), name)
        entry, loop, done = (fn.append_basic_block(n) for n in ("entry", "loop", "done"))
        b = ir.IRBuilder(entry)
        b.branch(loop)
        b.position_at_end(loop)
        i = b.phi(I64)
        i.add_incoming(ir.Constant(I64, 0), entry)
        x, y = (b.load(b.gep(fn.args[k], [i])) for k in (0, 1))
        b.store(function(b, x, y) if arity == 2 else function(b, x), b.gep(fn.args[2], [i]))
        following = b.add(i, ir.Constant(I64, 1))
        i.add_incoming(following, b.block)  # sin and cos branch: the latch is the last block
        b.cbranch(b.icmp_signed("<", following, fn.args[3]), loop, done)
        b.position_at_end(done)
        b.ret_void()
    parsed = llvm.parse_assembly(str(module))
    parsed.verify()
    machine = llvm.Target.from_default_triple().create_target_machine()
    engine = llvm.create_mcjit_compiler(parsed, machine)
    engine.finalize_object()
    pointer_type = ctypes.POINTER(ctypes.c_float)
    signature = ctypes.CFUNCTYPE(None, pointer_type, pointer_type, pointer_type, ctypes.c_int64)

    def run(name: str, x: np.ndarray, y: np.ndarray | None = None) -> np.ndarray:
        x = np.ascontiguousarray(x, np.float32)
        y = np.ascontiguousarray(x if y is None else y, np.float32)
        out = np.empty_like(x)
        fn = signature(engine.get_function_address(name))
        fn(*(a.ctypes.data_as(pointer_type) for a in (x, y, out)), x.size)
        return out

    run.engine = engine  # kept alive with the function
    return run


def _ulps(got: np.ndarray, exact: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        unit = np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
    return np.abs(got.astype(np.float64) - exact) / unit


@pytest.mark.parametrize("scale", [1.0, 4.0, 3000.0, 2.0**20, 1e9, 2.0**30, 1e15, 1e30, 3e38])
def test_sin_and_cos_within_two_ulp_at_any_magnitude(host, scale):
    rng = np.random.default_rng(int(np.log2(scale)) + 7)
    x = (rng.uniform(-1, 1, 100_000) * scale).astype(np.float32)
    # and the floats next to multiples of pi/2, where the reduction cancels the most bits
    near = (np.round(rng.uniform(-1, 1, 5000) * scale / (np.pi / 2)) * (np.pi / 2)).astype(
        np.float32
    )
    x = np.concatenate([x, near, np.nextafter(near, np.float32(np.inf))])
    for name, exact in (("sin", np.sin), ("cos", np.cos)):
        want = exact(x.astype(np.float64))
        got = host(name, x)
        error = np.abs(got.astype(np.float64) - want)
        bad = (_ulps(got, want) > 2) & (error > 2.0**-40)
        assert not bad.any(), (name, x[bad][:3], got[bad][:3], want[bad][:3])


def test_sin_and_cos_of_special_values(host):
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, -1e-30], np.float32)
    s, c = host("sin", x), host("cos", x)
    assert list(np.signbit(s[:2])) == [False, True] and (s[:2] == 0).all()
    assert np.isnan(s[2:5]).all() and np.isnan(c[2:5]).all()
    assert (s[5:] == x[5:]).all() and (c[[0, 1, 5, 6]] == 1).all()


def test_pow_is_exact_where_the_power_is_representable(host):
    rng = np.random.default_rng(1)
    x = rng.integers(-9, 10, 100_000).astype(np.float32)
    y = rng.integers(-12, 13, 100_000).astype(np.float32)
    with np.errstate(divide="ignore"):
        want = np.power(x.astype(np.float64), y.astype(np.float64))
    got = host("pow", x, y)
    representable = np.isfinite(want) & (want.astype(np.float32).astype(np.float64) == want)
    np.testing.assert_array_equal(got[representable], want[representable].astype(np.float32))
    assert (_ulps(got[np.isfinite(want)], want[np.isfinite(want)]) <= 0.5001).all()


def test_pow_of_real_arguments_is_correctly_rounded_but_for_ties(host):
    rng = np.random.default_rng(2)
    x = rng.uniform(0, 10, 100_000).astype(np.float32)
    y = rng.uniform(-30, 30, 100_000).astype(np.float32)
    want = np.power(x.astype(np.float64), y.astype(np.float64))
    normal = (want > 1.2e-38) & (want < 3.4e38)
    assert _ulps(host("pow", x, y)[normal], want[normal]).max() <= 0.501


def test_pow_special_cases_are_cs(host):
    values = np.array([0, -0.0, np.inf, -np.inf, np.nan, 1, -1, 2, -2, 0.5, -3, 3], np.float32)
    x, y = (a.ravel() for a in np.meshgrid(values, values))
    with np.errstate(divide="ignore", invalid="ignore"):  # f64, rounded: numpy's f32 power is
        want = np.power(x.astype(np.float64), y.astype(np.float64)).astype(np.float32)  # 1 ulp off
    got = host("pow", x, y)
    same = (got == want) & (np.signbit(got) == np.signbit(want)) | (np.isnan(got) & np.isnan(want))
    assert same.all(), list(zip(x[~same], y[~same], got[~same], want[~same]))
