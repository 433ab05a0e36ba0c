"""Scratch: where a data-parallel step's communication goes, BucketedDDP against torch DDP.

python packages/benchkit/scratch/ddp_timeline.py OUT_DIR [size] [variant ...]
Each rank trains one variant at a time (bf16 autocast, context 512, batch 4, fused AdamW, zeroing in
place, as benchkit ddp does): 3 warm-up steps, 12 timed steps (CUDA events, per phase), then 2 steps
under torch.profiler. Rank 0 writes the per-step times and a summary of its trace: the NCCL kernels'
start, end and busy time against the backward's compute span, per step.
"""

import copy
import json
import sys

import torch

from benchkit.data_parallel import wrap
from benchkit.devices import free_memory
from benchkit.model import model_config
from benchkit.ranks import run_on_ranks
from benchkit.timing import PhaseTimer
from benchkit.training import Trainer, adamw_options
from benchkit.workload import Workload


def summarize_trace(path):
    events = json.load(open(path))["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    phases = [e for e in events if e.get("cat") == "gpu_user_annotation"]
    cpu_phases = [e for e in events if e.get("cat") == "user_annotation" and e["name"] in ("forward", "backward", "sync", "optimizer")]
    steps = []
    fwd = sorted([e for e in cpu_phases if e["name"] == "forward"], key=lambda e: e["ts"])
    for i, f in enumerate(fwd):
        start = f["ts"]
        end = fwd[i + 1]["ts"] if i + 1 < len(fwd) else float("inf")
        ks = [k for k in kernels if start <= k["ts"] < end + 1e9 and k["args"].get("correlation", 0) >= 0]
        # kernels are on the GPU clock, launched after the step's forward began on the CPU
        ks = [k for k in kernels if k["ts"] >= start and (k["ts"] < end or i + 1 == len(fwd))]
        nccl = sorted([k for k in ks if "nccl" in k["name"].lower()], key=lambda k: k["ts"])
        comp = sorted([k for k in ks if "nccl" not in k["name"].lower()], key=lambda k: k["ts"])
        cp = {e["name"]: e for e in cpu_phases if start <= e["ts"] < end}
        gp = {e["name"]: e for e in phases if start <= e["ts"] < end}
        row = {"step": i, "n_nccl": len(nccl), "n_compute": len(comp)}
        if comp:
            row["compute_first_us"] = comp[0]["ts"] - start
            row["compute_last_end_us"] = max(k["ts"] + k["dur"] for k in comp) - start
            row["compute_busy_us"] = sum(k["dur"] for k in comp)
        if nccl:
            row["nccl_first_us"] = nccl[0]["ts"] - start
            row["nccl_last_end_us"] = max(k["ts"] + k["dur"] for k in nccl) - start
            row["nccl_busy_us"] = sum(k["dur"] for k in nccl)
            row["nccl_durs_us"] = [round(k["dur"], 1) for k in nccl]
            row["nccl_starts_us"] = [round(k["ts"] - start, 1) for k in nccl]
            row["nccl_grid"] = nccl[0]["args"].get("grid")
            row["nccl_name"] = nccl[0]["name"][:120]
        for name in ("forward", "backward", "sync", "optimizer"):
            if name in cp:
                row[f"cpu_{name}_us"] = [cp[name]["ts"] - start, cp[name]["ts"] + cp[name]["dur"] - start]
            if name in gp:
                row[f"gpu_{name}_us"] = [gp[name]["ts"] - start, gp[name]["ts"] + gp[name]["dur"] - start]
        # compute kernels inside the backward's GPU span, and how much of the NCCL busy time overlaps it
        if "backward" in gp and nccl:
            b0, b1 = gp["backward"]["ts"], gp["backward"]["ts"] + gp["backward"]["dur"]
            row["nccl_busy_in_backward_us"] = sum(max(0, min(k["ts"] + k["dur"], b1) - max(k["ts"], b0)) for k in nccl)
            row["compute_busy_in_backward_us"] = sum(max(0, min(k["ts"] + k["dur"], b1) - max(k["ts"], b0)) for k in comp)
        steps.append(row)
    return steps


def rank_fn(rank, world_size, out, size, variants):
    device = torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cpu")
    config = model_config(size, 512)
    base = Workload(config, batch_size=4, device=device, precision="bf16", seed=rank)
    results = {}
    for variant in variants:
        model = copy.deepcopy(base.model)
        wrapper = wrap(variant, model, device)
        params = list(model.parameters())
        optimizer = torch.optim.AdamW(params, **adamw_options(params))
        trainer = Trainer(model, optimizer, base.batches, precision="bf16", wrapper=wrapper, set_to_none=False)
        timer = PhaseTimer(device)
        for _ in range(3):
            trainer.step("train-step", timer)
        timer.clear()
        for _ in range(12):
            trainer.step("train-step", timer)
        row = {
            "step_ms": [t * 1e3 for t in timer.step_totals()],
            "phases_ms": {k: [s * 1e3 for s in v] for k, v in timer.samples.items()},
            "summary": {k: (v.mean * 1e3, v.std * 1e3) for k, v in timer.summary().items()},
        }
        if hasattr(wrapper, "_buckets"):
            row["buckets"] = len(wrapper._buckets)
            row["bucket_mib"] = [round(b.buffer.numel() * b.buffer.element_size() / 2**20, 2) for b in wrapper._buckets]
        acts = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA] if device.type == "cuda" else [])
        with torch.profiler.profile(activities=acts) as prof:
            for _ in range(2):
                trainer.step("train-step", annotate=True)
            if device.type == "cuda":
                torch.cuda.synchronize()
        if rank == 0:
            path = f"{out}/trace-{size}-{variant}-rank0.json"
            prof.export_chrome_trace(path)
            row["trace"] = summarize_trace(path)
        results[variant] = row
        del trainer, optimizer, params, wrapper, model, prof
        free_memory(device)
    return results


if __name__ == "__main__":
    out = sys.argv[1]
    size = sys.argv[2] if len(sys.argv) > 2 else "xl"
    variants = sys.argv[3:] or ["torch-ddp-25MB", "bucketed-25MB"]
    cuda = torch.cuda.is_available()
    results = run_on_ranks(rank_fn, nproc=torch.cuda.device_count() if cuda else 2, device_type="cuda" if cuda else "cpu", timeout_s=500, args=(out, size, variants))
    json.dump(results[0], open(f"{out}/ddp-timeline-{size}.json", "w"), indent=1)
    for variant, row in results[0].items():
        print(variant, {k: tuple(round(x, 1) for x in v) for k, v in row["summary"].items()}, "steps", [round(s, 1) for s in row["step_ms"]])
        for s in row.get("trace", []):
            print("  ", {k: (round(v, 1) if isinstance(v, float) else v) for k, v in s.items() if k not in ("nccl_durs_us", "nccl_starts_us")})
