"""Scratch: BucketedDDP's bucket rule, closed-when-full (the package now) against fits-under-the-cap (before),
beside torch DDP, steps interleaved one by one.

python packages/benchkit/scratch/ab_buckets.py OUT_JSON size batch steps
"""

import copy
import json
import math
import sys

import torch

import ddp.bucketed
from benchkit.devices import free_memory
from benchkit.model import model_config
from benchkit.ranks import run_on_ranks
from benchkit.timing import PhaseTimer
from benchkit.training import Trainer, adamw_options
from benchkit.workload import Workload
from ddp import BucketedDDP

_BYTES_PER_MB = 2**20


def fits_under_cap(params, bucket_size_mb, first_bucket_mb=None, order=None):
    """The rule before: join the bucket only if it stays within the cap."""
    order = list(reversed(range(len(params)))) if order is None else list(order)
    cap_bytes = math.inf if bucket_size_mb is None else bucket_size_mb * _BYTES_PER_MB
    first_cap_bytes = cap_bytes
    if first_bucket_mb is not None and bucket_size_mb is not None:
        first_cap_bytes = min(cap_bytes, first_bucket_mb * _BYTES_PER_MB)
    buckets, bucket_bytes, bucket_kind = [], 0, None
    for index in order:
        param = params[index]
        size = param.numel() * param.element_size()
        kind = (param.dtype, param.device)
        cap = first_cap_bytes if len(buckets) == 1 else cap_bytes
        if buckets and kind == bucket_kind and bucket_bytes + size <= cap:
            buckets[-1].append(index)
            bucket_bytes += size
        else:
            buckets.append([index])
            bucket_bytes = size
            bucket_kind = kind
    return buckets


VARIANTS = ("torch-ddp", "closed-when-full", "fits-under-cap")


def rank_fn(rank, world_size, size, batch, steps):
    device = torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cpu")
    config = model_config(size, 512)
    base = Workload(config, batch_size=batch, device=device, precision="bf16", seed=rank)
    trainers, timers, wrappers = {}, {}, {}
    package_rule = ddp.bucketed.assign_buckets
    for variant in VARIANTS:
        model = copy.deepcopy(base.model)
        if variant == "torch-ddp":
            wrapper = torch.nn.parallel.DistributedDataParallel(
                model, device_ids=[device.index] if device.type == "cuda" else None
            )
        else:
            ddp.bucketed.assign_buckets = fits_under_cap if variant == "fits-under-cap" else package_rule
            wrapper = BucketedDDP(model, 25.0)
        params = list(model.parameters())
        optimizer = torch.optim.AdamW(params, **adamw_options(params))
        trainers[variant] = Trainer(model, optimizer, base.batches, precision="bf16", wrapper=wrapper, set_to_none=False)
        timers[variant] = PhaseTimer(device)
        for _ in range(3):  # the first step's finish rebuilds the buckets, under the rule patched in
            trainers[variant].step("train-step")
        ddp.bucketed.assign_buckets = package_rule
        wrappers[variant] = wrapper
    for i in range(steps):
        for k in range(len(VARIANTS)):
            variant = VARIANTS[(i + k) % len(VARIANTS)]
            trainers[variant].step("train-step", timers[variant])
    out = {}
    for variant in VARIANTS:
        w = wrappers[variant]
        out[variant] = {
            "buckets": len(w._buckets) if hasattr(w, "_buckets") else None,
            "phases_ms": {k: [s * 1e3 for s in v] for k, v in timers[variant].samples.items()},
            "step_ms": [s * 1e3 for s in timers[variant].step_totals()],
        }
    del trainers, wrappers
    free_memory(device)
    return out


if __name__ == "__main__":
    path, size, batch, steps = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    cuda = torch.cuda.is_available()
    results = run_on_ranks(
        rank_fn,
        nproc=torch.cuda.device_count() if cuda else 2,
        device_type="cuda" if cuda else "cpu",
        timeout_s=400,
        args=(size, batch, steps),
    )
    json.dump({"size": size, "batch": batch, "ranks": results}, open(path, "w"), indent=1)
    import statistics

    for variant in VARIANTS:
        r0 = results[0][variant]
        s = r0["step_ms"]
        ph = {k: round(statistics.median(v), 1) for k, v in r0["phases_ms"].items()}
        print(f"{size} b{batch} {variant:18s} buckets {r0['buckets']}  step median {statistics.median(s):.1f} mean {statistics.mean(s):.1f} std {statistics.pstdev(s):.1f}  phases median {ph}")
    t = statistics.median(results[0]["torch-ddp"]["step_ms"])
    for variant in VARIANTS[1:]:
        print(f"  {variant}: median x torch {statistics.median(results[0][variant]['step_ms']) / t:.3f}")
