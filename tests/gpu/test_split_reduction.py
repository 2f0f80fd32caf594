"""Split reductions on the GPU (split-reduction, tilec.runtime.split): column sums of tall
matrices and row sums of few long rows at awkward shapes, against torch, with S chosen at
launch and pinned; repeated launches (the counters must be back at 0 after each), several
streams, and CUDA graph capture. The last test times the split kernels against `x.sum`."""
# ruff: noqa: F821 - kernel bodies use the tile language's names (f32, tiles, M), not Python's

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import tilec
from tilec.jit import load_kernel

pytestmark = pytest.mark.gpu


@tilec.jit
def col_sum(x: f32[M, N], out: f32[N]):
    for tn in tiles(N):
        acc = zeros([tn], f32)
        for tm in tiles(M):
            acc += sum(x[tm, tn], axis=0)
        out[tn] = acc


@tilec.jit
def row_sum(x: f32[M, N], out: f32[M]):
    for tm in tiles(M):
        acc = zeros([tm], f32)
        for tn in tiles(N):
            acc += sum(x[tm, tn], axis=1)
        out[tm] = acc


@tilec.jit(split=7)
def col_sum_pinned(x: f32[M, N], out: f32[N]):
    for tn in tiles(N):
        acc = zeros([tn], f32)
        for tm in tiles(M):
            acc += sum(x[tm, tn], axis=0)
        out[tn] = acc


@tilec.jit(split=1)
def col_sum_unsplit(x: f32[M, N], out: f32[N]):
    for tn in tiles(N):
        acc = zeros([tn], f32)
        for tm in tiles(M):
            acc += sum(x[tm, tn], axis=0)
        out[tn] = acc


@tilec.jit
def col_max(x: f32[M, N], out: f32[N]):
    for tn in tiles(N):
        hi = full([tn], -inf, f32)
        for tm in tiles(M):
            hi = maximum(hi, max(x[tm, tn], axis=0))
        out[tn] = hi


CASES = [
    (col_sum, (100003, 77), 0),
    (col_sum, (100000, 512), 0),
    (col_sum, (7, 1000003), 0),
    (row_sum, (7, 1000003), 1),
    (row_sum, (16, 4 * 1024 * 1024), 1),
    (row_sum, (100003, 77), 1),
    (col_sum_pinned, (100003, 77), 0),
    (col_sum_pinned, (3, 5), 0),  # more splits than iterations: empty chunks add nothing
    (col_sum_unsplit, (100003, 77), 0),
]


def _check(got: torch.Tensor, x: torch.Tensor, axis: int) -> None:
    expected = x.double().sum(axis)
    scale = float(x.abs().double().sum(axis).max()) + 1.0
    err = float((got.double() - expected).abs().max())
    assert err <= 1e-5 * scale, f"max error {err} (scale {scale})"


def _split_count(kernel, x: torch.Tensor, out: torch.Tensor) -> int:
    """The S the launcher chooses for these arguments (on the current stream)."""
    arguments = kernel._checker.convert([x, out])
    launcher = kernel._launchers[kernel._key(arguments)]
    if launcher.split is None:  # not split (split=1): no split axis to ask about
        return 1
    grid = launcher.grid(arguments)
    stream = torch.cuda.current_stream().cuda_stream
    full, _ = launcher.split_launch(grid, arguments.extents, x.get_device(), stream)
    return full[launcher._split_axis]


@pytest.mark.parametrize(("kernel", "shape", "axis"), CASES, ids=lambda c: str(c))
def test_split_reductions_match_torch_and_repeat(kernel, shape, axis):
    torch.manual_seed(0)
    x = torch.rand(shape, device="cuda") - 0.5
    out = torch.full((shape[1 - axis],), float("nan"), device="cuda")
    for _ in range(3):  # the counters must be back at 0 for the next launch
        out.fill_(float("nan"))
        kernel(x, out)
        torch.cuda.synchronize()
        _check(out, x, axis)
    count = _split_count(kernel, x, out)
    if kernel is col_sum_pinned:
        assert count == 7
    if kernel is col_sum_unsplit:
        assert count == 1


def test_tall_column_sums_are_split_across_the_sms():
    x = torch.rand(100003, 77, device="cuda")
    out = torch.empty(77, device="cuda")
    col_sum(x, out)
    torch.cuda.synchronize()
    assert _split_count(col_sum, x, out) > 1


@tilec.jit
def row_logsumexp(x: f32[M, N], out: f32[M]):
    for tm in tiles(M):
        m_i = full([tm], -inf, f32)
        l_i = zeros([tm], f32)
        for tn in tiles(N):
            s = x[tm, tn]
            m_new = maximum(m_i, max(s, axis=1))
            l_i = l_i * exp(m_i - m_new) + sum(exp(s - m_new[:, None]), axis=1)
            m_i = m_new
        out[tm] = m_i + log(l_i)


@tilec.jit(split=5)
def row_logsumexp_pinned(x: f32[M, N], out: f32[M]):
    for tm in tiles(M):
        m_i = full([tm], -inf, f32)
        l_i = zeros([tm], f32)
        for tn in tiles(N):
            s = x[tm, tn]
            m_new = maximum(m_i, max(s, axis=1))
            l_i = l_i * exp(m_i - m_new) + sum(exp(s - m_new[:, None]), axis=1)
            m_i = m_new
        out[tm] = m_i + log(l_i)


@pytest.mark.parametrize(
    ("kernel", "shape"),
    [
        (row_logsumexp, (3, 1000003)),
        (row_logsumexp, (16, 32000)),
        (row_logsumexp, (1000, 77)),  # the rows fill the GPU: S = 1
        (row_logsumexp_pinned, (2, 10007)),
        (row_logsumexp_pinned, (3, 5)),  # more splits than iterations: empty chunks are (-inf, 0)
    ],
    ids=str,
)
def test_split_online_sums_are_rescaled_to_the_combined_maximum(kernel, shape):
    """An online softmax's normalizer split across blocks (split-reduction's rescaled sums):
    each chunk's (maximum, sum) pair brought to the row's maximum in the combine. The rows
    rise along them, so that each chunk's maximum differs and the rescaling matters."""
    torch.manual_seed(0)
    x = torch.randn(shape, device="cuda") * 4 + torch.linspace(0, 30, shape[1], device="cuda")
    out = torch.full((shape[0],), float("nan"), device="cuda")
    for _ in range(3):  # the counters must be back at 0 for the next launch
        out.fill_(float("nan"))
        kernel(x, out)
        torch.cuda.synchronize()
        torch.testing.assert_close(
            out, torch.logsumexp(x.double(), 1).float(), rtol=1e-5, atol=1e-5
        )
    count = _split_count(kernel, x, out)
    if kernel is row_logsumexp_pinned:
        assert count == 5
    elif shape[0] <= 16:
        assert count > 1


# The mean over the middle axis of [B, S, D], as the example writes it.
mid_mean = load_kernel(
    Path(__file__).resolve().parents[2] / "examples" / "seq_mean.tile", "seq_mean"
)


@pytest.mark.parametrize(
    ("shape", "split"),
    [((16, 4096, 1024), None), ((3, 10007, 77), True), ((2, 5, 3), None), ((64, 1000, 768), False)],
    ids=str,
)
def test_a_mean_over_the_middle_axis_splits_its_two_dimensional_tile(shape, split):
    """Pooling over a sequence, x.mean(1) of [B, S, D]: the carried [BB, BD] tile is split
    across blocks where B x D tiles leave SMs idle (each partial tile combined a slot a round),
    and not where they fill the GPU (`split`: whether it must be; None: the launch's choice)."""
    torch.manual_seed(0)
    x = torch.randn(shape, device="cuda")
    out = torch.full((shape[0], shape[2]), float("nan"), device="cuda")
    for _ in range(3):  # the counters must be back at 0 for the next launch
        out.fill_(float("nan"))
        mid_mean(x, out)
        torch.cuda.synchronize()
        torch.testing.assert_close(out, x.double().mean(1).float(), rtol=1e-5, atol=1e-5)
    count = _split_count(mid_mean, x, out)
    if split is not None:
        assert (count > 1) == split, count


def test_max_is_combined_exactly():
    x = torch.randn(100003, 77, device="cuda")
    out = torch.empty(77, device="cuda")
    col_max(x, out)
    torch.cuda.synchronize()
    assert torch.equal(out, x.max(0).values)


def test_launches_on_several_streams_each_have_their_workspace():
    xs = [torch.rand(50000 + 13 * i, 77, device="cuda") for i in range(4)]
    outs = [torch.empty(77, device="cuda") for _ in xs]
    streams = [torch.cuda.Stream() for _ in xs]
    for _ in range(5):
        for x, out, s in zip(xs, outs, streams):
            with torch.cuda.stream(s):
                col_sum(x, out)
    torch.cuda.synchronize()
    for x, out in zip(xs, outs):
        _check(out, x, 0)


def test_cuda_graph_capture_after_a_warm_up_on_the_capturing_stream():
    x = torch.rand(100003, 77, device="cuda")
    out = torch.empty(77, device="cuda")
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        col_sum(x, out)  # makes the workspace of this stream
    stream.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        col_sum(x, out)
    for _ in range(3):
        out.fill_(float("nan"))
        x.copy_(torch.rand_like(x))
        graph.replay()
        torch.cuda.synchronize()
        _check(out, x, 0)


def test_cuda_graph_capture_without_a_workspace_runs_unsplit():
    x = torch.rand(40009, 33, device="cuda")
    out = torch.empty(33, device="cuda")
    col_sum(x, out)  # compiled and loaded outside the capture (on the current stream)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    # A fresh stream of torch's: no workspace for it yet, so S = 1, with no error.
    with torch.cuda.graph(graph, stream=torch.cuda.Stream()):
        col_sum(x, out)
    graph.replay()
    torch.cuda.synchronize()
    _check(out, x, 0)


def _time_ms(fn, repeat: int = 50) -> float:
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(repeat):
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return float(np.median(times))


@pytest.mark.parametrize(
    ("kernel", "shape", "axis"),
    [(col_sum, (100000, 128), 0), (col_sum, (100003, 77), 0), (row_sum, (16, 4 << 20), 1)],
    ids=["col_sum 100000x128", "col_sum 100003x77", "row_sum 16x4M"],
)
def test_split_speed_against_torch_sum(kernel, shape, axis, capsys):
    """Reports the split kernel's time over `x.sum(axis)` (the Stage G target is <= 1.0), and
    checks the mechanism: splitting beats the unsplit kernel by a wide margin."""
    x = torch.rand(shape, device="cuda")
    out = torch.empty(shape[1 - axis], device="cuda")
    ours = _time_ms(lambda: kernel(x, out))
    theirs = _time_ms(lambda: x.sum(axis))
    with capsys.disabled():
        print(f"\n{kernel.name} {shape}: {ours:.4f} ms, x.sum: {theirs:.4f} ms, "
              f"ratio {ours / theirs:.2f} (S = {_split_count(kernel, x, out)})")  # fmt: skip
    if kernel is col_sum:
        unsplit = _time_ms(lambda: col_sum_unsplit(x, out))
        assert ours * 2 < unsplit, f"split {ours:.4f} ms vs unsplit {unsplit:.4f} ms"
