"""What ZeRO-1 saves per rank, against its formula, and what it costs per step (``benchkit zero``).

For each size of a :class:`ZeroPlan`, data-parallel training of the reference
Transformer (``ddp.BucketedDDP``, fp32, ``batch_size`` sequences per rank) runs
with each optimizer variant in turn, in the same processes:

- ``adamw``: plain ``torch.optim.AdamW``, every rank holding all of its state;
- ``zero1``: ``zero1.ShardedOptimizer`` over AdamW, bucketed parameter broadcast;
- ``zero1-per-param``: the same with one broadcast per parameter;
- ``torch-zero``: ``torch.distributed.optim.ZeroRedundancyOptimizer`` over AdamW.

Every variant's AdamW gets the same :func:`benchkit.training.adamw_options`
(``fused=True`` on CUDA).

Measured per variant: ms per training step (a :class:`benchkit.training.Trainer`
step: forward, backward, the rest of the gradient all-reduce and the optimizer
step, each timed; mean and std over ``steps`` after ``warmup``)
and of the optimizer step alone; the optimizer-state bytes of each rank, summed
over its state tensors (any device); and on CUDA the memory allocated after
model creation, directly before and directly after the optimizer step of the
last step, and that whole step's peak (each the largest over the ranks). Predicted next to them
(:func:`zero1.predict_memory`, Rajbhandari et al. 2020): parameters + gradients
+ the rank's optimizer state, and the state bound ``(P / N + largest parameter)
* 8 bytes`` that ``state_vs_bound`` divides by.

Processes (:func:`benchkit.ranks.run_on_ranks`): :func:`run_zero` starts
``nproc`` local processes (``ddp.launch.spawn``; NCCL with one GPU per rank on
CUDA, gloo on CPU); under ``torchrun`` the processes are torchrun's, and rank 0
gets the rows.

Example::

    from benchkit.zero import ZeroPlan, run_zero

    plan = ZeroPlan(sizes=("tiny",), context_length=32, batch_size=2, warmup=1, steps=2, device_type="cpu")
    rows = run_zero(plan, nproc=2, timeout_s=120)
    print([(r["variant"], r["state_MiB"], r["predicted_state_MiB"]) for r in rows])
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import torch

from benchkit.devices import allocated_bytes, free_memory
from benchkit.memory import optimizer_state_bytes
from benchkit.model import TransformerLM, model_config, random_batch
from benchkit.ranks import RankPlan, rank_device, run_on_ranks
from benchkit.timing import summarize
from benchkit.training import Trainer, adamw_options, timed_steps
from benchkit.units import MIB

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["MEMORY_COLUMNS", "TIME_COLUMNS", "VARIANTS", "ZeroPlan", "combine", "plot_rows", "run_zero"]

VARIANTS = ("adamw", "zero1", "zero1-per-param", "torch-zero")
# AdamW keeps exp_avg and exp_avg_sq, each shaped like its fp32 parameter: 2 x 4 bytes
# per parameter element (PyTorch's AdamW without amsgrad).
ADAMW_STATE_BYTES_PER_ELEMENT = 8

TIME_COLUMNS = ["size", "nproc", "variant", "step_ms", "step_ms_std", "optimizer_ms", "optimizer_ms_std"]
MEMORY_COLUMNS = [
    "size",
    "nproc",
    "variant",
    "model_MiB",
    "before_step_MiB",
    "predicted_before_step_MiB",
    "after_step_MiB",
    "peak_step_MiB",
    "state_MiB",
    "predicted_state_MiB",
    "state_bound_MiB",
    "state_vs_bound",
    "saving_MiB",
    "predicted_saving_MiB",
]


@dataclasses.dataclass(frozen=True, kw_only=True)
class ZeroPlan(RankPlan):
    """What every rank runs (:class:`benchkit.ranks.RankPlan`'s fields, and these).

    Attributes:
        variants: optimizers to compare, in order (:data:`VARIANTS`).
        bucket_size_mb: bucket cap in MiB of ``BucketedDDP`` and of zero1's bucketed broadcast.

    ``warmup`` must be at least 1, so that the optimizer state exists when memory is read.
    """

    variants: tuple[str, ...] = VARIANTS
    bucket_size_mb: float = 25.0

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.variants or any(v not in VARIANTS for v in self.variants):
            raise ValueError(f"variants must be a non-empty sequence of {VARIANTS}, got {self.variants!r}")
        if self.warmup < 1:
            raise ValueError(f"warmup must be >= 1 so that the optimizer state exists, got {self.warmup}")


# ---------------------------------------------------------------- one rank


def _make_optimizer(variant: str, params: list[torch.nn.Parameter], bucket_size_mb: float) -> torch.optim.Optimizer:
    """``variant``'s optimizer over ``params``; every variant runs AdamW with the same
    :func:`benchkit.training.adamw_options` (fused on CUDA)."""
    options = adamw_options(params)
    if variant == "adamw":
        return torch.optim.AdamW(params, **options)
    if variant == "torch-zero":
        from torch.distributed.optim import ZeroRedundancyOptimizer

        return ZeroRedundancyOptimizer(params, optimizer_class=torch.optim.AdamW, **options)
    from zero1 import ShardedOptimizer

    mode = "per_parameter" if variant == "zero1-per-param" else "bucketed"
    return ShardedOptimizer(params, torch.optim.AdamW, broadcast_mode=mode, bucket_size_mb=bucket_size_mb, **options)


def _state_bytes(optimizer: torch.optim.Optimizer) -> int:
    """Bytes of the optimizer-state tensors this rank holds."""
    from torch.distributed.optim import ZeroRedundancyOptimizer

    # ZeroRedundancyOptimizer keeps its shard's optimizer in .optim; ShardedOptimizer.state is its shard's.
    return optimizer_state_bytes(optimizer.optim if isinstance(optimizer, ZeroRedundancyOptimizer) else optimizer)


def _measure_variant(size: str, variant: str, plan: ZeroPlan, device: torch.device, rank: int) -> dict[str, Any]:
    """One rank's measurements of one (size, variant): seconds per step and of its optimizer phase, and bytes."""
    from ddp import BucketedDDP

    config = model_config(size, plan.context_length)
    torch.manual_seed(0)  # the same weights for every variant (BucketedDDP broadcasts rank 0's anyway)
    with torch.device(device):  # initialized where it lives, not on the CPU and then copied
        net = TransformerLM(config)
    model_bytes = allocated_bytes(device)
    wrapper = BucketedDDP(net, bucket_size_mb=plan.bucket_size_mb)
    optimizer = _make_optimizer(variant, list(wrapper.parameters()), plan.bucket_size_mb)
    generator = torch.Generator().manual_seed(rank)  # each rank its own slice of data
    batch = random_batch(config, plan.batch_size, device=device, generator=generator)
    # set_to_none=False keeps BucketedDDP's gradients as bucket views.
    trainer = Trainer(net, optimizer, [batch], wrapper=wrapper, set_to_none=False)

    memory: dict[str, int | None] = {}

    def read_allocator(phase: str) -> None:
        """Bytes allocated around the optimizer step and the peak of the step ending now (CUDA);
        what the last step leaves is what is reported."""
        if phase == "sync":  # BucketedDDP's finish_gradient_synchronization: the optimizer step is next
            memory["before_step_bytes"] = allocated_bytes(device)
        elif phase == "optimizer":
            memory["after_step_bytes"] = allocated_bytes(device)
            memory["peak_step_bytes"] = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None
            if device.type == "cuda":
                torch.cuda.reset_peak_memory_stats(device)  # the next step's peak starts here

    timer = timed_steps(trainer, "train-step", warmup=plan.warmup, steps=plan.steps, after_phase=read_allocator)
    return {
        "size": size,
        "variant": variant,
        "step_s": timer.step_totals(),
        "optimizer_s": timer.samples["optimizer"],
        "model_bytes": model_bytes,
        **memory,
        "state_bytes": _state_bytes(optimizer),
    }


def _rank_main(rank: int, world_size: int, plan: ZeroPlan) -> list[dict[str, Any]]:
    """Everything one rank measures, in plan order (runs inside an initialized process group)."""
    device = rank_device(plan.device_type)
    results = []
    for size in plan.sizes:
        for variant in plan.variants:
            results.append(_measure_variant(size, variant, plan, device, rank))
            free_memory(device)  # the next variant starts from an empty allocator
    return results


def run_zero(plan: ZeroPlan, *, nproc: int, timeout_s: float) -> list[dict[str, Any]] | None:
    """Run ``plan`` on ``nproc`` spawned ranks, or on torchrun's; one row per (size, variant)
    (:func:`combine`) in the spawning process or on rank 0, None on the other ranks under torchrun."""
    per_rank = run_on_ranks(_rank_main, nproc=nproc, device_type=plan.device_type, timeout_s=timeout_s, args=(plan,))
    return None if per_rank is None else combine(per_rank, len(per_rank), plan.context_length)


# ---------------------------------------------------------------- rows
def _parameter_sizes(size: str, context_length: int) -> list[int]:
    """Element counts of the model's parameters in optimizer order (built on the meta device: no memory)."""
    with torch.device("meta"):
        return [p.numel() for p in TransformerLM(model_config(size, context_length)).parameters()]


def _mib(value: float | None) -> float | None:
    return None if value is None else value / MIB


def combine(per_rank: list[list[dict[str, Any]]], world_size: int, context_length: int) -> list[dict[str, Any]]:
    """One row per (size, variant) from every rank's measurements: times of rank 0,
    memory of the rank that holds the most, predictions from :func:`zero1.predict_memory`."""
    from zero1 import predict_memory

    rows = []
    for index, first in enumerate(per_rank[0]):
        ranks = [results[index] for results in per_rank]
        sizes = _parameter_sizes(first["size"], context_length)
        prediction = predict_memory(sizes, world_size, state_bytes_per_element=ADAMW_STATE_BYTES_PER_ELEMENT)
        sharded = first["variant"] != "adamw"
        predicted_state = max(prediction.state_bytes) if sharded else prediction.unsharded_state_bytes
        bound = prediction.state_bound_bytes if sharded else prediction.unsharded_state_bytes
        state = max(r["state_bytes"] for r in ranks)
        step, opt = summarize(first["step_s"]), summarize(first["optimizer_s"])

        def worst(key: str, ranks=ranks) -> float | None:
            values = [r[key] for r in ranks]
            return None if values[0] is None else _mib(max(values))

        rows.append(
            {
                "size": first["size"],
                "nproc": world_size,
                "variant": first["variant"],
                "parameters": sum(sizes),
                "step_ms": step.mean * 1e3,
                "step_ms_std": step.std * 1e3,
                "optimizer_ms": opt.mean * 1e3,
                "optimizer_ms_std": opt.std * 1e3,
                "model_MiB": worst("model_bytes"),
                "before_step_MiB": worst("before_step_bytes"),
                "predicted_before_step_MiB": _mib(prediction.param_bytes + prediction.grad_bytes + predicted_state),
                "after_step_MiB": worst("after_step_bytes"),
                "peak_step_MiB": worst("peak_step_bytes"),
                "state_MiB": _mib(state),
                "state_per_rank_MiB": [_mib(r["state_bytes"]) for r in ranks],
                "predicted_state_MiB": _mib(predicted_state),
                "state_bound_MiB": _mib(bound),
                "state_vs_bound": state / bound,
                "predicted_saving_MiB": _mib(prediction.unsharded_state_bytes - predicted_state),
            }
        )
    _add_savings(rows)
    return rows


def _add_savings(rows: list[dict[str, Any]]) -> None:
    """Measured saving: plain AdamW's memory before the step minus the variant's (CUDA only)."""
    baseline = {(r["size"], r["nproc"]): r["before_step_MiB"] for r in rows if r["variant"] == "adamw"}
    for row in rows:
        reference = baseline.get((row["size"], row["nproc"]))
        measured = row["before_step_MiB"]
        row["saving_MiB"] = None if reference is None or measured is None else reference - measured


def plot_rows(rows: list[dict[str, Any]], memory_key: str) -> dict[str, Figure]:
    """Two bar charts, one bar group per (size, processes) and one bar per variant:
    ``zero_step_ms`` (ms per training step) and ``zero_memory`` (``memory_key`` of the largest rank)."""
    from benchkit.plot import bar_plot  # lazy: spawned ranks import this module and need no matplotlib

    groups = list(dict.fromkeys(f"{r['size']} x{r['nproc']}" for r in rows))
    variants = list(dict.fromkeys(r["variant"] for r in rows))

    def series(key: str) -> dict[str, list[float | None]]:
        table = {(f"{r['size']} x{r['nproc']}", r["variant"]): r[key] for r in rows}
        return {v: [table.get((g, v)) for g in groups] for v in variants}

    return {
        "zero_step_ms": bar_plot(
            groups, series("step_ms"), title="ms per training step (size x processes)", ylabel="ms"
        ),
        "zero_memory": bar_plot(
            groups, series(memory_key), title=f"{memory_key} per rank (largest rank)", ylabel="MiB"
        ),
    }
