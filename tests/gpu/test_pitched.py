"""Pitched copies at launch (`tilec.runtime.pitched`): a GEMM operand whose rows are not 16
bytes apart (K, M or N odd) is copied into a buffer whose rows are, and the kernel compiled for
the copy takes TMA -- in every operand layout, against torch; with `pitch_operands=False` the
same results from the element-copy path; an operand already 16-byte aligned is not copied."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tilec.jit import load_kernel
from tilec.runtime.pitched import PITCH_REUSE

pytestmark = pytest.mark.gpu

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _operands(layout: str, m: int, n: int, k: int):
    torch.manual_seed(m * 7 + n * 3 + k)
    a = torch.randn(*((m, k) if layout[0] == "n" else (k, m)), device="cuda", dtype=torch.float16)
    b = torch.randn(*((k, n) if layout[1] == "n" else (n, k)), device="cuda", dtype=torch.float16)
    ref = (a if layout[0] == "n" else a.t()).float() @ (b if layout[1] == "n" else b.t()).float()
    return a, b, ref


@pytest.mark.parametrize("layout", ["nn", "nt", "tn", "tt"])
@pytest.mark.parametrize("m, n, k", [(1001, 3001, 1999), (257, 129, 77)])
def test_odd_rows_are_copied_pitched_and_the_product_is_torchs(layout, m, n, k):
    a, b, ref = _operands(layout, m, n, k)
    gemm = load_kernel(EXAMPLES / "gemm_layouts.tile", f"gemm_{layout}")
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
    gemm(a, b, c)
    torch.cuda.synchronize()
    assert torch.allclose(c.float(), ref, rtol=2e-2, atol=0.25)
    # Which operands had rows a 16-byte copy cannot reach (a stored [., k] when k is odd...)
    # and are read again across more than 256 of the other operand's rows or columns
    odd = {
        "a": (k if layout[0] == "n" else m) % 8 != 0 and n > PITCH_REUSE,
        "b": (n if layout[1] == "n" else k) % 8 != 0 and m > PITCH_REUSE,
    }
    assert set(gemm.pitched_copies) == {name for name, is_odd in odd.items() if is_odd}
    (launcher,) = gemm._launchers.values()
    if m >= 1000:  # every operand now has 16-byte rows: the TMA unit copies the tiles
        assert "cp.async.bulk.tensor" in launcher.ptx
    # The original operands are untouched, and the element-copy path agrees.
    plain = load_kernel(EXAMPLES / "gemm_layouts.tile", f"gemm_{layout}", pitch_operands=False)
    c2 = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
    plain(a, b, c2)
    torch.cuda.synchronize()
    assert plain.pitched_copies == {}
    assert torch.allclose(c2.float(), ref, rtol=2e-2, atol=0.25)


def test_a_view_at_an_odd_address_is_copied_and_an_aligned_one_is_not():
    base = torch.randn(513 * 256 + 3, device="cuda", dtype=torch.float16)
    a = base[3:].view(513, 256)[:, :256]  # rows 512 bytes apart, the first at 6 bytes past 16
    b = torch.randn(256, 384, device="cuda", dtype=torch.float16)
    gemm = load_kernel(EXAMPLES / "gemm_layouts.tile", "gemm_nn")
    c = torch.empty(513, 384, device="cuda", dtype=torch.float16)
    gemm(a, b, c)
    torch.cuda.synchronize()
    assert set(gemm.pitched_copies) == {"a"}
    assert torch.allclose(c.float(), a.float() @ b.float(), rtol=2e-2, atol=0.25)
    gemm.pitched_copies.clear()
    gemm(a.clone(), b, c)  # (contiguous already: .contiguous() would be the same view)
    assert gemm.pitched_copies == {}


def test_later_calls_see_the_operands_new_values():
    """The buffer is reused: each call copies again (no fast path remembers a pitched call)."""
    gemm = load_kernel(EXAMPLES / "gemm_layouts.tile", "gemm_nt")
    a, b, _ = _operands("nt", 300, 200, 101)
    c = torch.empty(300, 200, device="cuda", dtype=torch.float16)
    for scale in (1.0, -2.0, 0.5):
        gemm(a * scale, b, c)
        torch.cuda.synchronize()
        ref = (a * scale).float() @ b.t().float()
        assert torch.allclose(c.float(), ref, rtol=2e-2, atol=0.25)


def test_a_weight_read_once_is_not_copied():
    """16 tokens against an [N, K] weight with K odd: the product reads the weight once, so
    the copy (a read and a write of it) would cost more than it saves; the tokens are copied."""
    gemm = load_kernel(EXAMPLES / "gemm_layouts.tile", "gemm_nt")
    a, b, ref = _operands("nt", 16, 4000, 1001)
    c = torch.empty(16, 4000, device="cuda", dtype=torch.float16)
    gemm(a, b, c)
    torch.cuda.synchronize()
    assert set(gemm.pitched_copies) == {"a"}
    assert torch.allclose(c.float(), ref, rtol=2e-2, atol=0.25)


@pytest.mark.parametrize("z, m, n, k", [(4, 300, 513, 77), (3, 1001, 1001, 999)])
def test_a_batch_of_odd_rows_is_copied_whole_and_the_product_is_torchs(z, m, n, k):
    """bmm's [Z, M, K] and [Z, K, N], contiguous: each copied as the rows of all its
    matrices (`flat_rows`); a view whose batches are apart is read where it is."""
    torch.manual_seed(z + m + n + k)
    a = torch.randn(z, m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(z, k, n, device="cuda", dtype=torch.float16)
    bmm = load_kernel(EXAMPLES / "bmm.tile")
    c = torch.full((z, m, n), float("nan"), device="cuda", dtype=torch.float16)
    bmm(a, b, c)
    torch.cuda.synchronize()
    assert set(bmm.pitched_copies) == {"a", "b"}
    assert torch.allclose(c.float(), a.float() @ b.float(), rtol=2e-2, atol=0.25)
    bmm.pitched_copies.clear()
    wide = torch.randn(z, m + 5, k, device="cuda", dtype=torch.float16)
    view = wide[:, :m, :]  # each matrix 5 rows short of the next: no single copy
    bmm(view, b, c)
    torch.cuda.synchronize()
    assert set(bmm.pitched_copies) == {"b"}
    assert torch.allclose(c.float(), view.float() @ b.float(), rtol=2e-2, atol=0.25)
