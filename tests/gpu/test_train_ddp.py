"""examples/torch/train_ddp.py on every GPU of the host: one NCCL rank a GPU trains the `small`
model, every op a compiled tilec kernel, under DistributedDataParallel and under FSDP2's
fully_shard, and the losses stay within bf16's tolerance of one GPU training the same init on
the same global batch. Skipped with fewer than two GPUs."""

from __future__ import annotations

import pytest
import torch

from examples.torch import train_ddp

GPUS = torch.cuda.device_count()

pytestmark = pytest.mark.skipif(
    GPUS < 2, reason=f"a multi-GPU run needs at least 2 GPUs; {GPUS} visible"
)


@pytest.mark.parametrize("wrapper", ["ddp", "fsdp2"])
def test_the_tilec_model_trains_on_every_gpu_as_on_one(wrapper):
    argv = ["--device", "cuda", "--config", "small", "--steps", "50"]
    result = train_ddp.main(argv + (["--fsdp"] if wrapper == "fsdp2" else []))
    assert (result["backend"], result["wrapper"], result["world_size"]) == ("nccl", wrapper, GPUS)
    distributed = torch.tensor(result["distributed_losses"])
    torch.testing.assert_close(
        distributed, torch.tensor(result["single_losses"]), **train_ddp.CUDA_TOLERANCE
    )
    assert result["losses_agree"]
    assert distributed[-10:].mean() < distributed[:10].mean()
    assert result["tokens_per_second"]["one_gpu"] > 0 and result["scaling"] > 0
