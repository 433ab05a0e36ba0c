"""Scratch: are the rare long sync phases of BucketedDDP garbage-collection pauses on one rank?

python packages/benchkit/scratch/gc_stalls.py OUT_JSON size batch rounds
As benchkit ddp does, each round deep-copies the model per variant (torch DDP, BucketedDDP, OverlapDDP),
2 warm-up and 5 timed steps; every rank records each timed step's phases and the garbage collections
(generation, ms) that ran during it (gc.callbacks).
"""

import copy
import gc
import json
import sys
import time

import torch

from benchkit.data_parallel import wrap
from benchkit.devices import free_memory
from benchkit.model import model_config
from benchkit.ranks import run_on_ranks
from benchkit.timing import PhaseTimer
from benchkit.training import Trainer, adamw_options
from benchkit.workload import Workload

VARIANTS = ("torch-ddp-25MB", "bucketed-25MB", "overlap")
COLLECTIONS = []
_started = {}


def _gc_callback(phase, info):
    if phase == "start":
        _started["t"] = time.perf_counter()
    else:
        COLLECTIONS.append((info["generation"], (time.perf_counter() - _started.get("t", time.perf_counter())) * 1e3))


def rank_fn(rank, world_size, size, batch, rounds):
    gc.callbacks.append(_gc_callback)
    device = torch.device("cuda", torch.cuda.current_device())
    base = Workload(model_config(size, 512), batch_size=batch, device=device, precision="bf16", seed=rank)
    steps = []
    for r in range(rounds):
        for k in range(len(VARIANTS)):
            variant = VARIANTS[(r + k) % len(VARIANTS)]
            model = copy.deepcopy(base.model)
            wrapper = wrap(variant, model, device)
            params = list(model.parameters())
            optimizer = torch.optim.AdamW(params, **adamw_options(params))
            trainer = Trainer(model, optimizer, base.batches, precision="bf16", wrapper=wrapper, set_to_none=False)
            for _ in range(2):
                trainer.step("train-step")
            for i in range(5):
                timer = PhaseTimer(device)
                COLLECTIONS.clear()
                trainer.step("train-step", timer)
                steps.append(
                    {
                        "round": r,
                        "variant": variant,
                        "i": i,
                        "phases_ms": {p: s[0] * 1e3 for p, s in timer.samples.items()},
                        "gc": [(g, round(ms, 2)) for g, ms in COLLECTIONS],
                    }
                )
            del trainer, optimizer, params, wrapper, model
            free_memory(device)
    return {"steps": steps, "gc_counts": gc.get_count(), "objects": len(gc.get_objects())}


if __name__ == "__main__":
    path, size, batch, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    results = run_on_ranks(
        rank_fn, nproc=torch.cuda.device_count(), device_type="cuda", timeout_s=400, args=(size, batch, rounds)
    )
    json.dump(results, open(path, "w"), indent=1)
    print("objects per rank", [r["objects"] for r in results])
    for n, s0 in enumerate(results[0]["steps"]):
        s1 = results[1]["steps"][n]
        total = sum(s0["phases_ms"].values())
        flag = " <-- slow" if total > 1.15 * min(x["phases_ms"].get("backward", 0) + x["phases_ms"]["forward"] + x["phases_ms"].get("sync", 0) + x["phases_ms"]["optimizer"] for x in results[0]["steps"] if x["variant"] == s0["variant"]) else ""
        print(
            f"r{s0['round']} {s0['variant']:15s} {s0['i']} step {total:6.1f}  "
            + " ".join(f"{p} {v:5.1f}" for p, v in s0["phases_ms"].items())
            + f"  gc0 {s0['gc']} gc1 {s1['gc']}{flag}"
        )
