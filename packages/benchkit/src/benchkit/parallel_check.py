"""Data-parallel training checked against one process: ``ddp.BucketedDDP`` with AdamW and with
ZeRO-1 (``zero1.ShardedOptimizer``), the third section of ``benchkit run``.

Every rank trains its slice of a global batch under ``BucketedDDP``; its parameters
are compared with single-process training on the whole batch
(:func:`compare_parameters`), from one initialization. :func:`parallel_plan`
picks how for the machine: one NCCL process per GPU, the small model in float32,
with at least 2 GPUs (:data:`CUDA_PARALLEL`); otherwise 2 gloo processes on the
CPU with the tiny model in float64 (:data:`CPU_PARALLEL`). :func:`parallel_checks`
runs it and returns a row per setup with ``ok``.

Example::

    import torch
    from benchkit.parallel_check import parallel_checks, parallel_plan

    plan = parallel_plan(torch.device("cpu"))
    rows = parallel_checks(plan)  # 2 gloo processes, a few seconds
    assert all(row["ok"] for row in rows)
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterable
from typing import Any

import torch

from benchkit.model import TransformerLM, model_config, random_batch
from benchkit.ranks import backend_for, rank_device
from benchkit.training import Trainer, adamw_options

__all__ = [
    "COLUMNS",
    "CPU_PARALLEL",
    "CUDA_PARALLEL",
    "SETUPS",
    "ParallelPlan",
    "check_method",
    "compare_parameters",
    "parallel_checks",
    "parallel_plan",
    "parallel_tolerance",
]


@dataclasses.dataclass(frozen=True)
class ParallelPlan:
    """What the parallel check runs; plain values, so that it can be sent to spawned ranks.

    Every rank trains ``batch_per_rank`` sequences of ``context_length`` tokens,
    its own slice of a global batch of ``world_size * batch_per_rank`` sequences;
    the single-process runs train on the whole global batch.

    Attributes:
        device_type: ``"cpu"`` (gloo) or ``"cuda"`` (NCCL, rank ``r`` on ``cuda:r``).
        world_size: number of ranks.
        size: model size, a key of :data:`benchkit.model.SIZES`.
        context_length: tokens per sequence.
        batch_per_rank: sequences per rank and step.
        steps: optimizer steps of every run.
        lr: AdamW's learning rate (other options: :func:`benchkit.training.adamw_options`).
        bucket_size_mb: ``BucketedDDP``'s bucket cap, MiB.
        dtype: the parameters' and the computation's dtype (no autocast).
        max_abs_tolerance: if set, the check is an absolute bound on the largest
            parameter difference; if ``None``, it is relative to the rounding noise
            of a split batch (see :func:`parallel_tolerance`).
        timeout_s: deadline of the spawned ranks, seconds.
        reason: why this plan runs on this machine (said in the report).
    """

    device_type: str
    world_size: int
    size: str
    context_length: int
    batch_per_rank: int
    steps: int
    lr: float
    bucket_size_mb: float
    dtype: torch.dtype
    max_abs_tolerance: float | None
    timeout_s: float
    reason: str = ""

    def describe(self) -> str:
        """One line for the console and the report, e.g. "4 NCCL processes, one GPU each, small model, float32"."""
        where = "NCCL processes, one GPU each" if self.device_type == "cuda" else "gloo processes on the CPU"
        return f"{self.world_size} {where}, {self.size} model, {str(self.dtype).removeprefix('torch.')}"


# The CPU check: 2 ranks, each with half of a global batch of 4 sequences of 32
# tokens, 5 AdamW steps at lr 1e-3, gradient buckets of 1 MiB (the tiny model's
# gradients then span several buckets). It runs in float64: in float32, AdamW's
# first update g / (|g| + eps) turns the ~1e-8 rounding difference between an
# averaged and a full-batch gradient into parameter differences of ~1e-5 wherever
# |g| is near eps, which would hide real errors of that size. In float64 the two
# trainings agree to ~1e-14 (measured: 6e-15); even an error that AdamW's scale
# invariance nearly hides, summing the ranks' gradients instead of averaging them,
# moves parameters 6e-4 away (measured), far beyond the bound of 1e-10. The
# deadline covers process start, imports and the 4 trainings of a few seconds each.
CPU_PARALLEL = ParallelPlan(
    device_type="cpu",
    world_size=2,
    size="tiny",
    context_length=32,
    batch_per_rank=2,
    steps=5,
    lr=1e-3,
    bucket_size_mb=1.0,
    dtype=torch.float64,
    max_abs_tolerance=1e-10,
    timeout_s=120.0,
)
# The GPU check: the small model (128.6M parameters) at context 256, 4 sequences per
# rank (benchkit ddp's and zero's default), 5 AdamW steps at lr 1e-3, buckets of
# 25 MiB (PyTorch DDP's default; small's 491 MiB of float32 gradients span about
# 20). float32 without autocast: bf16 autocast would round every matmul input to 8
# significant bits and raise the noise floor the check is measured against
# (PARALLEL_NOISE_FACTOR) far above float32's; the check is about the communication,
# not the precision. world_size is filled in by parallel_plan. The deadline:
# starting a CUDA context and an NCCL communicator per process takes tens of
# seconds, the 4 trainings seconds; a hang still ends.
CUDA_PARALLEL = ParallelPlan(
    device_type="cuda",
    world_size=2,
    size="small",
    context_length=256,
    batch_per_rank=4,
    steps=5,
    lr=1e-3,
    bucket_size_mb=25.0,
    dtype=torch.float32,
    max_abs_tolerance=None,
    timeout_s=300.0,
)
# At most this many GPUs take part (one rank each). 4 ranks already give ZeRO-1 owners
# in the middle of the rank order and NCCL a ring of more than two; more would only
# grow the global batch (4 sequences per rank) that the single-process reference
# trains on one GPU, and the start-up time.
MAX_CUDA_RANKS = 4
# The relative check (plans without max_abs_tolerance): a parallel run passes if its
# rel_update_diff is at most this many times the split-batch run's. Both differ from
# the reference only by rounding in another order, so their differences are of one
# size; measured on the CPU in float32 (tiny and small models, 2-4 gloo ranks, the
# plan's steps and lr), the ratio was 1.0 with 2 and 4 ranks
# and 1.6 with 3, while real faults lay far above 10x: summing the ranks' gradients
# instead of averaging them (which AdamW nearly hides) 170-580x, one parameter tensor
# left without its gradient >= 5.7e4x, no gradient synchronization at all >= 6.4e4x.
PARALLEL_NOISE_FACTOR = 10.0


def parallel_plan(device: torch.device) -> ParallelPlan:
    """The parallel check for a tour on ``device``: :data:`CUDA_PARALLEL` on
    ``min(GPUs, MAX_CUDA_RANKS)`` ranks when ``device`` is CUDA and at least 2 GPUs
    are visible, else :data:`CPU_PARALLEL`; ``reason`` says which and why."""
    gpus = torch.cuda.device_count() if device.type == "cuda" else 0
    if gpus >= 2:
        world_size = min(gpus, MAX_CUDA_RANKS)
        return dataclasses.replace(
            CUDA_PARALLEL,
            world_size=world_size,
            reason=(f"{gpus} CUDA GPUs visible: one NCCL process on each of {world_size} (at most {MAX_CUDA_RANKS})"),
        )
    if device.type == "cuda":
        reason = "1 CUDA GPU visible, and NCCL needs one GPU per process: the CPU check instead"
    else:
        reason = "the tour runs on the CPU"
    return dataclasses.replace(CPU_PARALLEL, reason=reason)


def compare_parameters(
    result: Iterable[torch.Tensor], reference: Iterable[torch.Tensor], initial: Iterable[torch.Tensor]
) -> dict[str, float]:
    """How far ``result`` ended from ``reference``, two trainings that started at ``initial``.

    Arguments:
        result, reference, initial: iterables of tensors, matching in order and
            shape (parameters of one model, any dtype and device).

    Returns:
        ``max_abs_param_diff``: the largest ``|result - reference|`` over all
        elements, in parameter units; ``rel_update_diff``: the largest over the
        tensors of ``||result_i - reference_i|| / ||reference_i - initial_i||``
        (Frobenius norms, in float64): the difference as a share of how far
        training moved that tensor, so that one tensor that went wrong stands out
        however small it is (0 where both are 0, infinity where only the update is).
    """
    max_abs, rel = 0.0, 0.0
    for x, ref, start in zip(result, reference, initial, strict=True):
        difference = x.detach().double() - ref.detach().double()
        diff = difference.norm().item()
        update = (ref.detach().double() - start.detach().double()).norm().item()
        max_abs = max(max_abs, difference.abs().max().item())
        rel = max(rel, 0.0 if diff == 0 else diff / update if update > 0 else float("inf"))
    return {"max_abs_param_diff": max_abs, "rel_update_diff": rel}


def parallel_tolerance(plan: ParallelPlan, split_rel_update_diff: float) -> tuple[str, float]:
    """The quantity a parallel run's row is checked on, and its bound.

    With ``plan.max_abs_tolerance``: ``max_abs_param_diff`` against it. Otherwise
    ``rel_update_diff`` against :data:`PARALLEL_NOISE_FACTOR` times the split-batch
    run's ``rel_update_diff`` (``split_rel_update_diff``), or times ``plan.dtype``'s
    machine epsilon if that is smaller: a relative difference below one rounding
    step is no measure of noise (it matters only if the split run reproduced the
    reference bit for bit).
    """
    if plan.max_abs_tolerance is not None:
        return "max_abs_param_diff", plan.max_abs_tolerance
    return "rel_update_diff", PARALLEL_NOISE_FACTOR * max(split_rel_update_diff, torch.finfo(plan.dtype).eps)


def _adamw(params: Iterable[torch.nn.Parameter], plan: ParallelPlan, sharded: bool) -> torch.optim.Optimizer:
    """AdamW over ``params`` with :func:`benchkit.training.adamw_options`, under
    ``zero1.ShardedOptimizer`` if ``sharded``."""
    from zero1 import ShardedOptimizer

    params = list(params)
    options = adamw_options(params, lr=plan.lr)
    if sharded:
        return ShardedOptimizer(params, torch.optim.AdamW, **options)
    return torch.optim.AdamW(params, **options)


SETUPS = {"BucketedDDP + AdamW": False, "BucketedDDP + ZeRO-1 AdamW": True}  # setup -> sharded
COLUMNS = [
    "setup",
    "world_size",
    "max_abs_param_diff",
    "rel_update_diff",
    "split_rel_update_diff",
    "checked",
    "tolerance",
    "ok",
]


def _parallel_rank(rank: int, world_size: int, plan: ParallelPlan) -> dict[str, dict[str, float]]:
    """One rank of the parallel check (started by ``ddp.launch.spawn``), on its own device.

    Trains from one initialization: the reference (one process, the whole global
    batch), ``"split"`` (one process, the global batch as ``world_size``
    micro-batches whose gradients accumulate: the same arithmetic as the ranks',
    rounded in another order; rank 0 only), and this rank's slice under
    ``BucketedDDP`` for each of :data:`SETUPS`. Returns
    :func:`compare_parameters` of each against the reference, keyed by setup and
    on rank 0 ``"split"``. Every rank trains the reference itself: no parameters
    cross processes, only these numbers.
    """
    from ddp import BucketedDDP

    device = rank_device(plan.device_type)
    config = model_config(plan.size, plan.context_length)
    inputs, targets = random_batch(
        config, world_size * plan.batch_per_rank, device=device, generator=torch.Generator().manual_seed(1)
    )
    batches = list(zip(inputs.chunk(world_size), targets.chunk(world_size)))  # rank r's slice is batches[r]
    torch.manual_seed(0)
    initial = TransformerLM(config).to(device=device, dtype=plan.dtype)  # copied, never trained

    def trained(
        batches: list[tuple[torch.Tensor, torch.Tensor]], sharded: bool = False, parallel: bool = False
    ) -> torch.nn.Module:
        """A copy of ``initial`` after ``plan.steps`` steps on ``batches`` (micro-batches of int64
        (B, T) inputs and targets, their gradients accumulated), under ``BucketedDDP`` if ``parallel``."""
        model = copy.deepcopy(initial)
        wrapper = BucketedDDP(model, bucket_size_mb=plan.bucket_size_mb) if parallel else None
        trainer = Trainer(model, _adamw((wrapper or model).parameters(), plan, sharded), batches, wrapper=wrapper)
        for _ in range(plan.steps):
            trainer.step()
        return model

    reference = trained([(inputs, targets)])
    results = {}
    if rank == 0:  # the same on every rank: measured once
        results["split"] = compare_parameters(
            trained(batches).parameters(), reference.parameters(), initial.parameters()
        )
    for setup, sharded in SETUPS.items():
        model = trained([batches[rank]], sharded=sharded, parallel=True)
        results[setup] = compare_parameters(model.parameters(), reference.parameters(), initial.parameters())
    return results


def parallel_checks(plan: ParallelPlan) -> list[dict[str, Any]]:
    """Run ``plan`` on ``plan.world_size`` spawned ranks; one row per setup of
    :data:`SETUPS` with its differences to single-process training (the
    largest over the ranks), the split-batch run's ``rel_update_diff`` (rounding
    noise), the quantity checked, its tolerance (:func:`parallel_tolerance`) and ``ok``."""
    from ddp.launch import spawn

    per_rank = spawn(
        _parallel_rank, plan.world_size, args=(plan,), backend=backend_for(plan.device_type), timeout_s=plan.timeout_s
    )
    split = per_rank[0]["split"]["rel_update_diff"]
    checked, tolerance = parallel_tolerance(plan, split)
    rows = []
    for setup in SETUPS:
        row = {
            "setup": setup,
            "device": plan.device_type,
            "world_size": plan.world_size,
            "size": plan.size,
            "dtype": plan.dtype,
            "steps": plan.steps,
        }
        for key in ("max_abs_param_diff", "rel_update_diff"):
            row[key] = max(results[setup][key] for results in per_rank)
        row.update(split_rel_update_diff=split, checked=checked, tolerance=tolerance, ok=row[checked] <= tolerance)
        rows.append(row)
    return rows


def check_method(parallel: ParallelPlan) -> str:
    """A paragraph (Markdown) on how the check of ``parallel`` compares, for the report."""
    if parallel.max_abs_tolerance is not None:
        return (
            f"The check: the largest absolute parameter difference (`max_abs_param_diff`) at most "
            f"{parallel.max_abs_tolerance:g} (see `CPU_PARALLEL`: in float64 rounding leaves ~1e-14, "
            f"summing instead of averaging the gradients ~6e-4)."
        )
    return (
        f"The results are not bitwise equal: a split batch is summed in another order (by cuBLAS, and by "
        f"the all-reduce). The check: "
        f"`rel_update_diff` (for the worst parameter tensor, the difference to the reference as a share of "
        f"the reference's update of that tensor) at most {PARALLEL_NOISE_FACTOR:g} x the same measure of a "
        f"single process that takes the global batch as {parallel.world_size} accumulated micro-batches "
        f"(`split_rel_update_diff`: rounding noise alone)."
    )
