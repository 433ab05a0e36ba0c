"""``benchkit run``: the whole tour on a CPU, with its report holding measured numbers; the
parallel check's plan by device count, its comparison and tolerance, and its GPU form."""

import dataclasses
import json
import math
import re

import pytest
import torch

from benchkit.accounting import AccountingSettings, run_accounting
from benchkit.cli import main
from benchkit.parallel_check import (
    CPU_PARALLEL,
    CUDA_PARALLEL,
    MAX_CUDA_RANKS,
    PARALLEL_NOISE_FACTOR,
    check_method,
    compare_parameters,
    parallel_checks,
    parallel_plan,
    parallel_tolerance,
)
from benchkit.tour import PLANS, Tour, tour_plan


@pytest.mark.distributed
def test_run_tour_on_cpu_writes_a_report_with_measured_numbers(tmp_path, capsys):
    assert main(["run", "--device", "cpu", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"report: {tmp_path / 'report.md'}" in out

    rows = json.loads((tmp_path / "results.json").read_text())["rows"]
    sections = {r["section"] for r in rows}
    assert sections == {"model", "attention", "parallel", "accounting"}

    model = [r for r in rows if r["section"] == "model"]
    assert {r["precision"] for r in model} == {"fp32", "bf16"}
    for row in model:
        phases = row["phases"]
        assert set(phases) == {"forward", "backward", "optimizer"}
        assert all(0 < phases[p]["min"] <= phases[p]["max"] for p in phases)
        assert row["tokens_per_s"] > 0

    attention = [r for r in rows if r["section"] == "attention"]
    assert {r["implementation"] for r in attention} == {"naive", "sdpa", "flashattn2"}
    assert all(r["status"] == "ok" and r["forward_backward_ms"] > 0 for r in attention)
    # Which flashattn2 ran: its kernels in Triton's interpreter (TRITON_INTERPRET=1), or its PyTorch fallback.
    import flashattn2.api

    interpreted = flashattn2.api.resolve_backend("auto", torch.device("cpu")) == "triton"
    expected = "triton-interpreter" if interpreted else "pytorch-tiled"
    assert {r["backend"] for r in attention if r["implementation"] == "flashattn2"} == {expected}

    parallel = {r["setup"]: r for r in rows if r["section"] == "parallel"}
    for setup in ("BucketedDDP + AdamW", "BucketedDDP + ZeRO-1 AdamW"):
        assert parallel[setup]["ok"] and parallel[setup]["max_abs_param_diff"] <= parallel[setup]["tolerance"]

    report = (tmp_path / "report.md").read_text()
    assert "**PASS**" in report
    assert f"flashattn2 ran as `{expected}`" in report
    # The report says which parallel check ran and why.
    assert "2 gloo processes on the CPU, tiny model, float64 (the tour runs on the CPU;" in report
    for image in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", report):
        assert (tmp_path / image).stat().st_size > 0, image
    # The model table in the report carries the measured step time of each row.
    for row in model:
        assert f"{row['step']['mean'] * 1e3:.4g}" in report


def test_tour_plan_takes_other_model_sizes():
    plan = tour_plan(torch.device("cpu"), sizes=("small",))
    assert plan.model.sizes == ("small",) and plan.attention == PLANS["cpu"].attention
    assert [s.size for s in plan.model.settings()] == ["small", "small"]  # fp32 and bf16
    assert tour_plan(torch.device("cuda")) == PLANS["cuda"]


def test_the_report_says_when_flashattn2_fell_back_to_pytorch():
    rows = [
        {
            "implementation": "flashattn2",
            "backend": "pytorch-tiled",
            "dtype": "fp32",
            "seq_len": 32,
            "head_dim": 16,
            "status": "ok",
        }
    ]
    tour = Tour(
        {"command": "benchkit run"},
        PLANS["cpu"],
        [],
        rows,
        CPU_PARALLEL,
        [],
        run_accounting(AccountingSettings()),
        seconds=1.0,
    )
    report = tour.report({"attention": ["attention_fp32_d16.svg"], "accounting": ["accounting/accounting.pdf"]})
    assert "flashattn2 ran as `pytorch-tiled`: flashattn2's tiled PyTorch implementation" in report
    assert "the Triton kernels did not run" in report
    assert "- command: benchkit run" in report
    # SVG inline, PDF linked.
    assert "![attention_fp32_d16](attention_fp32_d16.svg)" in report
    assert "[accounting/accounting.pdf](accounting/accounting.pdf)" in report


@pytest.mark.parametrize("gpus, world_size", [(2, 2), (3, 3), (4, 4), (8, MAX_CUDA_RANKS)])
def test_a_cuda_tour_with_several_gpus_checks_on_them_with_nccl(monkeypatch, gpus, world_size):
    monkeypatch.setattr(torch.cuda, "device_count", lambda: gpus)
    plan = parallel_plan(torch.device("cuda"))
    assert plan == dataclasses.replace(CUDA_PARALLEL, world_size=world_size, reason=plan.reason)
    assert f"{gpus} CUDA GPUs visible" in plan.reason
    assert plan.describe() == f"{world_size} NCCL processes, one GPU each, small model, float32"
    assert parallel_tolerance(plan, 1e-5)[0] == "rel_update_diff"  # not bitwise: relative to the noise
    assert f"{world_size} accumulated micro-batches" in check_method(plan)  # what the report says


@pytest.mark.parametrize(
    "device, gpus, reason",
    [
        ("cuda", 1, "1 CUDA GPU visible, and NCCL needs one GPU per process: the CPU check instead"),
        ("cuda:0", 1, "1 CUDA GPU visible, and NCCL needs one GPU per process: the CPU check instead"),
        ("cpu", 4, "the tour runs on the CPU"),
        ("cpu", 0, "the tour runs on the CPU"),
    ],
)
def test_one_gpu_or_a_cpu_tour_keeps_the_cpu_check(monkeypatch, device, gpus, reason):
    monkeypatch.setattr(torch.cuda, "device_count", lambda: gpus)
    plan = parallel_plan(torch.device(device))
    assert plan == dataclasses.replace(CPU_PARALLEL, reason=reason)
    assert plan.describe() == "2 gloo processes on the CPU, tiny model, float64"


def test_compare_parameters_by_hand():
    initial = [torch.zeros(2), torch.zeros(3)]
    reference = [torch.tensor([3.0, 4.0]), torch.tensor([1.0, 0.0, 0.0])]  # updates of norm 5 and 1
    result = [torch.tensor([3.0, 4.3]), torch.tensor([1.0, 0.0, 0.1])]  # differences of norm 0.3 and 0.1
    compared = compare_parameters(result, reference, initial)
    assert compared["max_abs_param_diff"] == pytest.approx(0.3)
    # The worst tensor relative to its own update: 0.1 / 1 beats 0.3 / 5.
    assert compared["rel_update_diff"] == pytest.approx(0.1)
    assert compare_parameters(reference, reference, initial) == {"max_abs_param_diff": 0.0, "rel_update_diff": 0.0}
    # A tensor that training did not move but the result did: infinitely wrong.
    assert math.isinf(compare_parameters([torch.ones(1)], [torch.zeros(1)], [torch.zeros(1)])["rel_update_diff"])
    # Tensors missing on one side are an error, not a shorter comparison.
    with pytest.raises(ValueError, match=r"zip\(\) argument 2 is longer than argument 1"):
        compare_parameters(result[:1], reference, initial)


def test_parallel_tolerance_absolute_on_the_cpu_relative_to_the_noise_on_gpus():
    assert parallel_tolerance(CPU_PARALLEL, 3e-15) == ("max_abs_param_diff", CPU_PARALLEL.max_abs_tolerance)
    assert parallel_tolerance(CUDA_PARALLEL, 2e-5) == ("rel_update_diff", pytest.approx(PARALLEL_NOISE_FACTOR * 2e-5))
    # A split run that reproduced the reference exactly: the floor is one float32 rounding step.
    assert parallel_tolerance(CUDA_PARALLEL, 0.0) == (
        "rel_update_diff",
        pytest.approx(PARALLEL_NOISE_FACTOR * torch.finfo(torch.float32).eps),
    )


@pytest.mark.distributed
def test_the_gpu_checks_relative_comparison_passes_on_cpu_float32():
    # CUDA_PARALLEL's comparison, run by gloo on the CPU with the tiny model: float32
    # rounding makes the results differ, the split-batch run measures by how much.
    plan = dataclasses.replace(
        CUDA_PARALLEL,
        device_type="cpu",
        size="tiny",
        context_length=32,
        batch_per_rank=2,
        timeout_s=CPU_PARALLEL.timeout_s,
    )
    rows = parallel_checks(plan)
    assert [r["setup"] for r in rows] == ["BucketedDDP + AdamW", "BucketedDDP + ZeRO-1 AdamW"]
    for row in rows:
        assert row["checked"] == "rel_update_diff" and row["ok"]
        assert row["split_rel_update_diff"] > 0 and row["tolerance"] == pytest.approx(
            PARALLEL_NOISE_FACTOR * row["split_rel_update_diff"]
        )
        assert 0 < row["rel_update_diff"] <= row["tolerance"] and row["max_abs_param_diff"] > 0


@pytest.mark.gpu
@pytest.mark.distributed
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="the NCCL check needs at least 2 GPUs")
def test_the_nccl_check_passes_on_the_gpus():
    plan = parallel_plan(torch.device("cuda"))
    assert plan.device_type == "cuda" and plan.world_size == min(torch.cuda.device_count(), MAX_CUDA_RANKS)
    rows = parallel_checks(plan)
    for row in rows:
        assert row["ok"], row
        assert 0 <= row["rel_update_diff"] <= row["tolerance"]
