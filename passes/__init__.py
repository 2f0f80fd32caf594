"""Passes over tilec IR (imported as `tilec.passes`): each module is one pass."""

from tilec.passes import (  # noqa: F401  (registers the passes)
    accumulate_atomics,
    align_rows,
    assign_layouts,
    assume,
    canonicalize,
    cse,
    dce,
    defer_reduction,
    fold_padding,
    hoist_scale,
    mask_bounds,
    pipeline,
    precision,
    privatize_atomics,
    smem_placement,
    specialize,
    split_reduction,
    tiling,
    transpose_dot,
    vectorize,
)
