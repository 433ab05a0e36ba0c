"""``benchkit ddp``: the data-parallel wrappers of :mod:`ddp` side by side with PyTorch DDP.

For each model size, every variant trains deep copies of one initialization on
the same per-rank batch at the same precision (AdamW with
:func:`benchkit.workload.adamw_options`, fused on CUDA; ``--batch-size``
sequences of ``--context-length`` tokens per rank):

- ``local``: no communication at all, each rank alone: the floor;
- ``naive``, ``flat``, ``overlap``: :class:`ddp.NaiveDDP`, :class:`ddp.FlatDDP`,
  :class:`ddp.OverlapDDP`;
- ``bucketed-<N>MB``: :class:`ddp.BucketedDDP` with ``bucket_size_mb=N`` for
  each ``--bucket-mb``;
- ``torch-ddp-25MB``: :class:`torch.nn.parallel.DistributedDataParallel` with
  its default ``bucket_cap_mb=25``.

A step is ``optimizer.zero_grad(set_to_none=False)``, then the timed phases
``forward`` (with the loss), ``backward``, ``sync`` (our wrappers'
``finish_gradient_synchronization()``) and ``optimizer``; each phase ends by
waiting for the device (CUDA events on a GPU, see :class:`benchkit.timing.PhaseTimer`),
and the step time is the sum of the phases. Models run eagerly: a compiled
backward would run the gradient hooks only at its end and defeat the overlap
being measured. With ``--rounds R`` the list of variants runs R times, each
round starting one variant later (round r runs variant r first), and each
variant's statistics pool its timed steps of all rounds: slow drifts of the
machine (clocks, temperature, other tenants) then fall on every variant alike
instead of on whichever ran during them. Reported: ms per step (mean ± std
over ``--steps`` steps after ``--warmup``, times ``--rounds``), per phase, and
the communication that backward did not hide:

- ``sync_ms``: time spent in ``finish_gradient_synchronization()``, i.e. the
  all-reduce time left when backward ends (all of it for naive and flat);
- ``over_local_ms``: step time minus the ``local`` step time, the communication
  cost as the step sees it; the only measure for PyTorch DDP, which waits for
  its all-reduces inside backward;
- ``hidden_pct``: ``100 * (1 - sync_ms / naive sync_ms)``, the share of the
  naive variant's communication time that a variant hides;
- ``vs_torch``: step time / PyTorch DDP's step time.

It starts both ways (:func:`benchkit.ranks.run_on_ranks`): ``benchkit ddp
--nproc N`` spawns N ranks on this node through :func:`ddp.launch.spawn` (NCCL
and one GPU per rank on CUDA, gloo on CPU); under ``torchrun`` it spawns nothing.
Either way the results are rank 0's measurements, written once. A variant that
fails alike on every rank (out of memory, say) is recorded with its ``status``
and the run goes on (exit status 1); a rank failing alone leaves the others waiting in a collective until the
process group's timeout (``--timeout-s``) ends the run. Rank 0 saves the rows
measured so far to ``ddp.partial.json`` after every variant.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
from typing import Any, Sequence

import torch
from ddp import BucketedDDP, FlatDDP, NaiveDDP, OverlapDDP

from benchkit.argtypes import non_negative_int, positive_float, positive_int
from benchkit.model import ATTENTION_BACKENDS, lm_loss, model_config, parameter_count
from benchkit.plot import bar_plot
from benchkit.ranks import add_rank_arguments, backend_for, default_rank_sizes, rank_device, run_on_ranks
from benchkit.report import add_output_arguments, device_name, format_table, options_for_json, progress, write_results
from benchkit.timing import PhaseTimer, summarize
from benchkit.workload import PRECISIONS, Workload, adamw_options, free_memory, resolve_device

HELP = "step time and non-hidden communication of the ddp wrappers vs PyTorch DDP"
EXAMPLES = """\
  benchkit ddp --device cpu --size tiny --nproc 2 --steps 3     # CPU, gloo: seconds
  benchkit ddp --nproc 2 --size small xl --precision bf16       # 2 GPUs, NCCL
  benchkit ddp --nproc 4 --size xl --variants bucketed torch-ddp --bucket-mb 25 --rounds 3   # interleaved
  torchrun --nproc-per-node 4 -m benchkit ddp --size xl --precision bf16   # under torchrun
"""

KINDS = ("local", "naive", "flat", "overlap", "bucketed", "torch-ddp")
TORCH_DDP_BUCKET_MB = 25  # torch.nn.parallel.DistributedDataParallel's default bucket_cap_mb
DEFAULT_BUCKET_MB = [1.0, 10.0, 25.0, 100.0, 1000.0]  # issue 4's sizes, plus 25 to compare with PyTorch DDP
DEFAULT_TIMEOUT_S = 3600.0  # generous: the xl runs take minutes; a hang still ends
PLOT_PX_PER_VARIANT = 110  # room for a label like "bucketed-1000MB" in the plot's 5-pixel-wide font


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_rank_arguments(parser, context_length=512, timeout_s=DEFAULT_TIMEOUT_S)
    parser.add_argument("--precision", choices=PRECISIONS, default="fp32",
                        help="fp32, bf16 autocast, or fp16 autocast with loss scaling (default: fp32)")
    parser.add_argument("--attention", choices=ATTENTION_BACKENDS, default="sdpa",
                        help="attention backend (default: sdpa)")
    parser.add_argument("--nproc", type=positive_int, default=None,
                        help="ranks to spawn on this node (default: one per GPU on CUDA, 2 on CPU); "
                             "ignored under torchrun")
    parser.add_argument("--variants", choices=KINDS, nargs="+", default=list(KINDS),
                        help="which variants to run (default: all)")
    parser.add_argument("--bucket-mb", type=positive_float, nargs="+", default=DEFAULT_BUCKET_MB, metavar="MB",
                        help="BucketedDDP bucket caps in MiB (default: 1 10 25 100 1000)")
    parser.add_argument("--warmup", type=non_negative_int, default=3, help="untimed steps per variant (default: 3)")
    parser.add_argument("--steps", type=positive_int, default=10, help="timed steps per variant (default: 10)")
    parser.add_argument("--rounds", type=positive_int, default=1,
                        help="run the variants this many times, each round starting one variant later, and pool "
                             "each variant's timed steps (default: 1)")
    add_output_arguments(parser)


@dataclasses.dataclass(frozen=True)
class Plan:
    """What every rank runs; plain values, so that it can be sent to spawned ranks."""

    sizes: tuple[str, ...]
    context_length: int
    batch_size: int
    precision: str
    attention: str
    variants: tuple[str, ...]  # expanded names, see variant_names
    warmup: int
    steps: int
    rounds: int  # passes over the variants, see the module docstring
    device_type: str
    out_dir: str  # rank 0 saves the rows measured so far here (ddp.partial.json) after every variant


def variant_names(kinds: Sequence[str], bucket_mbs: Sequence[float]) -> list[str]:
    """Variant names in run order: ``bucketed`` expands to one ``bucketed-<N>MB`` per cap."""
    names = []
    for kind in KINDS:
        if kind not in kinds:
            continue
        if kind == "bucketed":
            names += [f"bucketed-{mb:g}MB" for mb in bucket_mbs]
        elif kind == "torch-ddp":
            names.append(f"torch-ddp-{TORCH_DDP_BUCKET_MB}MB")
        else:
            names.append(kind)
    return names


def _wrap(variant: str, model: torch.nn.Module, device: torch.device):
    """(module to call, finish function or None) for ``variant``."""
    if variant == "local":
        return model, None
    if variant.startswith("torch-ddp"):
        device_ids = [device.index] if device.type == "cuda" else None
        # bucket_cap_mb left unset on purpose: passing it, even as 25, also turns off
        # PyTorch DDP's smaller 1 MiB first bucket (torch/nn/parallel/distributed.py,
        # _BucketCapacityConfig.create: is_using_default = bucket_cap_mb is None).
        return torch.nn.parallel.DistributedDataParallel(model, device_ids=device_ids), None
    if variant.startswith("bucketed-"):
        wrapper = BucketedDDP(model, bucket_size_mb=float(variant[len("bucketed-"):-len("MB")]))
    else:
        wrapper = {"naive": NaiveDDP, "flat": FlatDDP, "overlap": OverlapDDP}[variant](model)
    return wrapper, wrapper.finish_gradient_synchronization


def _measure(variant: str, base: Workload, plan: Plan) -> PhaseTimer:
    """Train a copy of ``base.model`` wrapped as ``variant``; return the timer of its timed steps."""
    model = copy.deepcopy(base.model)
    wrapped, finish = _wrap(variant, model, base.device)
    params = list(model.parameters())
    optimizer = torch.optim.AdamW(params, **adamw_options(params))
    scaler = torch.amp.GradScaler(base.device.type, enabled=plan.precision == "fp16")
    timer = PhaseTimer(base.device)
    for step in range(plan.warmup + plan.steps):
        if step == plan.warmup:
            timer.clear()
        optimizer.zero_grad(set_to_none=False)  # BucketedDDP keeps .grad as bucket views
        with timer.phase("forward"), base.autocast():
            loss = lm_loss(wrapped(base.inputs), base.targets)
        with timer.phase("backward"):
            scaler.scale(loss).backward()
        if finish is not None:
            with timer.phase("sync"):
                finish()
        with timer.phase("optimizer"):
            scaler.step(optimizer)
            scaler.update()
    return timer


def rounds_order(variants: Sequence[str], rounds: int) -> list[str]:
    """The order in which ``rounds`` passes run ``variants``: round ``r`` starts at variant ``r`` (mod count)."""
    return [variants[(r + i) % len(variants)] for r in range(rounds) for i in range(len(variants))]


def run_rank(rank: int, world_size: int, plan: Plan) -> list[dict[str, Any]]:
    """Everything one rank measures (inside an initialized process group); rows in plan order."""
    device = rank_device(plan.device_type)
    rows = []
    for size in plan.sizes:
        config = model_config(size, plan.context_length, attention=plan.attention)
        # seed=rank: different weights per rank (the wrappers broadcast rank 0's) and a batch of its own.
        base = Workload(config, batch_size=plan.batch_size, device=device, precision=plan.precision, seed=rank)
        size_rows = {
            variant: {"size": size, "parameters": parameter_count(config), "context_length": plan.context_length,
                      "batch_size_per_rank": plan.batch_size, "precision": plan.precision, "variant": variant,
                      "world_size": world_size, "rounds": plan.rounds}  # "status" once measured
            for variant in plan.variants
        }
        timers = {variant: PhaseTimer(device) for variant in plan.variants}
        order = rounds_order(plan.variants, plan.rounds)
        for variant in progress(order, f"benchkit ddp {size}") if rank == 0 else order:
            row = size_rows[variant]
            if row.get("status", "ok") != "ok":
                continue  # failed in an earlier round
            # A failure every rank hits alike (out of memory, an unsupported setting) is recorded and the
            # run goes on; one rank failing alone leaves the others waiting in a collective until the
            # process group's timeout.
            try:
                timers[variant].extend(_measure(variant, base, plan))
            except torch.OutOfMemoryError:
                row["status"] = "OOM"
            except Exception as error:  # noqa: BLE001 - recorded in the row, see above
                row["status"] = f"error: {type(error).__name__}: {error}"
            else:
                timer = timers[variant]  # the statistics of every round so far
                row.update(status="ok", phases=timer.summary(), step=summarize(timer.step_totals()))
            free_memory(device)  # after the except blocks: a traceback would keep the variant's model alive
            if rank == 0:
                measured = [r for r in size_rows.values() if "status" in r]
                write_results(plan.out_dir, "ddp.partial", rows + measured)
        rows += size_rows.values()
        del base
        free_memory(device)
    return rows


def add_derived_columns(rows: list[dict[str, Any]]) -> None:
    """Fill ``step_ms``, ``sync_ms``, ``over_local_ms``, ``hidden_pct`` and ``vs_torch`` (see the module
    docstring) in the rows with status ``"ok"``; the others get ``None``."""
    derived = ("step_ms", "step_std_ms", "sync_ms", "over_local_ms", "hidden_pct", "vs_torch")
    for row in rows:
        if row["status"] != "ok":
            row.update(dict.fromkeys(derived))
            continue
        row["step_ms"] = row["step"].mean * 1e3
        row["step_std_ms"] = row["step"].std * 1e3
        row["sync_ms"] = row["phases"]["sync"].mean * 1e3 if "sync" in row["phases"] else None
    for size in dict.fromkeys(row["size"] for row in rows):
        same = {row["variant"]: row for row in rows if row["size"] == size and row["status"] == "ok"}
        local, naive = same.get("local"), same.get("naive")
        torch_ddp = same.get(f"torch-ddp-{TORCH_DDP_BUCKET_MB}MB")
        for row in same.values():
            row["over_local_ms"] = row["step_ms"] - local["step_ms"] if local else None
            row["hidden_pct"] = (100 * (1 - row["sync_ms"] / naive["sync_ms"])
                                 if naive and row["sync_ms"] is not None and naive["sync_ms"] > 0 else None)
            row["vs_torch"] = row["step_ms"] / torch_ddp["step_ms"] if torch_ddp else None


def table_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The printed view: milliseconds, one line per (size, variant)."""
    def phase_ms(row, phase):
        return row["phases"][phase].mean * 1e3 if phase in row.get("phases", {}) else None

    return [
        {"size": row["size"], "ranks": row["world_size"], "variant": row["variant"], "step_ms": row["step_ms"],
         "std_ms": row["step_std_ms"], "fwd_ms": phase_ms(row, "forward"), "bwd_ms": phase_ms(row, "backward"),
         "sync_ms": row["sync_ms"], "opt_ms": phase_ms(row, "optimizer"), "over_local_ms": row["over_local_ms"],
         "hidden_%": row["hidden_pct"], "x_torch": row["vs_torch"], "status": row["status"]}
        for row in rows
    ]


def report(rows: list[dict[str, Any]], args: argparse.Namespace, *, world_size: int, backend: str) -> None:
    """Print the table and write ``ddp.json`` (+ CSV) and one PNG per size into ``args.out``."""
    add_derived_columns(rows)
    plan = rows[0]
    print(f"device: {device_name()}; {world_size} ranks over {backend}; "
          f"{plan['batch_size_per_rank']} x {plan['context_length']} tokens per rank; {plan['precision']}; "
          f"{args.warmup} warm-up + {args.steps} timed steps" + (f", {args.rounds} rounds" if args.rounds > 1 else ""))
    print(format_table(table_rows(rows)))
    meta = {**options_for_json(args), "world_size": world_size, "backend": backend}
    path = write_results(args.out, "ddp", rows, meta=meta, csv=args.csv)
    print(f"results: {path}")
    for size in dict.fromkeys(row["size"] for row in rows):
        same = [row for row in rows if row["size"] == size and row["status"] == "ok"]
        if not same:
            continue
        series = {"step": [row["step_ms"] for row in same]}
        if any(row["over_local_ms"] is not None for row in same):
            series["step minus local"] = [row["over_local_ms"] for row in same]
        if any(row["sync_ms"] is not None for row in same):
            series["in finish (sync)"] = [row["sync_ms"] for row in same]
        png = bar_plot(args.out / f"ddp_{size}.png", [row["variant"] for row in same], series,
                       title=f"{size}: ms per step, {world_size} ranks ({backend}), {plan['precision']}",
                       ylabel="ms (mean)", size=(max(800, PLOT_PX_PER_VARIANT * len(same)), 500))
        print(f"plot: {png}")


def run(args: argparse.Namespace) -> int:
    device = resolve_device(args.device)
    sizes = args.size or default_rank_sizes(device)
    plan = Plan(sizes=tuple(sizes), context_length=args.context_length, batch_size=args.batch_size,
                precision=args.precision, attention=args.attention,
                variants=tuple(variant_names(args.variants, args.bucket_mb)), warmup=args.warmup,
                steps=args.steps, rounds=args.rounds, device_type=device.type, out_dir=str(args.out))
    nproc = args.nproc or (torch.cuda.device_count() if device.type == "cuda" else 2)
    results = run_on_ranks(run_rank, nproc=nproc, device_type=device.type, timeout_s=args.timeout_s, args=(plan,))
    if results is None:
        return 0  # a rank other than 0 under torchrun: rank 0 reports
    rows = results[0]
    report(rows, args, world_size=len(results), backend=backend_for(device.type))
    return 0 if all(row["status"] == "ok" for row in rows) else 1
