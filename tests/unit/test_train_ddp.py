"""examples/torch/train_ddp.py on the CPU: two gloo ranks (a real torch.distributed run the
script spawns itself) train the tiny model under DistributedDataParallel and under FSDP2's
fully_shard, every op a tilec operator in the reference interpreter, and their losses are those
of one process training the same init on the same global batch."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

if not (torch.distributed.is_available() and torch.distributed.is_gloo_available()):
    pytest.skip("this torch has no torch.distributed with gloo", allow_module_level=True)

from examples.torch import train_ddp  # noqa: E402


@pytest.mark.parametrize("wrapper", ["ddp", "fsdp2"])
def test_two_gloo_ranks_train_as_one_process_on_the_global_batch(tmp_path, wrapper):
    figures = tmp_path / "ddp.json"
    argv = ["--device", "cpu", "--ranks", "2", "--steps", "2", "--config", "tiny"]
    argv += ["--fsdp"] if wrapper == "fsdp2" else []
    result = train_ddp.main([*argv, "--json", str(figures)])
    assert (result["backend"], result["wrapper"], result["world_size"]) == ("gloo", wrapper, 2)
    assert result["global_batch"] == 2 * result["per_rank_batch"]
    torch.testing.assert_close(
        torch.tensor(result["distributed_losses"]),
        torch.tensor(result["single_losses"]),
        **train_ddp.CPU_TOLERANCE,
    )
    assert result["losses_agree"]
    assert result["distributed_losses"][1] < result["distributed_losses"][0]
    assert json.loads(figures.read_text()) == result
