"""What BucketedDDP's bf16 gradient compression costs in accuracy: the loss, step by step, against fp32 all-reduce.

Usage (repository root; GPUs: NCCL, one rank per GPU; or --device cpu: gloo)::

    PYTHONPATH=packages/flashattn2/src:packages/ddp/src:packages/zero1/src:packages/benchkit/src \
        python packages/benchkit/scripts/compression_loss.py --nproc 2 --size small --steps 200 --out loss.json

Two runs on the same ranks from the same initialization and batches (each rank
trains on a fixed batch of its own, identical in both runs; bf16 autocast,
AdamW fused on CUDA, BucketedDDP with 25 MiB buckets): ``compress_bf16=False``,
then ``True``. Rank 0 records every step's loss; the script prints the largest
absolute and relative difference between the two runs and the step where it
occurred.
"""

from __future__ import annotations

import argparse
import json

import torch

from benchkit.model import model_config
from benchkit.ranks import rank_device, run_on_ranks
from benchkit.training import Trainer, adamw_options
from benchkit.workload import Workload
from ddp import BucketedDDP


def losses(rank: int, world_size: int, size: str, steps: int, context_length: int, device_type: str) -> dict:
    device = rank_device(device_type)
    result = {}
    for compress in (False, True):
        base = Workload(model_config(size, context_length), batch_size=4, device=device, precision="bf16", seed=rank)
        wrapper = BucketedDDP(base.model, bucket_size_mb=25, compress_bf16=compress)
        params = list(base.model.parameters())
        optimizer = torch.optim.AdamW(params, **adamw_options(params))
        trainer = Trainer(base.model, optimizer, base.batches, precision="bf16", wrapper=wrapper, set_to_none=False)
        result["bf16" if compress else "fp32"] = [trainer.step() for _ in range(steps)]
        del base, wrapper, trainer, optimizer
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--size", default="small")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--context-length", type=int, default=512)
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--timeout-s", type=float, default=600)
    parser.add_argument("--out", help="write both loss curves and the differences as JSON here")
    args = parser.parse_args()
    runs = run_on_ranks(
        losses,
        nproc=args.nproc,
        device_type=args.device,
        timeout_s=args.timeout_s,
        args=(args.size, args.steps, args.context_length, args.device),
    )
    if runs is None:  # not rank 0 under torchrun
        return
    fp32, bf16 = runs[0]["fp32"], runs[0]["bf16"]
    differences = [abs(a - b) for a, b in zip(fp32, bf16)]
    worst = max(range(len(differences)), key=differences.__getitem__)
    summary = {
        "size": args.size,
        "ranks": args.nproc,
        "steps": args.steps,
        "context_length": args.context_length,
        "max_abs_loss_difference": differences[worst],
        "at_step": worst,
        "max_rel_loss_difference": max(d / abs(a) for d, a in zip(differences, fp32)),
        "final_loss_fp32": fp32[-1],
        "final_loss_bf16": bf16[-1],
    }
    print(json.dumps(summary, indent=1))
    if args.out:
        with open(args.out, "w") as f:
            json.dump({**summary, "loss_fp32": fp32, "loss_bf16": bf16}, f, indent=1)


if __name__ == "__main__":
    main()
