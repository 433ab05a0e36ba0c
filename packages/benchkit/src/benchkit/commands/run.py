"""``benchkit run``: the end-to-end tour of this repository on whatever machine it finds (:mod:`benchkit.tour`).

Writes ``report.md`` (tables and figures; it says which parallel check ran and
why, and which flashattn2 backend), ``results.json`` (every row, environment
recorded), the figures and ``accounting/`` into ``--out``, and exits with
status 1 if a parallel check fails.
"""

from __future__ import annotations

import argparse
import time

from benchkit.accounting import AccountingSettings, run_accounting
from benchkit.attention import plot_sweep, run_sweep
from benchkit.devices import free_memory, resolve_device
from benchkit.options import add_device_argument, add_output_arguments, add_size_argument
from benchkit.parallel_check import COLUMNS as PARALLEL_COLUMNS
from benchkit.parallel_check import parallel_checks, parallel_plan
from benchkit.plot import save_figure
from benchkit.report import environment, format_table, write_results
from benchkit.tour import (
    ACCOUNTING_COLUMNS,
    ATTENTION_COLUMNS,
    PLANS,
    Tour,
    plot_model_phases,
    run_model_section,
    tour_plan,
)
from benchkit.workload import table_rows

HELP = "the end-to-end tour: model phases, attention, DDP and ZeRO-1 vs one process, accounting; writes a report"
EXAMPLES = """\
  benchkit run                                   # CPU: about a minute; GPU: real sizes
  benchkit run --size small                      # the model section at another size
  benchkit run --out /tmp/tour --format svg && less /tmp/tour/report.md
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_device_argument(parser)
    add_size_argument(parser, gpu_sizes=PLANS["cuda"].model.sizes, what="model section's sizes")
    add_output_arguments(parser, figures=True)


def run(args: argparse.Namespace) -> int:
    started = time.monotonic()
    device = resolve_device(args.device)
    plan = tour_plan(device, sizes=tuple(args.size or ()))
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    env = environment()
    print(f"benchkit run on {env['device']} (torch {env['torch']}); writing {out}/")

    print("\n[1/4] model phase timings")
    model_rows = run_model_section(plan.model, device)
    print(format_table(table_rows(model_rows)))

    print("\n[2/4] attention")
    attention_rows = run_sweep(plan.attention, device)
    print(format_table(attention_rows, ATTENTION_COLUMNS))

    parallel = parallel_plan(device)
    print(f"\n[3/4] data parallel and ZeRO-1 against one process ({parallel.describe()}: {parallel.reason})")
    free_memory(device)  # on CUDA, rank 0 shares this process's GPU
    parallel_rows = parallel_checks(parallel)
    print(format_table(parallel_rows, PARALLEL_COLUMNS))

    print("\n[4/4] accounting example (benchkit accounting's defaults)")
    accounting = run_accounting(AccountingSettings())
    print(format_table(accounting.rows, ACCOUNTING_COLUMNS))
    write_results(out / "accounting", "accounting", accounting.rows, meta=accounting.meta(), csv=args.csv)

    tour = Tour(
        env, plan, model_rows, attention_rows, parallel, parallel_rows, accounting, seconds=time.monotonic() - started
    )
    figures = {
        "model": {"model_phases": plot_model_phases(model_rows, plan.model)},
        "attention": plot_sweep(attention_rows),
        "accounting": {"accounting/accounting": accounting.figure()},
    }
    names = {
        section: [
            save_figure(figure, out, name, args.format).relative_to(out).as_posix()
            for name, figure in by_name.items()
            if figure is not None
        ]
        for section, by_name in figures.items()
    }
    results = write_results(out, "results", tour.rows(), meta={"plan": plan, "parallel": parallel}, csv=args.csv)
    report = out / "report.md"
    report.write_text(tour.report(names))
    print(f"\nreport: {report}\nresults: {results}")
    if not tour.ok:
        print("benchkit run: a parallel run differs from single-process training beyond the tolerance")
    return 0 if tour.ok else 1
