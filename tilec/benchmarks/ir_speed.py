"""How fast the IR core parses and prints: a generated module of N ops (default 10,000).

    python -m tilec.benchmarks.ir_speed [--ops 10000] [--repeat 5] [--json OUT.json]

The module mixes what kernels contain: scalar and tile arithmetic, loops with iteration
arguments, loads, stores and dots. Prints the median of `--repeat` runs for parse, print
and verify.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time

from tilec.dialects import arith, scf
from tilec.dialects import tile as tile_dialect
from tilec.dialects.builtin import FuncOp, ModuleOp, ReturnOp
from tilec.ir import Block, Builder, Region, parse_module, print_op, verify
from tilec.ir.types import TensorType, TileType, f16, f32, index


def generate_module(num_ops: int) -> ModuleOp:
    """A module with one kernel of about `num_ops` ops."""
    a_type = TensorType(("M", "K"), f16)
    c_type = TensorType(("M", "N"), f32)
    body = Block([a_type, a_type, c_type, f32])
    a, b, c, alpha = body.args
    for arg, name in zip(body.args, ("a", "b", "c", "alpha")):
        arg.name_hint = name
    func = FuncOp.make(sym_name="kernel", body=Region([body]))
    module = ModuleOp.make(body=Region([Block(ops=[func])]))
    bld = Builder.at_end(body)
    acc_t = TileType(("BM", "BN"), f32)
    count = 2
    while count < num_ops:
        zero = bld.create(arith.ConstantOp, value=0, result_types=[index]).result
        one = bld.create(arith.ConstantOp, value=1, result_types=[index]).result
        upper = bld.create(tile_dialect.DimOp, view=a, axis=1).result
        step = bld.create(tile_dialect.SymbolOp, symbol="BK").result
        init = bld.create(tile_dialect.FullOp, value=0.0, result_types=[acc_t]).result
        loop = bld.create(
            scf.ForOp,
            lower=zero,
            upper=upper,
            step=step,
            inits=[init],
            body=Region([Block([index, acc_t])]),
        )
        inner = Builder.at_end(loop.body.block)
        k, acc = loop.body.block.args
        ta = inner.create(
            tile_dialect.LoadOp,
            view=a,
            offsets=[zero, k],
            result_types=[TileType(("BM", "BK"), f16)],
        ).result
        tb = inner.create(
            tile_dialect.LoadOp,
            view=b,
            offsets=[k, zero],
            result_types=[TileType(("BK", "BN"), f16)],
        ).result
        d = inner.create(tile_dialect.DotOp, a=ta, b=tb, acc=acc).result
        inner.create(scf.YieldOp, values=[d])
        x = loop.results[0]
        s = bld.create(tile_dialect.SplatOp, input=alpha, result_types=[acc_t]).result
        for _ in range(8):
            x = bld.create(arith.MulFOp, lhs=x, rhs=s).result
            x = bld.create(arith.AddFOp, lhs=x, rhs=s).result
        bld.create(tile_dialect.StoreOp, view=c, offsets=[zero, one], value=x)
        count += 28
    bld.create(ReturnOp)
    return module


def _median_time(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args(argv)

    module = generate_module(args.ops)
    text = print_op(module)
    num_ops = sum(1 for _ in module.walk())
    parsed = parse_module(text, "generated.tir")
    assert print_op(parsed) == text, "round trip is not exact"
    figures = {
        "ops": num_ops,
        "bytes": len(text),
        "parse_s": _median_time(lambda: parse_module(text, "generated.tir"), args.repeat),
        "print_s": _median_time(lambda: print_op(parsed), args.repeat),
        "verify_s": _median_time(lambda: verify(parsed), args.repeat),
        "python": platform.python_version(),
        "machine": platform.machine(),
    }
    print(f"IR of {num_ops} ops ({len(text) / 1e6:.2f} MB of text), median of {args.repeat}:")
    for key in ("parse_s", "print_s", "verify_s"):
        print(f"  {key[:-2]:<7} {figures[key] * 1e3:8.1f} ms")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=2)
    return figures


if __name__ == "__main__":
    main()
