"""Scratch: what BucketedDDP's finish_gradient_synchronization() spends its host time on after backward.

python packages/benchkit/scratch/drain_cost.py OUT_JSON size batch steps
BucketedDDP alone; the launcher's drain instrumented: the time in Work.wait() and in complete() per step,
and a variant whose drain waits only for the last all-reduce (a process group's NCCL collectives run on one
stream, in issue order), interleaved step by step with the package's.
"""

import copy
import json
import statistics
import sys
import time

import torch

import ddp.ordering
from benchkit.devices import free_memory
from benchkit.model import model_config
from benchkit.ranks import run_on_ranks
from benchkit.timing import PhaseTimer
from benchkit.training import Trainer, adamw_options
from benchkit.workload import Workload
from ddp import BucketedDDP

COST = {"wait": 0.0, "complete": 0.0, "units": 0}
VARIANTS = ("wait-each", "complete-each", "wait-last")


def instrumented_drain(self, complete):
    try:
        while self._next < len(self.units):
            self._launch_next()
        last = len(self._in_flight) - 1
        for n, (unit, work) in enumerate(self._in_flight):
            t0 = time.perf_counter()
            if not getattr(self, "_last_only", False) or n == last:
                work.wait()
            t1 = time.perf_counter()
            if complete and self._complete is not None:
                self._complete(unit)
            t2 = time.perf_counter()
            COST["wait"] += t1 - t0
            COST["complete"] += t2 - t1
            COST["units"] += 1
    finally:
        self._reset()


def rank_fn(rank, world_size, size, batch, steps):
    ddp.ordering.InOrderLauncher._drain = instrumented_drain
    device = torch.device("cuda", torch.cuda.current_device())
    base = Workload(model_config(size, 512), batch_size=batch, device=device, precision="bf16", seed=rank)
    trainers, wrappers, timers, costs = {}, {}, {}, {}
    for variant in VARIANTS:
        model = copy.deepcopy(base.model)
        wrapper = BucketedDDP(model, 25.0)
        params = list(model.parameters())
        optimizer = torch.optim.AdamW(params, **adamw_options(params))
        trainers[variant] = Trainer(model, optimizer, base.batches, precision="bf16", wrapper=wrapper, set_to_none=False)
        wrappers[variant] = wrapper
        timers[variant] = PhaseTimer(device)
        costs[variant] = []
        for _ in range(3):
            trainers[variant].step("train-step")
        wrapper._launcher._last_only = variant == "wait-last"
        if variant == "complete-each":  # the launcher as before: a (no-op) completion call per bucket
            wrapper._launcher._complete = wrapper._complete
    for i in range(steps):
        for k in range(len(VARIANTS)):
            variant = VARIANTS[(i + k) % len(VARIANTS)]
            COST.update(wait=0.0, complete=0.0, units=0)
            trainers[variant].step("train-step", timers[variant])
            costs[variant].append(dict(COST))
    # the two variants trained the same data from the same weights: their parameters should agree
    diffs = max(
        (a - b).abs().max().item()
        for a, b in zip(wrappers["wait-each"].module.parameters(), wrappers["wait-last"].module.parameters())
    )
    out = {
        v: {
            "phases_ms": {k: [s * 1e3 for s in x] for k, x in timers[v].samples.items()},
            "wait_ms": [c["wait"] * 1e3 for c in costs[v]],
            "complete_ms": [c["complete"] * 1e3 for c in costs[v]],
            "units": costs[v][0]["units"],
        }
        for v in trainers
    }
    out["max_param_diff"] = diffs
    del trainers, wrappers
    free_memory(device)
    return out


if __name__ == "__main__":
    path, size, batch, steps = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    results = run_on_ranks(
        rank_fn, nproc=torch.cuda.device_count(), device_type="cuda", timeout_s=300, args=(size, batch, steps)
    )
    json.dump(results, open(path, "w"), indent=1)
    for rank, r in enumerate(results):
        print(f"rank {rank}: max parameter difference between the variants {r['max_param_diff']}")
        for v in VARIANTS:
            x = r[v]
            med = {k: round(statistics.median(s), 2) for k, s in x["phases_ms"].items()}
            print(
                f"  {v}: units {x['units']} wait {statistics.median(x['wait_ms']):.2f} ms "
                f"complete {statistics.median(x['complete_ms']):.2f} ms  phases median {med}"
            )
