"""rand, randn and randint in the interpreter: the Philox-4x32-10 stream against Random123's
known answers and an independent Python Philox written here (four consecutive offsets share a
run, a word each), bit for bit against Triton's `tl.rand4x`/`tl.randn4x`/`tl.randint4x` at
counter offset // 4 in Triton's CPU interpreter, the `group` promise the lowering relies on,
and statistics that a wrong uniform map or normal transform fails. The GPU side is
tests/gpu/test_random.py."""

from __future__ import annotations

import os

import numpy as np
import pytest

import tilec
from tilec.dialects.random import RAND_PREDICATES, RAND_SCALE, rand_of_words, rand_threshold
from tilec.interp import run_kernel
from tilec.interp.random import philox

MASK = 0xFFFFFFFF

KERNELS = """
def streams(u: f32[M, N], g: f32[M, N], bits: i32[M, N], seed: i32):
    for tm, tn in tiles(M, N):
        offs = offsets(tm)[:, None] * N + offsets(tn)[None, :]
        u[tm, tn] = rand(seed, offs)
        g[tm, tn] = randn(seed, offs)
        bits[tm, tn] = randint(seed, offs)


def wide(u: f32[N], bits: i32[N], seed: i64, base: i64):
    for tn in tiles(N):
        offs = offsets(tn).to(i64) + base
        u[tn] = rand(seed, offs)
        bits[tn] = randint(seed, offs)
"""


def _python_philox(key: int, counter: tuple[int, int, int, int]) -> tuple[int, ...]:
    """Philox-4x32-10 on Python integers, one counter at a time (Salmon et al., SC 2011)."""
    k0, k1 = key & MASK, (key >> 32) & MASK
    c0, c1, c2, c3 = counter
    for _ in range(10):
        p0, p2 = 0xD2511F53 * c0, 0xCD9E8D57 * c2
        c0, c1, c2, c3 = (p2 >> 32) ^ c1 ^ k0, p2 & MASK, (p0 >> 32) ^ c3 ^ k1, p0 & MASK
        k0, k1 = (k0 + 0x9E3779B9) & MASK, (k1 + 0xBB67AE85) & MASK
    return c0, c1, c2, c3


def _python_word(key: int, offset: int, width: int = 32) -> tuple[int, tuple[int, ...]]:
    """The stream's word of `offset` and the four words of its run (counter offset // 4)."""
    unsigned = offset & ((1 << width) - 1)
    counter = unsigned >> 2
    words = _python_philox(key, (counter & MASK, counter >> 32, 0, 0))
    return words[unsigned & 3], words


def _python_normal(key: int, offset: int) -> float:
    """Box-Muller of the offset's pair of words (2j, 2j + 1): cos for even offsets, sin for odd."""
    _, words = _python_word(key, offset)
    pair = (offset & 3) >> 1
    u1 = max(np.float32(1e-7), _python_uniform(words[2 * pair]))
    u2 = np.float64(_python_uniform(words[2 * pair + 1]))
    trig = np.cos if offset % 2 == 0 else np.sin
    return np.sqrt(-2.0 * np.log(np.float64(u1))) * trig(2 * np.pi * u2)


def _python_uniform(word: int) -> np.float32:
    signed = word - (1 << 32) if word >> 31 else word
    magnitude = ~signed if signed < 0 else signed
    return np.float32(magnitude) * np.float32(4.6566127342e-10)


@pytest.fixture(scope="module")
def kernels():
    return tilec.compiler.compile_source(KERNELS, "random.tile")


def _streams(kernels, m: int, n: int, seed: int, tile=None):
    u = np.zeros((m, n), np.float32)
    g = np.zeros((m, n), np.float32)
    bits = np.zeros((m, n), np.int32)
    run_kernel(kernels, "streams", [u, g, bits, seed], tile_sizes=tile or {"M": 4, "N": 32})
    return u, g, bits


def test_philox_matches_random123_known_answers():
    # Random123's kat_vectors for philox4x32_10: counter 0 with key 0; all ones.
    assert [int(w[0]) for w in philox(0, np.zeros(1, np.int64))] == [
        0x6627E8D5,
        0xE169C58D,
        0xBC57AC4C,
        0x9B00DBD8,
    ]
    assert _python_philox(0, (0, 0, 0, 0)) == (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)
    all_ones = _python_philox(2**64 - 1, (MASK, MASK, MASK, MASK))
    assert all_ones == (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)


@pytest.mark.parametrize(
    ("m", "n", "seed"), [(1, 1, 0), (5, 37, 1234), (3, 130, -5), (9, 8, 2**31 - 1)]
)
def test_streams_match_an_independent_philox(kernels, m, n, seed):
    u, g, bits = _streams(kernels, m, n, seed)
    for i in range(m):
        for j in range(n):
            word, _ = _python_word(seed, i * n + j)
            assert bits[i, j] == np.int32(np.uint32(word).view(np.int32))
            assert u[i, j] == _python_uniform(word)
            expected = _python_normal(seed, i * n + j)
            # The interpreter rounds each f32 step; f64 here differs by a few f32 ulps.
            assert abs(g[i, j] - expected) <= 1e-5 * max(1.0, abs(expected))


def test_tile_sizes_do_not_change_the_stream(kernels):
    a = _streams(kernels, 7, 45, 99, {"M": 2, "N": 16})
    b = _streams(kernels, 7, 45, 99, {"M": 8, "N": 64})
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)


def test_seeds_give_different_streams_and_the_same_seed_the_same(kernels):
    a, _, _ = _streams(kernels, 4, 64, 1)
    b, _, _ = _streams(kernels, 4, 64, 2)
    c, _, _ = _streams(kernels, 4, 64, 1)
    np.testing.assert_array_equal(a, c)
    assert np.mean(a == b) < 0.01


def test_wide_seed_and_offsets_use_the_high_words(kernels):
    n, seed, base = 50, 2**40 + 7, 2**33 - 20  # offsets cross 2**33: high word 1 then 2
    u = np.zeros(n, np.float32)
    bits = np.zeros(n, np.int32)
    run_kernel(kernels, "wide", [u, bits, seed, base], tile_sizes={"N": 16})
    for j in range(n):
        word, _ = _python_word(seed, base + j, 64)
        assert bits[j] == np.int32(np.uint32(word).view(np.int32))
        assert u[j] == _python_uniform(word)


def test_uniform_statistics(kernels):
    u, _, bits = _streams(kernels, 256, 1000, 2024, {"M": 16, "N": 128})
    n = u.size
    assert u.min() >= 0.0 and u.max() < 1.0
    # Mean 1/2 (sd of the mean 0.29 / sqrt(n) ~ 6e-4), variance 1/12: a map that kept the
    # sign (mean 0), used half the range, or squared the values fails these by far.
    assert abs(u.mean() - 0.5) < 0.004
    assert abs(u.var() - 1 / 12) < 0.002
    counts = np.histogram(u, bins=20, range=(0.0, 1.0))[0]
    assert np.all(np.abs(counts - n / 20) < 6 * np.sqrt(n / 20))
    # Neighbouring offsets are uncorrelated, and every bit of the raw words is fair.
    assert abs(np.corrcoef(u[:, :-1].ravel(), u[:, 1:].ravel())[0, 1]) < 0.01
    ones = np.unpackbits(bits.view(np.uint8)).reshape(-1, 32).mean(axis=0)
    assert np.all(np.abs(ones - 0.5) < 0.005)


def test_normal_statistics(kernels):
    _, g, _ = _streams(kernels, 256, 1000, 7, {"M": 16, "N": 128})
    assert np.isfinite(g).all()
    assert abs(g.mean()) < 0.01
    assert abs(g.var() - 1.0) < 0.015
    # Fourth moment 3 (a uniform on [-a, a] with variance 1 has 1.8), tails as a normal's.
    assert abs(np.mean(g**4) - 3.0) < 0.08
    assert abs(np.mean(np.abs(g) > 1.96) - 0.05) < 0.003


@pytest.fixture(scope="module")
def triton_interpreter():
    # Triton reads TRITON_INTERPRET when a kernel is decorated and launched: set while this
    # module's tests run, then put back.
    previous = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "1"
    torch = pytest.importorskip("torch")
    triton = pytest.importorskip("triton")
    tl = pytest.importorskip("triton.language")

    @triton.jit
    def streams(u, g, bits, seed, M, N, BM: tl.constexpr, BN: tl.constexpr):
        rows = tl.program_id(0) * BM + tl.arange(0, BM)
        cols = tl.program_id(1) * BN + tl.arange(0, BN)
        offs = rows[:, None] * N + cols[None, :]
        inside = (rows[:, None] < M) & (cols[None, :] < N)
        counter, word = offs // 4, offs % 4
        # the stream's word of each offset: word offs % 4 of the run at counter offs // 4
        u0, u1, u2, u3 = tl.rand4x(seed, counter)
        u_word = tl.where(word < 2, tl.where(word == 0, u0, u1), tl.where(word == 2, u2, u3))
        g0, g1, g2, g3 = tl.randn4x(seed, counter)
        g_word = tl.where(word < 2, tl.where(word == 0, g0, g1), tl.where(word == 2, g2, g3))
        i0, i1, i2, i3 = tl.randint4x(seed, counter)
        i_word = tl.where(word < 2, tl.where(word == 0, i0, i1), tl.where(word == 2, i2, i3))
        tl.store(u + offs, u_word, mask=inside)
        tl.store(g + offs, g_word, mask=inside)
        tl.store(bits + offs, i_word, mask=inside)

    def run(m: int, n: int, seed: int):
        u, g = torch.zeros(m, n), torch.zeros(m, n)
        bits = torch.zeros(m, n, dtype=torch.int32)
        streams[(triton.cdiv(m, 4), triton.cdiv(n, 32))](u, g, bits, seed, m, n, BM=4, BN=32)
        return u.numpy(), g.numpy(), bits.numpy()

    yield run
    if previous is None:
        del os.environ["TRITON_INTERPRET"]
    else:
        os.environ["TRITON_INTERPRET"] = previous


@pytest.mark.parametrize(
    ("m", "n", "seed"), [(1, 1, 0), (5, 37, 1234), (17, 100, -5), (3, 64, 2**31 - 1)]
)
def test_streams_match_tritons_interpreter(kernels, triton_interpreter, m, n, seed):
    u, g, bits = _streams(kernels, m, n, seed)
    tu, tg, tbits = triton_interpreter(m, n, seed)
    np.testing.assert_array_equal(bits, tbits)
    np.testing.assert_array_equal(u, tu)
    # Both compute Box-Muller in f32; Triton's interpreter calls numpy's f32 log and cos,
    # tilec's rounds f64 results once, so the two may differ by an ulp or two.
    np.testing.assert_allclose(g, tg, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(("m", "n"), [(1, 1), (17, 31), (130, 257)])
def test_dropout_example_is_exactly_its_reference(m, n):
    from tilec.interp.runner import load_reference, reference_path

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    path = os.path.join(root, "examples", "dropout.tile")
    reference = load_reference(reference_path(path))
    x = np.random.default_rng(m * n).standard_normal((m, n)).astype(np.float32) + 2.0
    y = np.full_like(x, np.nan)
    p, seed = np.float32(0.3), 77
    run_kernel(tilec.compile(path), "dropout", [x, y, p, seed], tile_sizes={"M": 8, "N": 64})
    np.testing.assert_array_equal(y, reference.dropout(x, y, p, seed))
    if m * n > 1000:  # the kept fraction is 1 - p (sd 0.003 here)
        assert abs(np.mean(y != 0) - 0.7) < 0.02


def test_the_dropout_suite_row_checks_what_a_dropout_is(monkeypatch, tmp_path):
    torch = pytest.importorskip("torch")
    from tilec.benchmarks import suite, suite_core

    monkeypatch.setattr(suite_core, "DEVICE", "cpu")
    monkeypatch.setattr(
        suite.Context,
        "compiled",
        lambda self, f, inputs: suite.Implementation("torch.compile", None, missing="off"),
    )
    context = suite.Context(sets=lambda make, size: [make(), make()], examples=tmp_path)
    torch.manual_seed(0)
    case = suite.WORKLOADS["dropout"].build((256, 512), context)
    (x,) = case.sets[0]
    assert case.expected(torch.nn.functional.dropout(x.float(), 0.1).half(), case.rtol)
    assert not case.expected(x, case.rtol)  # nothing dropped
    assert not case.expected(torch.nn.functional.dropout(x.float(), 0.5).half(), case.rtol)
    assert not case.expected(torch.nn.functional.dropout(x.float(), 0.1).half() * 2, case.rtol)


GROUPED = """
@kernel(tile={"M": 2, "N": 512}, warps=4)
def rows(y: f32[M, N], seed: i32):
    for tm, tn in tiles(M, N):
        offs = offsets(tm)[:, None] * N + offsets(tn)[None, :]
        y[tm, tn] = rand(seed, offs)
"""


def _philox_multiplies(facts: str) -> int:
    from tilec.compiler import DEFAULT_PIPELINE

    pipeline = f'assume{{all="{facts}"}},{DEFAULT_PIPELINE}' if facts else DEFAULT_PIPELINE
    program = tilec.compile(GROUPED, target="llvm", arch="sm_90a", pipeline=pipeline)
    return program.llvm.count('call i32 @"llvm.nvvm.mulhi.ui"')


def test_four_offsets_of_a_thread_share_one_philox_run():
    # With the facts (N a multiple of 16, 4 f32 per thread) vectorize proves the thread's four
    # offsets consecutive from a multiple of 4: one Philox run of ten rounds per four elements.
    # Without them every element runs its own: four times the multiplies.
    grouped, alone = _philox_multiplies("aligned,unit,divisible"), _philox_multiplies("")
    assert grouped > 0
    assert alone >= 3.5 * grouped, (grouped, alone)


def test_the_interpreter_catches_a_false_group_promise():
    from tilec.interp.machine import InterpreterError
    from tilec.ir.parser import parse_module

    # Offsets 1, 2, ..., 8: consecutive, but the runs of 4 start at 1 and 5, not multiples of 4.
    module = parse_module(
        """
func @f(%y: !tile.tensor<8xi32>, %seed: i32) {
  %c0 = arith.constant 0 : index
  %one = tile.full 1 : tile<8xi32>
  %iota = tile.iota : tile<8xi32>
  %o = arith.addi %iota, %one : tile<8xi32>
  %r = tile.philox %seed, %o xor 0 {group = 4} : i32, tile<8xi32> -> tile<8xi32>
  tile.store %y[%c0], %r : !tile.tensor<8xi32>, tile<8xi32>
  return
}
"""
    )
    y = np.zeros(8, np.int32)
    with pytest.raises(InterpreterError, match="group = 4 promise"):
        run_kernel(module, "f", [y, 3], grid=(1,))
    (philox_op,) = [op for op in module.walk() if op.name == "tile.philox"]
    del philox_op.attributes["group"]
    run_kernel(module, "f", [y, 3], grid=(1,))  # without the promise the same offsets are fine
    expected = [_python_word(3, o)[0] for o in range(1, 9)]
    np.testing.assert_array_equal(y.view(np.uint32), np.array(expected, np.uint32))


# ---------------------------------------------------------------------------------------------
# Comparisons of rand with a scalar: integer compares of the word with tile.rand_threshold

COMPARISONS = """
def compare(gt: i32[N], ge: i32[N], lt: i32[N], le: i32[N], mirrored: i32[N], p: f32, seed: i32):
    for tn in tiles(N):
        u = rand(seed, offsets(tn))
        gt[tn] = where(u > p, 1, 0)
        ge[tn] = where(u >= p, 1, 0)
        lt[tn] = where(u < p, 1, 0)
        le[tn] = where(u <= p, 1, 0)
        mirrored[tn] = where(p < u, 1, 0)
"""


def _stream_uniforms(seed: int, n: int) -> np.ndarray:
    return np.array([_python_uniform(_python_word(seed, o)[0]) for o in range(n)], np.float32)


def test_comparisons_of_rand_with_a_scalar_become_word_compares():
    program = tilec.compiler.compile_source(
        COMPARISONS, "compare.tile", pipeline="canonicalize,cse"
    )
    text = str(program.module)
    assert text.count("tile.rand_threshold") == 4, text  # `p < u` is `u > p`: one threshold
    assert "arith.cmpf" not in text and "arith.mulf" not in text, text


def test_comparisons_of_rand_with_a_scalar_keep_their_results():
    # The rewritten kernel against numpy's comparisons of the uniforms, for p where they are
    # hardest: signed zeros, the ends of [0, 1) and beyond, NaN, and the stream's own values
    # and their neighbours (where > and >= differ).
    program = tilec.compiler.compile_source(COMPARISONS, "compare.tile", pipeline="canonicalize")
    n, seed = 128, 11
    stream = _stream_uniforms(seed, n)
    special = [0.0, -0.0, 1.0, 0.1, -1.0, 2.0, np.inf, -np.inf, np.nan, 1e-45]
    ties = stream[:6]
    ps = [*np.float32(special), *ties, *np.nextafter(ties, np.float32(2))]
    ps += list(np.nextafter(ties, np.float32(-1)))
    for p in ps:
        outputs = [np.zeros(n, np.int32) for _ in range(5)]
        run_kernel(program, "compare", [*outputs, p, seed], tile_sizes={"N": 64})
        expected = [stream > p, stream >= p, stream < p, stream <= p, p < stream]
        for got, want in zip(outputs, expected):
            np.testing.assert_array_equal(got, want.astype(np.int32), err_msg=f"p = {p!r}")


def test_a_constant_threshold_folds():
    source = COMPARISONS.replace("p: f32, ", "").replace(" p", " 0.25").replace("(p ", "(0.25 ")
    program = tilec.compiler.compile_source(source, "compare.tile", pipeline="canonicalize")
    text = str(program.module)
    assert "tile.rand_threshold" not in text and "arith.cmpf" not in text, text
    # The thresholds as constants: rand(y) > 0.25 from magnitude 2^29 + 96 on, >= from 2^29 + 33
    # (rand(y) is 2^-31 times the f32 below f32(y)).
    assert "536871007" in text and "536870944" in text, text


@pytest.fixture(scope="module")
def host_threshold():
    """predicate -> p -> t: the lowering's `rand_threshold`, compiled for this CPU."""
    import contextlib
    import ctypes

    import llvmlite.binding as llvm
    from llvmlite import ir

    from tilec.lowering.random import rand_threshold

    with contextlib.suppress(RuntimeError):  # llvmlite >= 0.44 initializes itself
        llvm.initialize()
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    module = ir.Module(name="rand_threshold_on_the_host")
    f32, i32, i64 = ir.FloatType(), ir.IntType(32), ir.IntType(64)
    for predicate in RAND_PREDICATES:
        signature = ir.FunctionType(ir.VoidType(), [f32.as_pointer(), i32.as_pointer(), i64])
        fn = ir.Function(module, signature, predicate)
        entry, loop, done = (fn.append_basic_block(n) for n in ("entry", "loop", "done"))
        b = ir.IRBuilder(entry)
        b.branch(loop)
        b.position_at_end(loop)
        i = b.phi(i64)
        i.add_incoming(ir.Constant(i64, 0), entry)
        p = b.load(b.gep(fn.args[0], [i]))
        b.store(rand_threshold(b, p, predicate), b.gep(fn.args[1], [i]))
        following = b.add(i, ir.Constant(i64, 1))
        i.add_incoming(following, loop)
        b.cbranch(b.icmp_signed("<", following, fn.args[2]), loop, done)
        b.position_at_end(done)
        b.ret_void()
    parsed = llvm.parse_assembly(str(module))
    parsed.verify()
    machine = llvm.Target.from_default_triple().create_target_machine()
    engine = llvm.create_mcjit_compiler(parsed, machine)
    engine.finalize_object()
    c_signature = ctypes.CFUNCTYPE(
        None, ctypes.POINTER(ctypes.c_float), ctypes.POINTER(ctypes.c_int32), ctypes.c_int64
    )

    def run(predicate: str, p: np.ndarray) -> np.ndarray:
        p = np.ascontiguousarray(p, np.float32)
        out = np.empty(p.shape, np.int32)
        fn = c_signature(engine.get_function_address(predicate))
        fn(
            p.ctypes.data_as(ctypes.POINTER(ctypes.c_float)),
            out.ctypes.data_as(ctypes.POINTER(ctypes.c_int32)),
            p.size,
        )
        return out

    run.engine = engine  # kept alive with the functions
    return run


def _is_the_cut(predicate: str, p: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Whether t is the largest magnitude for which `rand pred p` fails (ogt, oge) or holds
    (olt, ole), -1 for none: the magnitudes up to t are inside and t + 1 is not (rand is
    non-decreasing in the magnitude, so that decides it)."""
    compare = {"ogt": np.greater, "oge": np.greater_equal, "olt": np.less, "ole": np.less_equal}
    compare = compare[predicate]
    holds_is_inside = predicate in ("olt", "ole")

    def inside(y: np.ndarray) -> np.ndarray:
        return compare(rand_of_words(y), p) == holds_is_inside

    t = t.astype(np.int64)
    top = 2**31 - 1
    low_ok = np.where(t == -1, ~inside(np.zeros_like(t)), inside(np.clip(t, 0, top)))
    high_ok = (t == top) | ~inside(np.clip(t + 1, 0, top))
    return low_ok & high_ok


def test_the_scale_is_what_the_threshold_formula_assumes():
    # The lowering's closed form rests on RAND_SCALE = 2^-31 (1 - 2^-24) in f32.
    assert np.float32(RAND_SCALE) == np.float32(2.0**-31 * (1 - 2.0**-24))
    y = np.arange(0, 2**31, 4099, dtype=np.int64)  # rand is non-decreasing in the magnitude
    assert (np.diff(rand_of_words(y)) >= 0).all()


@pytest.mark.parametrize("predicate", RAND_PREDICATES)
def test_the_lowered_threshold_is_its_definition(host_threshold, predicate):
    # Against the definition's bisection at the hard points, then the cut's defining property
    # at every 61st f32 from 0 to 1.125 of either sign (35 million p).
    hard = np.array(
        [0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, -np.nan, 1e-45, 1e-40, 0.1, 0.5, 3e38],
        np.float32,
    )
    got = host_threshold(predicate, hard)
    for p, t in zip(hard, got):
        assert t == rand_threshold(float(p), predicate), (predicate, p)
    bits = np.arange(0, 0x3F900000, 61, dtype=np.int64).astype(np.int32)
    for sign in (0, -(2**31)):
        p = (bits | np.int32(sign)).view(np.float32)
        ok = _is_the_cut(predicate, p, host_threshold(predicate, p))
        assert ok.all(), (predicate, p[~ok][:5])


def _sass_opcodes(ptx: str) -> list[str]:
    """The opcodes of the kernel's SASS on sm_90a (ptxas and cuobjdump on the CPU), in order."""
    import re
    import subprocess
    import tempfile

    from tests.unit.test_warp_specialize import _cuobjdump
    from tilec.lowering.ptxas import assemble_cubin, find_ptxas

    tool = _cuobjdump()
    if find_ptxas() is None or tool is None:
        pytest.skip("needs ptxas and cuobjdump")
    cubin, _ = assemble_cubin(ptx, "sm_90a")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        sass = subprocess.run([tool, "-sass", f.name], capture_output=True, text=True).stdout
    pattern = re.compile(r"^\s+/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\w+\s+)?(\S+)(.*);", re.M)
    return [op + rest for op, rest in pattern.findall(sass)]


def test_dropout_f16_sass_holds_only_the_work_an_element_needs():
    # The suite's dropout_f16 (8192 x 8192 f16, 16 elements a thread): per element the
    # comparison with p is two integer compares (no I2F, multiply or float compare), two
    # results round to f16 in one F2FP and go to the store as its register (no F2F, PRMT or
    # shift), and the Philox rounds xor the key into the seed-only words once per block, so no
    # key word is moved from a uniform register per run (before: 13 such moves, now only the
    # addresses' and p's).
    from tilec.jit import load_kernel

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    kernel = load_kernel(os.path.join(root, "examples", "dropout.tile"), "dropout_f16")
    x = np.zeros((8192, 8192), np.float16)
    ptx = kernel.compile_for(x, x, np.float32(0.1), np.int32(1234), arch="sm_90a").ptx
    sass = _sass_opcodes(ptx)
    names = [s.split()[0] for s in sass]
    assert not any(n.startswith(("I2F", "F2F.F16")) for n in names), names
    assert names.count("F2FP.F16.F32.PACK_AB") == 8 and "PRMT" not in names, names
    assert names.count("FSETP.GT.AND") == 0 and names.count("HADD2.F32") == 16, names
    moves = [s for s in sass if s.startswith("IMAD.U32") and "RZ, RZ, UR" in s]
    assert len(moves) <= 5, moves
    # ten rounds of 4 runs, less the first's folds (74 with the grid in declared order, M
    # first; tiling's inner_first puts N first, along the rows, and ptxas folds two more)
    assert names.count("IMAD.WIDE.U32") == 72
