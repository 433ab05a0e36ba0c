"""``benchkit run``: the end-to-end tour of this repository on whatever machine it finds.

Four sections, each measured here and now:

1. **model**: phase timings (forward, backward, optimizer) of the reference
   Transformer in fp32 and bf16 autocast (:mod:`benchkit.commands.model`);
2. **attention**: naive vs SDPA vs ``flashattn2`` forward/backward time across
   sequence lengths (:func:`benchkit.commands.attention.run_sweep`);
3. **parallel**: data-parallel training with ``ddp.BucketedDDP``, with plain
   AdamW and with ZeRO-1 (``zero1.ShardedOptimizer``), each checked against
   single-process training on the same global batch (:func:`parallel_plan` picks
   how, :func:`parallel_checks` runs it);
4. **accounting**: the default example of ``benchkit accounting`` (FFN-only XXL
   model on H100 and TPU v5p).

On a CPU it uses the tiny model and small attention shapes and finishes in about
a minute on 2 cores; on a GPU, real sizes. The parallel check runs one process
per GPU over NCCL, with the small model in float32, on a machine with at least 2
GPUs (:data:`CUDA_PARALLEL`); otherwise (one GPU, or a CPU) 2 gloo processes on
the CPU with the tiny model in float64 (:data:`CPU_PARALLEL`). Writes
``report.md`` (tables and plots; it says which check ran and why),
``results.json`` (every row, environment recorded) and PNG plots into ``--out``,
and exits with status 1 if a parallel check fails.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import time
from pathlib import Path
from typing import Any, Callable, Iterable

import torch

from benchkit.commands import accounting as accounting_command
from benchkit.commands.attention import plot_sweep, run_sweep
from benchkit.commands.model import benchmark, table_rows
from benchkit.model import TransformerLM, lm_loss, model_config, random_batch
from benchkit.plot import bar_plot
from benchkit.ranks import backend_for, rank_device
from benchkit.report import add_output_arguments, environment, format_table, progress, write_results
from benchkit.workload import adamw_options, add_device_argument, free_memory, resolve_device

HELP = "the end-to-end tour: model phases, attention, DDP and ZeRO-1 vs one process, accounting; writes a report"
EXAMPLES = """\
  benchkit run                                   # CPU: about a minute; GPU: real sizes
  benchkit run --out /tmp/tour && less /tmp/tour/report.md
"""

# What each section measures on each kind of device. CPU: small enough for well under
# a minute on 2 cores, also when flashattn2 runs in Triton's interpreter
# (TRITON_INTERPRET=1, as in CI), where one (N=128, D=16, H=2) cell takes seconds;
# CUDA: the sizes at context 256 and the attention lengths where the N^2
# score matrix starts to matter.
PLANS: dict[str, dict[str, Any]] = {
    "cpu": {
        "model": dict(sizes=["tiny"], context_length=128, batch_size=4, precisions=["fp32", "bf16"], warmup=2, steps=5),
        "attention": dict(seq_lens=[32, 64, 128], head_dims=[16], dtypes=["fp32"],
                          implementations=["naive", "sdpa", "flashattn2"], heads=2, reps=2),
    },
    "cuda": {
        "model": dict(sizes=["small", "medium", "large"], context_length=256, batch_size=4,
                      precisions=["fp32", "bf16"], warmup=5, steps=10),
        "attention": dict(seq_lens=[1024, 4096, 16384], head_dims=[64], dtypes=["bf16"],
                          implementations=["naive", "sdpa", "flashattn2"], heads=16, reps=10),
    },
}


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
        lr: AdamW's learning rate (other options: :func:`benchkit.workload.adamw_options`).
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
CPU_PARALLEL = ParallelPlan(device_type="cpu", world_size=2, size="tiny", context_length=32, batch_per_rank=2,
                            steps=5, lr=1e-3, bucket_size_mb=1.0, dtype=torch.float64, max_abs_tolerance=1e-10,
                            timeout_s=120.0)
# The GPU check: the small model (128.6M parameters) at context 256, 4 sequences per
# rank (benchkit ddp's and zero's default), 5 AdamW steps at lr 1e-3, buckets of
# 25 MiB (PyTorch DDP's default; small's 491 MiB of float32 gradients span about
# 20). float32 without autocast: bf16 autocast would round every matmul input to 8
# significant bits and raise the noise floor the check is measured against
# (PARALLEL_NOISE_FACTOR) far above float32's; the check is about the communication,
# not the precision. world_size is filled in by parallel_plan. The deadline:
# starting a CUDA context and an NCCL communicator per process takes tens of
# seconds, the 4 trainings seconds; a hang still ends.
CUDA_PARALLEL = ParallelPlan(device_type="cuda", world_size=2, size="small", context_length=256, batch_per_rank=4,
                             steps=5, lr=1e-3, bucket_size_mb=25.0, dtype=torch.float32, max_abs_tolerance=None,
                             timeout_s=300.0)
# At most this many GPUs take part (one rank each). 4 ranks already give ZeRO-1 owners
# in the middle of the rank order and NCCL a ring of more than two; more would only
# grow the global batch (4 sequences per rank) that the single-process reference
# trains on one GPU, and the start-up time.
MAX_CUDA_RANKS = 4
# The relative check (plans without max_abs_tolerance): a parallel run passes if its
# rel_update_diff is at most this many times the split-batch run's. Both differ from
# the reference only by rounding in another order, so their differences are of one
# size; measured on the CPU in float32 (tiny and small models, 2-4 gloo ranks, the
# plan's steps and lr; 2026-11-22), the ratio was 1.0 with 2 and 4 ranks
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
        return dataclasses.replace(CUDA_PARALLEL, world_size=world_size, reason=(
            f"{gpus} CUDA GPUs visible: one NCCL process on each of {world_size} (at most {MAX_CUDA_RANKS})"))
    if device.type == "cuda":
        reason = "1 CUDA GPU visible, and NCCL needs one GPU per process: the CPU check instead"
    else:
        reason = "the tour runs on the CPU"
    return dataclasses.replace(CPU_PARALLEL, reason=reason)


def compare_parameters(result: Iterable[torch.Tensor], reference: Iterable[torch.Tensor],
                       initial: Iterable[torch.Tensor]) -> dict[str, float]:
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


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_device_argument(parser)
    add_output_arguments(parser)


def _train(model: torch.nn.Module, optimizer: torch.optim.Optimizer, batches: list[tuple[torch.Tensor, torch.Tensor]],
           steps: int, finish: Callable[[], None] | None = None) -> None:
    """``steps`` optimizer steps; each accumulates the gradient of the mean loss over
    ``batches`` ((inputs, targets) pairs of equal size), then ``finish`` runs (a
    data-parallel wrapper's gradient synchronization), then the optimizer steps."""
    for _ in range(steps):
        optimizer.zero_grad(set_to_none=True)
        for inputs, targets in batches:
            (lm_loss(model(inputs), targets) / len(batches)).backward()
        if finish is not None:
            finish()
        optimizer.step()


def _adamw(params: Iterable[torch.nn.Parameter], plan: ParallelPlan, sharded: bool) -> torch.optim.Optimizer:
    """AdamW over ``params`` with :func:`benchkit.workload.adamw_options`, under
    ``zero1.ShardedOptimizer`` if ``sharded``."""
    from zero1 import ShardedOptimizer

    params = list(params)
    options = adamw_options(params, lr=plan.lr)
    if sharded:
        return ShardedOptimizer(params, torch.optim.AdamW, **options)
    return torch.optim.AdamW(params, **options)


PARALLEL_SETUPS = {"BucketedDDP + AdamW": False, "BucketedDDP + ZeRO-1 AdamW": True}  # setup -> sharded
PARALLEL_COLUMNS = ["setup", "world_size", "max_abs_param_diff", "rel_update_diff", "split_rel_update_diff",
                    "checked", "tolerance", "ok"]


def _parallel_rank(rank: int, world_size: int, plan: ParallelPlan) -> dict[str, dict[str, float]]:
    """One rank of the parallel check (started by ``ddp.launch.spawn``), on its own device.

    Trains from one initialization: the reference (one process, the whole global
    batch), ``"split"`` (one process, the global batch as ``world_size``
    micro-batches whose gradients accumulate: the same arithmetic as the ranks',
    rounded in another order; rank 0 only), and this rank's slice under
    ``BucketedDDP`` for each of :data:`PARALLEL_SETUPS`. Returns
    :func:`compare_parameters` of each against the reference, keyed by setup and
    on rank 0 ``"split"``. Every rank trains the reference itself: no parameters
    cross processes, only these numbers.
    """
    from ddp import BucketedDDP

    device = rank_device(plan.device_type)
    config = model_config(plan.size, plan.context_length)
    inputs, targets = random_batch(config, world_size * plan.batch_per_rank, device=device,
                                   generator=torch.Generator().manual_seed(1))
    batches = list(zip(inputs.chunk(world_size), targets.chunk(world_size)))  # rank r's slice is batches[r]
    torch.manual_seed(0)
    initial = TransformerLM(config).to(device=device, dtype=plan.dtype)  # copied, never trained

    def trained(batches: list[tuple[torch.Tensor, torch.Tensor]], sharded: bool = False,
                parallel: bool = False) -> torch.nn.Module:
        """A copy of ``initial`` after ``plan.steps`` steps on ``batches`` (int64 (B, T)
        inputs and targets), under ``BucketedDDP`` if ``parallel`` (returned unwrapped)."""
        model = copy.deepcopy(initial)
        finish = None
        if parallel:
            model = BucketedDDP(model, bucket_size_mb=plan.bucket_size_mb)
            finish = model.finish_gradient_synchronization
        _train(model, _adamw(model.parameters(), plan, sharded), batches, plan.steps, finish)
        return model.module if parallel else model

    reference = trained([(inputs, targets)])
    results = {}
    if rank == 0:  # the same on every rank: measured once
        results["split"] = compare_parameters(trained(batches).parameters(), reference.parameters(),
                                              initial.parameters())
    for setup, sharded in PARALLEL_SETUPS.items():
        model = trained([batches[rank]], sharded=sharded, parallel=True)
        results[setup] = compare_parameters(model.parameters(), reference.parameters(), initial.parameters())
    return results


def parallel_checks(plan: ParallelPlan) -> list[dict[str, Any]]:
    """Run ``plan`` on ``plan.world_size`` spawned ranks; one row per setup of
    :data:`PARALLEL_SETUPS` with its differences to single-process training (the
    largest over the ranks), the split-batch run's ``rel_update_diff`` (rounding
    noise), the quantity checked, its tolerance (:func:`parallel_tolerance`) and ``ok``."""
    from ddp.launch import spawn

    per_rank = spawn(_parallel_rank, plan.world_size, args=(plan,), backend=backend_for(plan.device_type),
                     timeout_s=plan.timeout_s)
    split = per_rank[0]["split"]["rel_update_diff"]
    checked, tolerance = parallel_tolerance(plan, split)
    rows = []
    for setup in PARALLEL_SETUPS:
        row = {"setup": setup, "device": plan.device_type, "world_size": plan.world_size, "size": plan.size,
               "dtype": plan.dtype, "steps": plan.steps}
        for key in ("max_abs_param_diff", "rel_update_diff"):
            row[key] = max(results[setup][key] for results in per_rank)
        row.update(split_rel_update_diff=split, checked=checked, tolerance=tolerance, ok=row[checked] <= tolerance)
        rows.append(row)
    return rows


def run(args: argparse.Namespace) -> int:
    started = time.monotonic()
    device = resolve_device(args.device)
    plan = PLANS[device.type]
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    env = environment()
    print(f"benchkit run on {env['device']} (torch {env['torch']}); writing {out}/")

    print("\n[1/4] model phase timings")
    mp = plan["model"]
    grid = [(size, precision) for size in mp["sizes"] for precision in mp["precisions"]]
    model_rows = [
        benchmark(size, mp["context_length"], "train-step", precision, batch_size=mp["batch_size"], attention="sdpa",
                  compile=False, device=device, warmup=mp["warmup"], steps=mp["steps"])
        for size, precision in progress(grid, "model", total=len(grid))
    ]
    model_table = format_table(table_rows(model_rows))
    print(model_table)
    ok_rows = [r for r in model_rows if r["status"] == "ok"]
    model_plot = bar_plot(
        out / "model_phases.png", [f"{r['size']} {r['precision']}" for r in ok_rows],
        {phase: [r["phases"][phase].mean * 1e3 for r in ok_rows] for phase in ("forward", "backward", "optimizer")},
        title=f"Train-step phases, context {mp['context_length']}, batch {mp['batch_size']}", ylabel="ms (mean)",
    )

    print("\n[2/4] attention")
    ap = plan["attention"]
    attention_rows = run_sweep(seq_lens=ap["seq_lens"], head_dims=ap["head_dims"], dtypes=ap["dtypes"],
                               implementations=ap["implementations"], heads=ap["heads"], device=device, reps=ap["reps"])
    attention_columns = ["implementation", "dtype", "seq_len", "head_dim", "forward_ms", "backward_ms",
                         "forward_backward_ms", "peak_memory_mib", "status"]
    attention_table = format_table(attention_rows, attention_columns)
    print(attention_table)
    attention_plots = plot_sweep(attention_rows, out)

    parallel = parallel_plan(device)
    print(f"\n[3/4] data parallel and ZeRO-1 against one process ({parallel.describe()}: {parallel.reason})")
    free_memory(device)  # on CUDA, rank 0 shares this process's GPU
    parallel_rows = parallel_checks(parallel)
    parallel_table = format_table(parallel_rows, PARALLEL_COLUMNS)
    print(parallel_table)

    print("\n[4/4] accounting example (benchkit accounting's defaults)")
    parser = argparse.ArgumentParser(prog="benchkit accounting")
    accounting_command.add_arguments(parser)
    accounting_args = parser.parse_args(["--out", str(out / "accounting")])
    accounting_command.run(accounting_args)
    accounting_rows = json.loads((out / "accounting" / "accounting.json").read_text())["rows"]

    all_ok = all(r["ok"] for r in parallel_rows)
    rows = ([{"section": "model", **r} for r in model_rows] + [{"section": "attention", **r} for r in attention_rows]
            + [{"section": "parallel", **r} for r in parallel_rows]
            + [{"section": "accounting", **r} for r in accounting_rows])
    results = write_results(out, "results", rows, meta={"plan": plan, "parallel": parallel}, csv=args.csv)
    report = out / "report.md"
    report.write_text(_report_markdown(
        env, plan, model_table, model_plot, attention_table, attention_plots, parallel, parallel_table, all_ok,
        accounting_rows, time.monotonic() - started,
    ))
    print(f"\nreport: {report}\nresults: {results}")
    if not all_ok:
        print("benchkit run: a parallel run differs from single-process training beyond the tolerance")
    return 0 if all_ok else 1


def _parallel_method(parallel: ParallelPlan) -> str:
    """The report's paragraph on how the parallel check of ``parallel`` compares."""
    if parallel.max_abs_tolerance is not None:
        return (f"The check: the largest absolute parameter difference (`max_abs_param_diff`) at most "
                f"{parallel.max_abs_tolerance:g} (see `CPU_PARALLEL`: in float64 rounding leaves ~1e-14, "
                f"summing instead of averaging the gradients ~6e-4).")
    return (f"The results are not bitwise equal: a split batch is summed in another order (by cuBLAS, and by "
            f"the all-reduce). The check: "
            f"`rel_update_diff` (for the worst parameter tensor, the difference to the reference as a share of "
            f"the reference's update of that tensor) at most {PARALLEL_NOISE_FACTOR:g} x the same measure of a "
            f"single process that takes the global batch as {parallel.world_size} accumulated micro-batches "
            f"(`split_rel_update_diff`: rounding noise alone).")


def _report_markdown(env, plan, model_table, model_plot, attention_table, attention_plots, parallel,
                     parallel_table, all_ok, accounting_rows, seconds) -> str:
    mp = plan["model"]
    accounting_table = format_table(accounting_rows, ["device", "devices", "total_gb", "fits", "compute_ms", "comm_ms",
                                                      "bound_by", "compute_bound_batch"])
    images = "\n".join(f"![{p.stem}]({p.name})" for p in attention_plots)
    environment_lines = "\n".join(f"- {key}: {value}" for key, value in env.items())
    return f"""# benchkit run

{environment_lines}
- wall time of the tour: {seconds:.0f} s

## 1. Model phase timings

Train steps of the reference Transformer (sizes {", ".join(mp["sizes"])}), context {mp["context_length"]},
batch {mp["batch_size"]}, {mp["warmup"]} warm-up then {mp["steps"]} timed steps, device synchronized after
each phase; times in ms (mean unless named), MFU only on a GPU of known peak (`benchkit.flops`).

```
{model_table}
```

![model phases]({model_plot.name})

## 2. Attention

Causal attention on (1, H={plan["attention"]["heads"]}, N, D) inputs; medians in ms; peak memory only on CUDA.

```
{attention_table}
```

{images}

## 3. Data parallel and ZeRO-1 against one process

{parallel.describe()} ({parallel.reason}; see `benchkit.commands.run.parallel_plan`).
Each rank trains its {parallel.batch_per_rank} of a global batch of {parallel.world_size * parallel.batch_per_rank} sequences of {parallel.context_length} tokens
for {parallel.steps} AdamW steps at lr {parallel.lr}; its parameters are compared with single-process training on
the whole batch (the largest difference over the ranks).
{_parallel_method(parallel)} **{"PASS" if all_ok else "FAIL"}**

```
{parallel_table}
```

## 4. Accounting example

`benchkit accounting` with its defaults (formulas in its `--help` and the README); files in `accounting/`.

```
{accounting_table}
```

![accounting](accounting/accounting.png)
"""
