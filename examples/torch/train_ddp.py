"""Train the LLaMA-style decoder of examples/torch/model.py on several ranks with PyTorch's
DistributedDataParallel, every op a tilec operator, and compare its losses step for step with
one process training the same model on the same global batch.

    python -m examples.torch.train_ddp --device cpu --ranks 2 --steps 2 --config tiny  # gloo
    python -m examples.torch.train_ddp --device cuda --steps 50                        # nccl
    torchrun --nproc-per-node 8 -m examples.torch.train_ddp --device cuda --steps 50

Without torchrun the script spawns its ranks itself (`--ranks`, default every GPU on CUDA and
2 on the CPU) on a free port of 127.0.0.1; under torchrun it takes RANK, WORLD_SIZE,
LOCAL_RANK, MASTER_ADDR and MASTER_PORT from the environment. Rank r runs on `cuda:LOCAL_RANK`
over NCCL, or on the CPU over gloo (there the tilec operators run in the reference
interpreter). The named configuration's batch is each rank's; the global batch is that times
the world size, the same rows whatever the world size, and rank r trains on its rows
[r*b:(r+1)*b]. After the distributed run, rank 0 trains the same init on the whole global batch
alone (the single-process reference) and, on CUDA, on one rank's batch alone (tokens/s of one
GPU: the scaling figure).
"""

from __future__ import annotations

import os

# The machines this runs on require NVLink multicast (NVLS) to stay off: NCCL's NVLS
# algorithms, torch's symmetric memory and NVSHMEM would use it otherwise. Set here, before
# torch or NCCL reads them; the ranks this script spawns inherit them.
os.environ["NCCL_NVLS_ENABLE"] = "0"
os.environ["TORCH_SYMM_MEM_DISABLE_MULTICAST"] = "1"
os.environ["NVSHMEM_DISABLE_NVLS"] = "1"

import argparse
import dataclasses
import gc
import json
import socket
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.distributed.fsdp import fully_shard
from torch.nn.parallel import DistributedDataParallel

from examples.torch.model import Config, Decoder
from examples.torch.train import CONFIGS, synthetic_batch, tilec_loss, train

# On the CPU both runs are f32 in the interpreter and differ only in the order gradients are
# summed: each rank sums its own rows, gloo adds the ranks' sums and divides by the world size,
# where the single process sums all rows in one kernel. That is f32 rounding (2^-24 relative),
# carried through a few AdamW steps: losses near 4 moved by at most 3.6e-7 over 10 tiny steps
# on 2 ranks (1.6e-7 on 3, 0 on 1). 1e-5 leaves room for more steps and still catches a wrong
# shard (the first loss moves by 1e-2 or more) or a rank training without the others'
# gradients (8.6e-3 at the second step). AdamW hardly sees the gradients' scale, so a sum of
# the ranks' gradients in place of their mean would pass.
CPU_TOLERANCE = {"atol": 1e-5, "rtol": 1e-5}
# On CUDA, bf16's level: torch.testing.assert_close's default tolerance for bf16 tensors.
CUDA_TOLERANCE = {"atol": 1e-5, "rtol": 1.6e-2}


class TilecLoss(nn.Module):
    """The decoder's loss through the tilec operators, as a forward: DDP prepares its gradient
    reduction in the wrapped module's forward (and FSDP gathers parameters there), and
    Decoder has only `loss`."""

    def __init__(self, decoder: Decoder):
        super().__init__()
        self.decoder = decoder

    def forward(self, ids: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return tilec_loss(self.decoder, ids, targets)


def train_shards(
    module: nn.Module, global_config: Config, steps: int, device: str, lr: float
) -> tuple[list[float], float]:
    """Each step's loss of the global batch (the mean of the ranks' losses: the shards are the
    same size) and the seconds the steps took after the first, the slowest rank's."""
    rank, world = dist.get_rank(), dist.get_world_size()
    per_rank = global_config.batch // world
    rows = slice(rank * per_rank, (rank + 1) * per_rank)
    optimizer = torch.optim.AdamW(module.parameters(), lr=lr, foreach=False)
    losses: list[float] = []
    start = 0.0
    for step in range(steps):
        if step == 1:  # the first step compiles
            _synchronize(device)
            dist.barrier()
            start = time.perf_counter()
        ids, targets = synthetic_batch(global_config, step, device)
        loss = module(ids[rows], targets[rows])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    _synchronize(device)
    dist.barrier()
    seconds = time.perf_counter() - start if steps > 1 else float("nan")
    summed = torch.tensor([*losses, seconds], dtype=torch.float64, device=device)
    slowest = summed[-1:].clone()
    dist.all_reduce(summed[:-1])
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    return (summed[:-1] / world).tolist(), slowest.item()


def _synchronize(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


def train_distributed(
    args: argparse.Namespace, config: Config, global_config: Config, device: str, local_rank: int
) -> tuple[list[float], float]:
    """Wrap the same init on every rank in DDP (or fully_shard) and train it on the rank's
    shards: `train_shards`. The wrapped module lives only here (`run_rank` says why)."""
    torch.manual_seed(args.seed)  # the same init on every rank (and DDP broadcasts rank 0's)
    module = TilecLoss(Decoder(config).to(device))
    if args.fsdp:
        # One group for the whole model: Decoder.loss reads every block's parameters itself
        # (the blocks have no forward), so only the root's forward can gather them.
        fully_shard(module)
    else:
        module = DistributedDataParallel(
            module, device_ids=[local_rank] if device != "cpu" else None
        )
    return train_shards(module, global_config, args.steps, device, args.lr)


def run_rank(args: argparse.Namespace) -> dict | None:
    """One rank's part, its place taken from the environment (torchrun's variables, or those
    `main` sets in the ranks it spawns). Rank 0 returns the figures; the others None."""
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ["LOCAL_RANK"])
    on_cuda = args.device == "cuda"
    device = f"cuda:{local_rank}" if on_cuda else "cpu"
    if on_cuda:
        torch.cuda.set_device(local_rank)
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    else:  # the ranks share the cores
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // int(os.environ["LOCAL_WORLD_SIZE"])))
    config = CONFIGS[args.config or ("h200" if on_cuda else "tiny")]
    global_config = dataclasses.replace(config, batch=config.batch * world)
    dist.init_process_group(
        "nccl" if on_cuda else "gloo",
        rank=rank,
        world_size=world,
        device_id=torch.device(device) if on_cuda else None,
    )
    # DDP's reducer holds the process group too and, when it is the last holder, frees it with
    # the GIL held: gloo's destructor then joins its worker threads, which may be waiting for
    # the GIL to free their last collective's tensors -- a hang at exit, now and then. So the
    # group is held here until the module is gone, and let go last through Python's
    # reference, whose release lets go of the GIL.
    world_group = dist.group.WORLD
    try:
        losses, seconds = train_distributed(args, config, global_config, device, local_rank)
        gc.collect()  # the wrapped module, should a reference cycle keep it
    finally:
        dist.destroy_process_group()
        del world_group
    if rank != 0:
        return None
    result = {
        "device": args.device,
        "backend": "nccl" if on_cuda else "gloo",
        "wrapper": "fsdp2" if args.fsdp else "ddp",
        "world_size": world,
        "config": dataclasses.asdict(config),
        "per_rank_batch": config.batch,
        "global_batch": global_config.batch,
        "steps": args.steps,
        "distributed_losses": losses,
        "tokens_per_second": {
            "distributed": global_config.batch * config.seq * max(args.steps - 1, 1) / seconds
        },
    }
    compare_with_one_process(result, config, global_config, args, device)
    _print(result)
    return result


def compare_with_one_process(
    result: dict, config: Config, global_config: Config, args: argparse.Namespace, device: str
) -> None:
    """Add to `result` the losses of one process training the same init on the whole global
    batch, whether they agree with the distributed run's, and on CUDA the tokens/s of one GPU
    at one rank's batch: what the world's GPUs would do if they exchanged nothing."""
    torch.manual_seed(args.seed)  # the batch is no part of the init: the same weights
    single = Decoder(global_config).to(device)
    losses, seconds = train(single, tilec_loss, args.steps, device, args.lr)
    tolerance = CUDA_TOLERANCE if args.device == "cuda" else CPU_TOLERANCE
    differences = [abs(a - b) for a, b in zip(result["distributed_losses"], losses)]
    rates = result["tokens_per_second"]
    timed_steps = max(args.steps - 1, 1)
    result.update(
        single_losses=losses,
        largest_difference=max(differences),
        tolerance=tolerance,
        losses_agree=all(
            d <= tolerance["atol"] + tolerance["rtol"] * abs(b) for d, b in zip(differences, losses)
        ),
    )
    rates["single_global_batch"] = global_config.batch * config.seq * timed_steps / seconds
    if args.device == "cuda":
        torch.manual_seed(args.seed)
        _, seconds = train(Decoder(config).to(device), tilec_loss, args.steps, device, args.lr)
        rates["one_gpu"] = config.batch * config.seq * timed_steps / seconds
        result["scaling"] = rates["distributed"] / (result["world_size"] * rates["one_gpu"])


def _print(result: dict) -> None:
    world, wrapper = result["world_size"], result["wrapper"]
    print(
        f"{wrapper.upper()} over {world} rank(s) ({result['backend']}), global batch "
        f"{result['global_batch']} ({result['per_rank_batch']} a rank), against one process "
        f"on the global batch"
    )
    print(f"{'step':>4} {wrapper:>12} {'single':>12} {'difference':>11}")
    for step, (a, b) in enumerate(zip(result["distributed_losses"], result["single_losses"])):
        print(f"{step:>4} {a:>12.6f} {b:>12.6f} {abs(a - b):>11.2e}")
    tolerance = result["tolerance"]
    verdict = "agree" if result["losses_agree"] else "DISAGREE"
    print(
        f"largest loss difference: {result['largest_difference']:.3e}; the losses {verdict} "
        f"within atol {tolerance['atol']:g}, rtol {tolerance['rtol']:g}"
    )
    rates = result["tokens_per_second"]
    print(f"tokens/s, {wrapper.upper()} on {world} rank(s): {rates['distributed']:,.0f}")
    print(f"tokens/s, one process, global batch: {rates['single_global_batch']:,.0f}")
    if "one_gpu" in rates:
        print(f"tokens/s, one GPU, one rank's batch: {rates['one_gpu']:,.0f}")
        print(f"scaling: {result['scaling']:.2f} of {world} GPUs' worth")


def _spawned_rank(local_rank: int, args: argparse.Namespace, port: int, result_path: str) -> None:
    os.environ.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        RANK=str(local_rank),
        LOCAL_RANK=str(local_rank),
        WORLD_SIZE=str(args.ranks),
        LOCAL_WORLD_SIZE=str(args.ranks),
    )
    result = run_rank(args)
    if result is not None:
        Path(result_path).write_text(json.dumps(result))


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def main(argv: list[str] | None = None) -> dict | None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=None, help="default: 3 on the CPU, 50 on CUDA")
    parser.add_argument(
        "--device",
        choices=("cpu", "cuda"),
        default="cpu",
        help="cpu: gloo, the interpreter; cuda: nccl, each rank on cuda:LOCAL_RANK",
    )
    parser.add_argument(
        "--ranks",
        type=int,
        default=None,
        help="ranks to spawn (default: every GPU on CUDA, 2 on the CPU; torchrun's WORLD_SIZE "
        "when launched by torchrun)",
    )
    parser.add_argument(
        "--config",
        choices=sorted(CONFIGS),
        default=None,
        help="model size and each rank's batch (default: tiny on the CPU, h200 on CUDA)",
    )
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--fsdp", action="store_true", help="FSDP2's fully_shard instead of DDP")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = parser.parse_args(argv)
    if args.steps is None:
        args.steps = 50 if args.device == "cuda" else 3

    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:  # launched by torchrun
        world = int(os.environ["WORLD_SIZE"])
        if args.ranks not in (None, world):
            parser.error(f"--ranks {args.ranks}, but torchrun started {world} ranks")
        os.environ.setdefault("LOCAL_RANK", os.environ["RANK"])
        os.environ.setdefault("LOCAL_WORLD_SIZE", str(world))
        result = run_rank(args)
    else:
        if args.ranks is None:
            args.ranks = torch.cuda.device_count() if args.device == "cuda" else 2
        if args.device == "cuda" and not 1 <= args.ranks <= torch.cuda.device_count():
            parser.error(f"--ranks {args.ranks}, but {torch.cuda.device_count()} GPUs are visible")
        if args.ranks < 1:
            parser.error("--ranks must be at least 1")
        with tempfile.TemporaryDirectory() as scratch:
            result_path = Path(scratch) / "result.json"
            mp.spawn(_spawned_rank, args=(args, _free_port(), str(result_path)), nprocs=args.ranks)
            result = json.loads(result_path.read_text())
    if result is not None and args.json is not None:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return result


if __name__ == "__main__":
    result = main()
    sys.exit(0 if result is None or result["losses_agree"] else 1)
