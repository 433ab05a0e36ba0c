"""The data-parallel wrappers of :mod:`ddp` side by side with PyTorch DDP (``benchkit ddp``).

For each model size, every variant trains deep copies of one initialization on
the same per-rank batch at the same precision (AdamW with
:func:`benchkit.training.adamw_options`, fused on CUDA; ``batch_size``
sequences of ``context_length`` tokens per rank):

- ``local``: no communication at all, each rank alone: the floor;
- ``naive``, ``flat``, ``overlap``: :class:`ddp.NaiveDDP`, :class:`ddp.FlatDDP`,
  :class:`ddp.OverlapDDP`;
- ``bucketed-<N>MB``: :class:`ddp.BucketedDDP` with ``bucket_size_mb=N`` for
  each bucket cap asked for; ``bucketed-<N>MB-bf16`` the same with
  ``compress_bf16=True`` (fp32 gradients all-reduced as bf16);
- ``torch-ddp-25MB``: :class:`torch.nn.parallel.DistributedDataParallel` with
  its default ``bucket_cap_mb=25``.

A step is a :class:`benchkit.training.Trainer` step that zeroes the gradients in
place, then the timed phases ``forward`` (with the loss), ``backward``, ``sync``
(our wrappers' ``finish_gradient_synchronization()``) and ``optimizer``; each
phase ends by waiting for the device (CUDA events on a GPU, see
:class:`benchkit.timing.PhaseTimer`), and the step time is the sum of the
phases. Models run eagerly: a compiled backward would run the gradient hooks
only at its end and defeat the overlap being measured. With ``rounds`` above 1,
the variants run in interleaved rounds (:func:`rounds_order`). Reported: ms per
step and per phase, and the communication that backward did not hide
(:func:`add_derived_columns`), and on CUDA the peak memory allocated on rank 0
while the variant trained (``peak_memory_bytes``; the largest over the rounds).

:func:`run_data_parallel` starts both ways (:func:`benchkit.ranks.run_on_ranks`):
it spawns ``nproc`` ranks on this node through :func:`ddp.launch.spawn` (NCCL
and one GPU per rank on CUDA, gloo on CPU); under ``torchrun`` it spawns nothing.
Either way the results are rank 0's measurements. A variant that fails alike on
every rank (out of memory, say) is recorded with its ``status`` and the run goes
on; a rank failing alone leaves the others waiting in a collective until the
process group's timeout ends the run. Rank 0 saves the rows measured so far to
``ddp.partial.json`` after every variant.

Example::

    from benchkit.data_parallel import DataParallelPlan, add_derived_columns, run_data_parallel, variant_names

    plan = DataParallelPlan(
        sizes=("tiny",),
        context_length=32,
        batch_size=2,
        warmup=1,
        steps=3,
        device_type="cpu",
        variants=tuple(variant_names(["local", "bucketed"], [25.0])),
    )
    rows = run_data_parallel(plan, nproc=2, timeout_s=120)
    add_derived_columns(rows)
    print([(r["variant"], r["step_ms"], r["over_local_ms"]) for r in rows])
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from benchkit.devices import free_memory
from benchkit.model import ATTENTION_BACKENDS, model_config, parameter_count
from benchkit.ranks import RankPlan, rank_device, run_on_ranks
from benchkit.report import progress, write_results
from benchkit.timing import PhaseTimer, summarize
from benchkit.training import PRECISIONS, Trainer, adamw_options, timed_steps
from benchkit.workload import Workload
from ddp import BucketedDDP, FlatDDP, NaiveDDP, OverlapDDP

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "KINDS",
    "DataParallelPlan",
    "add_derived_columns",
    "measure_variant",
    "plot_rows",
    "rounds_order",
    "run_data_parallel",
    "run_rank",
    "table_rows",
    "variant_names",
    "wrap",
]

KINDS = ("local", "naive", "flat", "overlap", "bucketed", "bucketed-bf16", "torch-ddp")
TORCH_DDP_BUCKET_MB = 25  # torch.nn.parallel.DistributedDataParallel's default bucket_cap_mb
# Bucket caps across three decades, 1 to 1000 MiB, with PyTorch DDP's default of
# 25 MiB among them to compare with it.
DEFAULT_BUCKET_MB = (1.0, 10.0, 25.0, 100.0, 1000.0)


@dataclasses.dataclass(frozen=True, kw_only=True)
class DataParallelPlan(RankPlan):
    """What every rank runs (:class:`benchkit.ranks.RankPlan`'s fields, and these).

    Attributes:
        variants: expanded variant names in run order (:func:`variant_names`).
        precision: one of :data:`benchkit.training.PRECISIONS`.
        attention: one of :data:`benchkit.model.ATTENTION_BACKENDS`.
        rounds: passes over the variants (see the module docstring).
        out_dir: if set, rank 0 saves the rows measured so far there, as ``ddp.partial.json``,
            after every variant, after ``earlier_rows`` (the rows of earlier runs).
    """

    variants: tuple[str, ...]
    precision: str = "fp32"
    attention: str = "sdpa"
    rounds: int = 1
    out_dir: str | None = None
    earlier_rows: tuple[dict[str, Any], ...] = ()

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.precision not in PRECISIONS or self.attention not in ATTENTION_BACKENDS:
            raise ValueError(
                f"precision must be one of {PRECISIONS} and attention one of {ATTENTION_BACKENDS}, "
                f"got {self.precision!r} and {self.attention!r}"
            )
        if not self.variants or self.rounds < 1:
            raise ValueError(f"need at least one variant and one round, got {self.variants!r}, {self.rounds}")


def variant_names(kinds: Sequence[str], bucket_mbs: Sequence[float]) -> list[str]:
    """Variant names in run order: ``bucketed`` expands to one ``bucketed-<N>MB`` per cap,
    ``bucketed-bf16`` to one ``bucketed-<N>MB-bf16``."""
    names = []
    for kind in KINDS:
        if kind not in kinds:
            continue
        if kind == "bucketed":
            names += [f"bucketed-{mb:g}MB" for mb in bucket_mbs]
        elif kind == "bucketed-bf16":
            names += [f"bucketed-{mb:g}MB-bf16" for mb in bucket_mbs]
        elif kind == "torch-ddp":
            names.append(f"torch-ddp-{TORCH_DDP_BUCKET_MB}MB")
        else:
            names.append(kind)
    return names


def wrap(variant: str, model: torch.nn.Module, device: torch.device) -> torch.nn.Module | None:
    """``variant``'s wrapper of ``model`` (None for ``local``), inside an initialized process group."""
    if variant == "local":
        return None
    if variant.startswith("torch-ddp"):
        device_ids = [device.index] if device.type == "cuda" else None
        # bucket_cap_mb left unset on purpose: passing it, even as 25, also turns off
        # PyTorch DDP's smaller 1 MiB first bucket (torch/nn/parallel/distributed.py,
        # _BucketCapacityConfig.create: is_using_default = bucket_cap_mb is None).
        return torch.nn.parallel.DistributedDataParallel(model, device_ids=device_ids)
    if variant.startswith("bucketed-"):
        cap, compressed = variant[len("bucketed-") :].removesuffix("-bf16"), variant.endswith("-bf16")
        return BucketedDDP(model, bucket_size_mb=float(cap.removesuffix("MB")), compress_bf16=compressed)
    return {"naive": NaiveDDP, "flat": FlatDDP, "overlap": OverlapDDP}[variant](model)


def measure_variant(variant: str, base: Workload, plan: DataParallelPlan) -> PhaseTimer:
    """Train a copy of ``base.model`` wrapped as ``variant``; return the timer of its timed steps."""
    model = copy.deepcopy(base.model)
    wrapper = wrap(variant, model, base.device)
    params = list(model.parameters())
    optimizer = torch.optim.AdamW(params, **adamw_options(params))
    # set_to_none=False for every variant: BucketedDDP keeps .grad as bucket views, and all compare alike.
    trainer = Trainer(model, optimizer, base.batches, precision=plan.precision, wrapper=wrapper, set_to_none=False)
    return timed_steps(trainer, "train-step", warmup=plan.warmup, steps=plan.steps)


def rounds_order(variants: Sequence[str], rounds: int) -> list[str]:
    """The order in which ``rounds`` passes run ``variants``: round ``r`` starts at variant ``r`` (mod count).

    Each variant's statistics pool its timed steps of all rounds, so that slow drifts
    of the machine (clocks, temperature, other tenants) fall on every variant alike
    instead of on whichever ran during them."""
    return [variants[(r + i) % len(variants)] for r in range(rounds) for i in range(len(variants))]


def run_rank(rank: int, world_size: int, plan: DataParallelPlan) -> list[dict[str, Any]]:
    """Everything one rank measures (inside an initialized process group); rows in plan order."""
    device = rank_device(plan.device_type)
    rows: list[dict[str, Any]] = []
    for size in plan.sizes:
        config = model_config(size, plan.context_length, attention=plan.attention)
        # seed=rank: different weights per rank (the wrappers broadcast rank 0's) and a batch of its own.
        base = Workload(config, batch_size=plan.batch_size, device=device, precision=plan.precision, seed=rank)
        size_rows = {
            variant: {
                "size": size,
                "parameters": parameter_count(config),
                "context_length": plan.context_length,
                "batch_size_per_rank": plan.batch_size,
                "precision": plan.precision,
                "variant": variant,
                "world_size": world_size,
                "rounds": plan.rounds,
            }  # "status" once measured
            for variant in plan.variants
        }
        timers = {variant: PhaseTimer(device) for variant in plan.variants}
        order = rounds_order(plan.variants, plan.rounds)
        for variant in progress(order, f"benchkit ddp {size}") if rank == 0 else order:
            row = size_rows[variant]
            if row.get("status", "ok") != "ok":
                continue  # failed in a previous round
            # A failure every rank hits alike (out of memory, an unsupported setting) is recorded and the
            # run goes on; one rank failing alone leaves the others waiting in a collective until the
            # process group's timeout.
            if device.type == "cuda":
                torch.cuda.reset_peak_memory_stats(device)
            try:
                timers[variant].extend(measure_variant(variant, base, plan))
            except torch.OutOfMemoryError:
                row["status"] = "OOM"
            except Exception as error:
                row["status"] = f"error: {type(error).__name__}: {error}"
            else:
                timer = timers[variant]  # the statistics of every round so far
                row.update(status="ok", phases=timer.summary(), step=summarize(timer.step_totals()))
                if device.type == "cuda":
                    peak = torch.cuda.max_memory_allocated(device)
                    row["peak_memory_bytes"] = max(peak, row.get("peak_memory_bytes", 0))
            free_memory(device)  # after the except blocks: a traceback would keep the variant's model alive
            if rank == 0 and plan.out_dir is not None:
                measured = [r for r in size_rows.values() if "status" in r]
                write_results(plan.out_dir, "ddp.partial", [*plan.earlier_rows, *rows, *measured])
        rows += size_rows.values()
        del base
        free_memory(device)
    return rows


def run_data_parallel(plan: DataParallelPlan, *, nproc: int, timeout_s: float) -> list[dict[str, Any]] | None:
    """Run ``plan`` on ``nproc`` spawned ranks, or on torchrun's (see the module docstring);
    return rank 0's rows (None on the other ranks under torchrun)."""
    results = run_on_ranks(run_rank, nproc=nproc, device_type=plan.device_type, timeout_s=timeout_s, args=(plan,))
    return None if results is None else results[0]


def add_derived_columns(rows: list[dict[str, Any]]) -> None:
    """Fill the derived columns of the rows with status ``"ok"``, each against the variants of its
    size and world size; the others get ``None``:

    - ``step_ms``, ``step_std_ms``: mean and std of the step time;
    - ``sync_ms``: time spent in ``finish_gradient_synchronization()``, i.e. the
      all-reduce time left when backward ends (all of it for naive and flat);
    - ``over_local_ms``: step time minus the ``local`` step time, the communication
      cost as the step sees it; the only measure for PyTorch DDP, which waits for
      its all-reduces inside backward;
    - ``hidden_pct``: ``100 * (1 - sync_ms / naive sync_ms)``, the share of the
      naive variant's communication time that a variant hides;
    - ``vs_torch``: step time / PyTorch DDP's step time.
    """
    derived = ("step_ms", "step_std_ms", "sync_ms", "over_local_ms", "hidden_pct", "vs_torch")
    for row in rows:
        if row["status"] != "ok":
            row.update(dict.fromkeys(derived))
            continue
        row["step_ms"] = row["step"].mean * 1e3
        row["step_std_ms"] = row["step"].std * 1e3
        row["sync_ms"] = row["phases"]["sync"].mean * 1e3 if "sync" in row["phases"] else None
    for size, world_size in dict.fromkeys((row["size"], row.get("world_size")) for row in rows):
        same = {
            row["variant"]: row
            for row in rows
            if (row["size"], row.get("world_size")) == (size, world_size) and row["status"] == "ok"
        }
        local, naive = same.get("local"), same.get("naive")
        torch_ddp = same.get(f"torch-ddp-{TORCH_DDP_BUCKET_MB}MB")
        for row in same.values():
            row["over_local_ms"] = row["step_ms"] - local["step_ms"] if local else None
            row["hidden_pct"] = (
                100 * (1 - row["sync_ms"] / naive["sync_ms"])
                if naive and row["sync_ms"] is not None and naive["sync_ms"] > 0
                else None
            )
            row["vs_torch"] = row["step_ms"] / torch_ddp["step_ms"] if torch_ddp else None


def table_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The printed view: milliseconds, one line per (size, ranks, variant)."""

    def phase_ms(row, phase):
        return row["phases"][phase].mean * 1e3 if phase in row.get("phases", {}) else None

    return [
        {
            "size": row["size"],
            "ranks": row["world_size"],
            "variant": row["variant"],
            "step_ms": row["step_ms"],
            "std_ms": row["step_std_ms"],
            "fwd_ms": phase_ms(row, "forward"),
            "bwd_ms": phase_ms(row, "backward"),
            "sync_ms": row["sync_ms"],
            "opt_ms": phase_ms(row, "optimizer"),
            "over_local_ms": row["over_local_ms"],
            "hidden_%": row["hidden_pct"],
            "x_torch": row["vs_torch"],
            "peak_GiB": row["peak_memory_bytes"] / 2**30 if "peak_memory_bytes" in row else None,
            "status": row["status"],
        }
        for row in rows
    ]


def plot_rows(rows: list[dict[str, Any]], *, backend: str) -> dict[str, Figure]:
    """One bar chart per size, ``ddp_<size>``: each variant's ms per step, step minus ``local``
    and time in ``finish`` (rows with :func:`add_derived_columns`' columns). With several
    world sizes, a bar group per (variant, world size)."""
    from benchkit.plot import bar_plot  # lazy: spawned ranks import this module and need no matplotlib

    figures = {}
    for size in dict.fromkeys(row["size"] for row in rows):
        same = [row for row in rows if row["size"] == size and row["status"] == "ok"]
        if not same:
            continue
        world_sizes = sorted({row["world_size"] for row in same})
        labels = [row["variant"] if len(world_sizes) == 1 else f"{row['variant']} x{row['world_size']}" for row in same]
        series = {"step": [row["step_ms"] for row in same]}
        if any(row["over_local_ms"] is not None for row in same):
            series["step minus local"] = [row["over_local_ms"] for row in same]
        if any(row["sync_ms"] is not None for row in same):
            series["in finish (sync)"] = [row["sync_ms"] for row in same]
        ranks = " and ".join(map(str, world_sizes))
        figures[f"ddp_{size}"] = bar_plot(
            labels,
            series,
            title=f"{size}: ms per step, {ranks} ranks ({backend}), {same[0]['precision']}",
            ylabel="ms (mean)",
        )
    return figures
