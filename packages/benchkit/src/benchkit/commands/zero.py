"""``benchkit zero``: what ZeRO-1 saves per rank, against its formula, and what it costs per step.

For each ``--size`` and each ``--nproc``, data-parallel training of the reference
Transformer (``ddp.BucketedDDP``, fp32, ``--batch-size`` sequences per rank) runs
with each optimizer variant in turn, in the same processes:

- ``adamw``: plain ``torch.optim.AdamW``, every rank holding all of its state;
- ``zero1``: ``zero1.ShardedOptimizer`` over AdamW, bucketed parameter broadcast;
- ``zero1-per-param``: the same with one broadcast per parameter;
- ``torch-zero``: ``torch.distributed.optim.ZeroRedundancyOptimizer`` over AdamW.

Every variant's AdamW gets the same :func:`benchkit.workload.adamw_options`
(``fused=True`` on CUDA).

Measured per variant: ms per training step (forward + backward + gradient
all-reduce + optimizer step; mean and std over ``--steps`` after ``--warmup``)
and of the optimizer step alone; the optimizer-state bytes of each rank, summed
over its state tensors (any device); and on CUDA the memory allocated after
model creation, directly before and directly after the optimizer step of the
last step, and that whole step's peak (each the largest over the ranks). Predicted next to them
(:func:`zero1.predict_memory`, Rajbhandari et al. 2020): parameters + gradients
+ the rank's optimizer state, and the state bound ``(P / N + largest parameter)
* 8 bytes`` that ``state_vs_bound`` divides by.

Processes (:func:`benchkit.ranks.run_on_ranks`): ``--nproc 2 4`` starts 2,
then 4 local processes for each size (``ddp.launch.spawn``; NCCL with one GPU
per rank on CUDA, gloo on CPU). Under ``torchrun`` the processes are torchrun's
(``--nproc`` is ignored) and rank 0 writes the results.
"""

from __future__ import annotations

import argparse
from typing import Any

import torch

from benchkit.argtypes import positive_float, positive_int
from benchkit.memory import optimizer_state_bytes
from benchkit.model import TransformerLM, lm_loss, model_config, random_batch
from benchkit.plot import bar_plot
from benchkit.ranks import add_rank_arguments, default_rank_sizes, launched_by_torchrun, rank_device, run_on_ranks
from benchkit.report import add_output_arguments, device_name, format_table, options_for_json, write_results
from benchkit.timing import PhaseTimer, summarize
from benchkit.workload import adamw_options, free_memory, resolve_device

HELP = "ZeRO-1 per-rank memory vs the formula, step time vs ZeroRedundancyOptimizer and plain AdamW"
EXAMPLES = """\
  benchkit zero --nproc 2                                   # CPU: tiny model, 2 gloo processes
  benchkit zero --size small xl --nproc 2 4                 # GPU: NCCL, 2 then 4 GPUs
  torchrun --nproc-per-node 8 -m benchkit zero --size xl    # under torchrun, any number of nodes
"""

VARIANTS = ("adamw", "zero1", "zero1-per-param", "torch-zero")
DEFAULT_TIMEOUT_S = 900.0  # per group of ranks: the xl runs take minutes; a hang still ends
MIB = 2**20
# AdamW keeps exp_avg and exp_avg_sq, each shaped like its fp32 parameter: 2 x 4 bytes
# per parameter element (PyTorch's AdamW without amsgrad).
ADAMW_STATE_BYTES_PER_ELEMENT = 8

TIME_COLUMNS = ["size", "nproc", "variant", "step_ms", "step_ms_std", "optimizer_ms", "optimizer_ms_std"]
MEMORY_COLUMNS = [
    "size", "nproc", "variant", "model_MiB", "before_step_MiB", "predicted_before_step_MiB", "after_step_MiB",
    "peak_step_MiB", "state_MiB", "predicted_state_MiB", "state_bound_MiB", "state_vs_bound",
    "saving_MiB", "predicted_saving_MiB",
]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_rank_arguments(parser, context_length=256, timeout_s=DEFAULT_TIMEOUT_S)
    parser.add_argument("--nproc", type=positive_int, nargs="+", default=[2], metavar="N",
                        help="numbers of local processes to start, one run each (default: 2); "
                             "ignored under torchrun")
    parser.add_argument("--variants", choices=VARIANTS, nargs="+", default=list(VARIANTS),
                        help="optimizers to compare (default: all)")
    parser.add_argument("--warmup", type=positive_int, default=3,
                        help="untimed steps first; >= 1 so that the optimizer state exists (default: 3)")
    parser.add_argument("--steps", type=positive_int, default=10, help="timed steps (default: 10)")
    parser.add_argument("--bucket-size-mb", type=positive_float, default=25.0, metavar="MB",
                        help="bucket cap in MiB of BucketedDDP and of zero1's broadcast (default: 25)")
    add_output_arguments(parser)


# ---------------------------------------------------------------- one rank


def _make_optimizer(variant: str, params: list[torch.nn.Parameter], bucket_size_mb: float) -> torch.optim.Optimizer:
    """``variant``'s optimizer over ``params``; every variant runs AdamW with the same
    :func:`benchkit.workload.adamw_options` (fused on CUDA)."""
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


def _allocated(device: torch.device) -> int | None:
    return torch.cuda.memory_allocated(device) if device.type == "cuda" else None


def _measure_variant(size: str, variant: str, plan: dict[str, Any], device: torch.device, rank: int) -> dict[str, Any]:
    """One rank's measurements of one (size, variant): seconds per phase and bytes."""
    from ddp import BucketedDDP

    config = model_config(size, plan["context_length"])
    cuda = device.type == "cuda"
    torch.manual_seed(0)  # the same weights for every variant (BucketedDDP broadcasts rank 0's anyway)
    with torch.device(device):  # initialized where it lives, not on the CPU and then copied
        net = TransformerLM(config)
    model_bytes = _allocated(device)
    model = BucketedDDP(net, bucket_size_mb=plan["bucket_size_mb"])
    optimizer = _make_optimizer(variant, list(model.parameters()), plan["bucket_size_mb"])
    generator = torch.Generator().manual_seed(rank)  # each rank its own slice of data
    inputs, targets = random_batch(config, plan["batch_size"], device=device, generator=generator)

    timer = PhaseTimer(device)
    total_steps = plan["warmup"] + plan["steps"]
    for step in range(total_steps):
        if step == plan["warmup"]:
            timer.clear()
        last = step == total_steps - 1
        if last and cuda:
            torch.cuda.reset_peak_memory_stats(device)
        optimizer.zero_grad(set_to_none=False)  # keeps BucketedDDP's gradients as bucket views
        with timer.phase("forward_backward"):
            lm_loss(model(inputs), targets).backward()
            model.finish_gradient_synchronization()
        if last:
            before_step = _allocated(device)
        with timer.phase("optimizer"):
            optimizer.step()
        if last:
            after_step = _allocated(device)
            peak_step = torch.cuda.max_memory_allocated(device) if cuda else None
    return {
        "size": size,
        "variant": variant,
        "step_s": timer.step_totals(),
        "optimizer_s": timer.samples["optimizer"],
        "model_bytes": model_bytes,
        "before_step_bytes": before_step,
        "after_step_bytes": after_step,
        "peak_step_bytes": peak_step,
        "state_bytes": _state_bytes(optimizer),
    }


def _rank_main(rank: int, world_size: int, plan: dict[str, Any]) -> list[dict[str, Any]]:
    """Everything one rank measures, in plan order (runs inside an initialized process group)."""
    device = rank_device(plan["device_type"])
    results = []
    for size in plan["sizes"]:
        for variant in plan["variants"]:
            results.append(_measure_variant(size, variant, plan, device, rank))
            free_memory(device)  # the next variant starts from an empty allocator
    return results


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

        def worst(key: str) -> float | None:
            values = [r[key] for r in ranks]
            return None if values[0] is None else _mib(max(values))

        rows.append({
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
        })
    _add_savings(rows)
    return rows


def _add_savings(rows: list[dict[str, Any]]) -> None:
    """Measured saving: plain AdamW's memory before the step minus the variant's (CUDA only)."""
    baseline = {(r["size"], r["nproc"]): r["before_step_MiB"] for r in rows if r["variant"] == "adamw"}
    for row in rows:
        reference = baseline.get((row["size"], row["nproc"]))
        row["saving_MiB"] = None if reference is None or row["before_step_MiB"] is None else reference - row["before_step_MiB"]


def _plot(rows: list[dict[str, Any]], out_dir, memory_key: str) -> list:
    groups = list(dict.fromkeys(f"{r['size']} x{r['nproc']}" for r in rows))
    variants = list(dict.fromkeys(r["variant"] for r in rows))

    def series(key: str) -> dict[str, list[float | None]]:
        table = {(f"{r['size']} x{r['nproc']}", r["variant"]): r[key] for r in rows}
        return {v: [table.get((g, v)) for g in groups] for v in variants}

    return [
        bar_plot(out_dir / "zero_step_ms.png", groups, series("step_ms"),
                 title="ms per training step (size x processes)", ylabel="ms"),
        bar_plot(out_dir / "zero_memory.png", groups, series(memory_key),
                 title=f"{memory_key} per rank (largest rank)", ylabel="MiB"),
    ]


def run(args: argparse.Namespace) -> int:
    device = resolve_device(args.device)
    plan = {
        "sizes": args.size or default_rank_sizes(device),
        "variants": args.variants,
        "context_length": args.context_length,
        "batch_size": args.batch_size,
        "warmup": args.warmup,
        "steps": args.steps,
        "bucket_size_mb": args.bucket_size_mb,
        "device_type": device.type,
    }
    rows: list[dict[str, Any]] = []
    # Under torchrun the processes are torchrun's: one run, and run_on_ranks ignores its nproc.
    for nproc in args.nproc[:1] if launched_by_torchrun() else args.nproc:
        per_rank = run_on_ranks(_rank_main, nproc=nproc, device_type=device.type, timeout_s=args.timeout_s,
                                args=(plan,))
        if per_rank is None:
            return 0  # a rank other than 0 under torchrun: rank 0 reports
        rows += combine(per_rank, len(per_rank), args.context_length)

    print(f"device: {device_name()}; context {args.context_length}, batch {args.batch_size} per rank, "
          f"fp32; {args.warmup} warm-up + {args.steps} timed steps")
    print(format_table(rows, TIME_COLUMNS))
    print()
    print(format_table(rows, MEMORY_COLUMNS))
    path = write_results(args.out, "zero", rows, meta=options_for_json(args), csv=args.csv)
    plots = _plot(rows, path.parent, "before_step_MiB" if device.type == "cuda" else "state_MiB")
    print(f"results: {path}; plots: {', '.join(str(p) for p in plots)}")
    return 0
