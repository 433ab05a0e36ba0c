"""``benchkit run``: the end-to-end tour of this repository on whatever machine it finds.

Four sections, each measured here and now:

1. **model**: phase timings (forward, backward, optimizer) of the reference
   Transformer in fp32 and bf16 autocast (:mod:`benchkit.commands.model`);
2. **attention**: naive vs SDPA vs ``flashattn2`` forward/backward time across
   sequence lengths (:func:`benchkit.commands.attention.run_sweep`);
3. **parallel**: 2-process data-parallel training with ``ddp.BucketedDDP``, with
   plain AdamW and with ZeRO-1 (``zero1.ShardedOptimizer``), each checked against
   single-process training on the same global batch, in float64: the largest
   absolute parameter difference must stay under :data:`PARALLEL_TOLERANCE`;
4. **accounting**: the default example of ``benchkit accounting`` (FFN-only XXL
   model on H100 and TPU v5p).

On a CPU it uses the tiny model and small attention shapes and finishes in about
a minute on 2 cores; on a GPU, real sizes. The parallel check always runs 2 gloo
processes on the CPU with the tiny model (multi-GPU NCCL runs are ``benchkit
ddp``'s and ``benchkit zero``'s job). Writes ``report.md`` (tables and plots),
``results.json`` (every row, environment recorded) and PNG plots into ``--out``,
and exits with status 1 if a parallel check fails.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any, Callable

import torch

from benchkit.commands import accounting as accounting_command
from benchkit.commands.attention import plot_sweep, run_sweep
from benchkit.commands.model import benchmark, table_rows
from benchkit.model import ModelConfig, TransformerLM, lm_loss, model_config, random_batch
from benchkit.plot import bar_plot
from benchkit.report import add_output_arguments, environment, format_table, progress, write_results
from benchkit.workload import add_device_argument, resolve_device

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

# The parallel check: 2 ranks, each with half of a global batch of 4 sequences of
# 32 tokens, 5 AdamW steps at lr 1e-3, gradient buckets of 1 MiB (the tiny model's
# gradients then span several buckets). It runs in float64: in float32, AdamW's
# first update g / (|g| + eps) turns the ~1e-8 rounding difference between an
# averaged and a full-batch gradient into parameter differences of ~1e-5 wherever
# |g| is near eps, which would hide real errors of that size.
PARALLEL = dict(world_size=2, global_batch=4, context_length=32, steps=5, lr=1e-3, bucket_size_mb=1.0,
                dtype=torch.float64)
# In float64 the two trainings agree to ~1e-14 (measured: 6e-15). Even an error that
# AdamW's scale invariance nearly hides, summing the ranks' gradients instead of
# averaging them, moves parameters 6e-4 away (measured), far beyond this bound.
PARALLEL_TOLERANCE = 1e-10
# Wall-clock limit of one 2-process run (process start, imports, 5 steps).
PARALLEL_TIMEOUT_S = 120.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_device_argument(parser)
    add_output_arguments(parser)


def _train(model: torch.nn.Module, optimizer: torch.optim.Optimizer, inputs: torch.Tensor, targets: torch.Tensor,
           steps: int, finish: Callable[[], None] | None = None) -> None:
    """``steps`` optimizer steps on one batch; ``finish`` runs between backward and
    the step (a data-parallel wrapper's gradient synchronization)."""
    for _ in range(steps):
        optimizer.zero_grad(set_to_none=True)
        lm_loss(model(inputs), targets).backward()
        if finish is not None:
            finish()
        optimizer.step()


def _parallel_rank(rank: int, world_size: int, config: ModelConfig, inputs: torch.Tensor, targets: torch.Tensor,
                   zero: bool) -> list[torch.Tensor]:
    """One rank of the data-parallel run (started by ``ddp.launch.spawn``); returns its parameters."""
    from ddp import BucketedDDP
    from zero1 import ShardedOptimizer

    torch.manual_seed(0)
    model = BucketedDDP(TransformerLM(config).to(PARALLEL["dtype"]), bucket_size_mb=PARALLEL["bucket_size_mb"])
    if zero:
        optimizer = ShardedOptimizer(model.parameters(), torch.optim.AdamW, lr=PARALLEL["lr"])
    else:
        optimizer = torch.optim.AdamW(model.parameters(), lr=PARALLEL["lr"])
    per_rank = inputs.shape[0] // world_size
    mine = slice(rank * per_rank, (rank + 1) * per_rank)
    _train(model, optimizer, inputs[mine], targets[mine], PARALLEL["steps"], finish=model.finish_gradient_synchronization)
    return [p.detach().clone() for p in model.module.parameters()]


def parallel_checks() -> list[dict[str, Any]]:
    """Train the tiny model in one process, then with 2-process BucketedDDP (AdamW,
    and ZeRO-1 AdamW); one row per parallel run with its largest parameter
    difference to the single-process result over all ranks."""
    from ddp.launch import spawn

    config = model_config("tiny", PARALLEL["context_length"])
    inputs, targets = random_batch(config, PARALLEL["global_batch"], generator=torch.Generator().manual_seed(1))
    torch.manual_seed(0)
    reference = TransformerLM(config).to(PARALLEL["dtype"])
    _train(reference, torch.optim.AdamW(reference.parameters(), lr=PARALLEL["lr"]), inputs, targets, PARALLEL["steps"])
    rows = []
    for zero, setup in ((False, "BucketedDDP + AdamW"), (True, "BucketedDDP + ZeRO-1 AdamW")):
        per_rank = spawn(_parallel_rank, PARALLEL["world_size"], args=(config, inputs, targets, zero),
                         timeout_s=PARALLEL_TIMEOUT_S)
        diff = max((p - q).abs().max().item() for params in per_rank for p, q in zip(params, reference.parameters()))
        rows.append({"setup": setup, "world_size": PARALLEL["world_size"], "steps": PARALLEL["steps"],
                     "max_abs_param_diff": diff, "tolerance": PARALLEL_TOLERANCE, "ok": diff <= PARALLEL_TOLERANCE})
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

    print("\n[3/4] data parallel and ZeRO-1 against one process (2 gloo processes, tiny model, float64)")
    parallel_rows = parallel_checks()
    parallel_table = format_table(parallel_rows)
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
    results = write_results(out, "results", rows, meta={"plan": plan, "parallel": PARALLEL,
                                                        "parallel_tolerance": PARALLEL_TOLERANCE}, csv=args.csv)
    report = out / "report.md"
    report.write_text(_report_markdown(
        env, plan, model_table, model_plot, attention_table, attention_plots, parallel_table, all_ok,
        accounting_rows, time.monotonic() - started,
    ))
    print(f"\nreport: {report}\nresults: {results}")
    if not all_ok:
        print("benchkit run: a parallel run differs from single-process training beyond the tolerance")
    return 0 if all_ok else 1


def _report_markdown(env, plan, model_table, model_plot, attention_table, attention_plots, parallel_table,
                     all_ok, accounting_rows, seconds) -> str:
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

{PARALLEL["world_size"]} gloo processes on the CPU, tiny model, each rank half of a global batch of
{PARALLEL["global_batch"]} x {PARALLEL["context_length"]} tokens, {PARALLEL["steps"]} AdamW steps at lr {PARALLEL["lr"]},
in float64 (see `benchkit.commands.run.PARALLEL`); parameters compared with single-process training on the whole batch. **{"PASS" if all_ok else "FAIL"}**
(tolerance {PARALLEL_TOLERANCE}).

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
