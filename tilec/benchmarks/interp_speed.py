"""How fast the reference interpreter runs a kernel: matmul at 512³ with 64×64×64 tiles.

    python -m tilec.benchmarks.interp_speed [--size 512] [--tile 64] [--repeat 5] [--json OUT]

Compiles `examples/matmul.tile`'s kernel (from its source text, so the benchmark does not need
the repository's examples folder), runs it in the interpreter on random f16 inputs, checks the
result against numpy, and prints the median of `--repeat` runs. Target (issue #4): ≤ 2 s on
the CI machine (2 cores).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time

import numpy as np

import tilec
from tilec.interp import prepare_launch

MATMUL = """
def matmul(a: f16[M, K], b: f16[K, N], c: f16[M, N]):
    for tm, tn in tiles(M, N):
        acc = zeros([tm, tn], f32)
        for tk in tiles(K):
            acc += a[tm, tk] @ b[tk, tn]
        c[tm, tn] = acc
"""


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=512, help="M = N = K (default 512)")
    parser.add_argument("--tile", type=int, default=64, help="BM = BN = BK (default 64)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args(argv)

    program = tilec.compile(MATMUL)
    rng = np.random.default_rng(0)
    n = args.size
    a = rng.uniform(-1, 1, (n, n)).astype(np.float16)
    b = rng.uniform(-1, 1, (n, n)).astype(np.float16)
    c = np.zeros((n, n), np.float16)
    tiles = {"M": args.tile, "N": args.tile, "K": args.tile}
    times = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        # Launch preparation (argument checks, binding) is part of what a user waits for.
        prepare_launch(program, "matmul", [a, b, c], tile_sizes=tiles).run()
        times.append(time.perf_counter() - start)
    expected = (a.astype(np.float32) @ b.astype(np.float32)).astype(np.float16)
    # f32 sums in another order: the f16 results may differ in the last bit.
    assert np.allclose(c, expected, rtol=2e-3, atol=2e-3), "the interpreter computed a wrong c"
    median = statistics.median(times)
    figures = {
        "size": n,
        "tile": args.tile,
        "median_s": median,
        "runs_s": times,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "machine": platform.machine(),
    }
    print(
        f"interpreting matmul {n}x{n}x{n}, tiles {args.tile}x{args.tile}x{args.tile}: "
        f"{median:.3f} s (median of {args.repeat})"
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=2)
    return figures


if __name__ == "__main__":
    main()
