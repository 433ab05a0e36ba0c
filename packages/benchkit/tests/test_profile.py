"""``benchkit profile`` on a tiny CPU model: trace, per-phase attribution, matmul counts."""

import json
from types import SimpleNamespace

import pytest
import torch
from torch.autograd.profiler_util import Interval

from benchkit.cli import main
from benchkit.profiling import is_matmul, phase_breakdown


@pytest.mark.parametrize(
    ("name", "matmul"),
    [
        ("aten::mm", True),
        ("aten::addmm", True),
        ("aten::bmm", True),
        ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", True),
        ("nvjet_tst_128x256_64x4_1x2_h_bz_coopA_TNN", True),
        ("ampere_sgemm_128x64_tn", True),
        ("triton_tem_fused_mm_0", True),
        ("MmBackward0", False),  # the autograd node, whose own time is bookkeeping
        ("aten::mul", False),
        ("fmha_cutlassF_f32_aligned_64x64_rf_sm80", False),
        ("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 64>>", False),
        ("triton_poi_fused_add_mul_0", False),
    ],
)
def test_matmul_classification(name, matmul):
    assert is_matmul(name) == matmul


def test_profile_command_attributes_operators_to_phases(tmp_path, capsys):
    steps, layers = 2, 2  # the tiny model has 2 layers
    code = main(
        [
            "profile",
            "--size",
            "tiny",
            "--context-length",
            "16",
            "--batch-size",
            "2",
            "--device",
            "cpu",
            "--warmup",
            "1",
            "--steps",
            str(steps),
            "--top",
            "5",
            "--out",
            str(tmp_path),
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    for phase in ("forward", "backward", "optimizer"):
        assert f"{phase}: top 5 CPU operators" in out

    trace = json.loads((tmp_path / "trace.json").read_text())
    ranges = [e for e in trace["traceEvents"] if e.get("name") in ("forward", "backward", "optimizer")]
    assert len(ranges) == 3 * steps  # only the measured steps are profiled

    document = json.loads((tmp_path / "profile.json").read_text())
    rows = document["rows"]
    assert {r["phase"] for r in rows} == {"forward", "backward", "optimizer"}
    mm = {r["phase"]: r for r in rows if r["name"] == "aten::mm"}
    # Each layer runs 5 linear layers (qkv, out, w1, w2, w3), plus the LM head; on a CPU
    # each is one aten::mm forward and two in backward (input and weight gradients).
    assert mm["forward"]["count"] == steps * (5 * layers + 1) and mm["forward"]["matmul"]
    assert mm["backward"]["count"] == 2 * steps * (5 * layers + 1)
    assert "optimizer" not in mm
    summary = {s["phase"]: s for s in document["meta"]["summary"]}
    assert summary["optimizer"]["matmul_pct"] == 0 and 0 < summary["forward"]["matmul_pct"] < 100
    assert all(s["ms_per_step"] > 0 for s in summary.values())


@pytest.mark.gpu
def test_profile_command_on_gpu_attributes_kernels(tmp_path):
    assert (
        main(
            [
                "profile",
                "--size",
                "tiny",
                "--context-length",
                "64",
                "--device",
                "cuda",
                "--warmup",
                "1",
                "--steps",
                "2",
                "--out",
                str(tmp_path),
            ]
        )
        == 0
    )
    rows = json.loads((tmp_path / "profile.json").read_text())["rows"]
    for phase in ("forward", "backward", "optimizer"):
        kernels = [r for r in rows if r["phase"] == phase]
        assert kernels and all(r["time_us"] > 0 and r["count"] > 0 for r in kernels)
    assert any(r["matmul"] for r in rows if r["phase"] == "forward")


def _event(name, device, start_us, end_us, annotation=False):
    """A stand-in for a profiler FunctionEvent: the fields phase_breakdown reads."""
    device_type = torch.autograd.DeviceType.CUDA if device == "cuda" else torch.autograd.DeviceType.CPU
    return SimpleNamespace(
        name=name,
        device_type=device_type,
        time_range=Interval(start_us, end_us),
        self_cpu_time_total=end_us - start_us,
        is_user_annotation=annotation,
    )


def test_gpu_copies_of_annotated_ranges_are_not_counted_as_kernels():
    events = [
        _event("optimizer", "cpu", 0, 100, annotation=True),  # the phase range
        _event("Optimizer.step#AdamW.step", "cpu", 5, 90, annotation=True),  # a range torch.optim opens ...
        _event("Optimizer.step#AdamW.step", "cuda", 10, 60, annotation=True),  # ... and its GPU-side copy
        _event("multi_tensor_apply_kernel", "cuda", 12, 32),
        _event("multi_tensor_apply_kernel", "cuda", 35, 55),
        _event("late_kernel", "cuda", 150, 160),  # starts outside every phase
    ]
    rows = phase_breakdown(events, ["optimizer"], device_type="cuda")
    assert [(r["phase"], r["name"], r["count"], r["time_us"]) for r in rows] == [
        ("optimizer", "multi_tensor_apply_kernel", 2, 40)
    ]
