# A kernel written in Python with @tilec.jit has the same IR as in a .tile file; its
# locations are lines and columns of this .py file, and its options are pinned attributes.
# RUN: %python %s | FileCheck %s

from __future__ import annotations

import tilec
from tilec.ir.printer import print_op


class Holder:
    # CHECK-LABEL: func @scale(%x: !tile.tensor<Nxf32>, %y: !tile.tensor<Nxf32>, %alpha: f32)
    # CHECK-SAME: tilec.pinned_tiles = {{\[\[}}"BN", 64{{\]\]}}, tilec.num_warps = 2} {
    # CHECK: %BN = tile.symbol "BN" loc("{{.*}}jit_kernel.py":[[# @LINE + 5]]:5)
    # CHECK: tile.program_id 0 loc("{{.*}}jit_kernel.py":[[# @LINE + 5]]:13)
    # CHECK: %[[X:.*]] = tile.load %x[%tn] {{.*}} loc("{{.*}}jit_kernel.py":[[# @LINE + 6]]:21)
    # CHECK-NEXT: tile.splat %alpha {{.*}} loc("{{.*}}jit_kernel.py":[[# @LINE + 5]]:29)
    @tilec.jit(tile={"N": 64}, warps=2)
    def scale(x: f32[N], y: f32[N], alpha: f32):
        for tn in tiles(N):
            # A comment inside the kernel.
            y[tn] = x[tn] * alpha


print(print_op(Holder.scale.ir, print_locations=True))
