"""benchkit precision: sums match an independent numpy accumulation, autocast dtypes are what
PyTorch documents, and the command writes its files."""

import json
import math
import random
from fractions import Fraction

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from benchkit.cli import main
from benchkit.precision import StepTimeSweep, accumulation_rows, autocast_rows, plot_step_time, step_time_rows


def numpy_sum(value, count, accumulator, addend):
    """Sequential sum with numpy scalars: each addition rounded to the accumulator's dtype."""
    acc_type, add_type = np.dtype(accumulator).type, np.dtype(addend).type
    total, term = acc_type(0), acc_type(add_type(value))
    for _ in range(count):
        total = acc_type(total + term)
    return float(total)


def test_accumulation_matches_numpy_and_reports_exact_errors():
    value, count = 0.0625, random.randint(200, 2000)
    while Fraction(float(np.float16(value))) == Fraction(str(value)):  # want a value fp16 must round
        value = round(random.uniform(0.001, 0.1), 4)
    rows = {(r["accumulator"], r["addend"]): r for r in accumulation_rows(value, count)}
    exact = count * Fraction(str(value))
    for (acc, add), dtypes in {
        ("fp64", "fp64"): ("float64", "float64"),
        ("fp32", "fp32"): ("float32", "float32"),
        ("fp16", "fp16"): ("float16", "float16"),
        ("fp32", "fp16"): ("float32", "float16"),
    }.items():
        row = rows[acc, add]
        assert row["sum"] == numpy_sum(value, count, *dtypes)
        assert row["exact"] == float(exact)
        assert row["abs_error"] == pytest.approx(float(abs(Fraction(row["sum"]) - exact)))
    # Mixed precision's point: an fp32 accumulator of fp16 addends beats an fp16 accumulator.
    assert rows["fp32", "fp16"]["abs_error"] < rows["fp16", "fp16"]["abs_error"]
    assert rows["fp32", "fp32"]["abs_error"] < rows["fp16", "fp16"]["abs_error"]


def test_bf16_sum_of_small_addends_stalls():
    row = next(r for r in accumulation_rows(0.01, 1000) if r["accumulator"] == "bf16")
    # bf16 keeps 8 significant bits: at 4 the spacing is 2**-5, half of it exceeds 0.01.
    assert row["sum"] == 4.0 and row["exact"] == 10.0


def test_an_overflowing_sum_is_reported_as_infinite():
    rows = {(r["accumulator"], r["addend"]): r for r in accumulation_rows(40000.0, 2)}
    # fp16's largest finite value is 65504 (torch.finfo(torch.float16).max): 40000 fits, 80000 does not.
    fp16 = rows["fp16", "fp16"]
    assert fp16["sum"] == fp16["abs_error"] == fp16["rel_error"] == math.inf
    assert fp16["note"] == "overflow: the sum is beyond fp16's range (largest finite value 65504)"
    assert rows["fp32", "fp16"]["sum"] == 80000.0 and rows["fp32", "fp16"]["note"] == ""  # fp32 holds it
    assert rows["fp64", "fp64"]["abs_error"] == 0.0
    # 70000 overflows as an fp16 addend already.
    rows = {(r["accumulator"], r["addend"]): r for r in accumulation_rows(70000.0, 1)}
    assert rows["fp32", "fp16"]["addend_value"] == rows["fp32", "fp16"]["sum"] == math.inf
    assert rows["fp32", "fp16"]["note"].startswith("overflow: the addend is beyond fp16's range")
    # Past float64's range even the exact sum is infinite as a float; every sum overflows.
    rows = accumulation_rows(-1e308, 2)
    assert all(r["exact"] == r["sum"] == -math.inf and r["abs_error"] == math.inf for r in rows)


def test_accumulation_command_reports_overflow_and_wants_a_finite_value(tmp_path, capsys):
    assert (
        main(["precision", "--part", "accumulation", "--value", "40000", "--count", "2", "--out", str(tmp_path)]) == 0
    )
    assert "overflow: the sum is beyond fp16's range" in capsys.readouterr().out
    rows = json.loads((tmp_path / "precision_accumulation.json").read_text())["rows"]
    fp16 = next(r for r in rows if r["accumulator"] == "fp16")
    assert fp16["sum"] is None and fp16["abs_error"] is None and fp16["note"].startswith("overflow")  # no inf in JSON
    for text in ("nan", "inf", "1e400"):
        with pytest.raises(SystemExit) as exit_info:
            main(["precision", "--part", "accumulation", "--value", text, "--out", str(tmp_path)])
        assert exit_info.value.code == 2
        assert capsys.readouterr().err.splitlines()[-1] == (
            f"benchkit precision: error: argument --value: must be a finite number, got {text}"
        )


def test_autocast_dtypes_on_cpu():
    rows = autocast_rows(torch.device("cpu"))
    for name, low in (("fp16", torch.float16), ("bf16", torch.bfloat16)):
        by_tensor = {r["tensor"]: r for r in rows if r["autocast"] == name}
        with torch.autocast("cpu", dtype=low):  # what layer_norm gives directly, outside any module
            layer_norm_dtype = F.layer_norm(torch.randn(2, 10, dtype=low), (10,)).dtype
        short = {torch.float16: "fp16", torch.bfloat16: "bf16", torch.float32: "fp32"}
        assert by_tensor["fc1 (Linear) output"]["dtype"] == short[low]
        assert by_tensor["fc1 (Linear) output"]["note"] == "parameters fp32"
        assert by_tensor["ln (LayerNorm) output"]["dtype"] == short[layer_norm_dtype]
        assert by_tensor["loss (cross_entropy)"]["dtype"] == "fp32"
        assert by_tensor["parameter gradients"]["dtype"] == "fp32"


def test_step_time_rows_and_command_files(tmp_path):
    rows = step_time_rows(
        StepTimeSweep(sizes=("tiny",), precisions=("fp32", "bf16"), context_length=16, batch_size=2, warmup=0, steps=1),
        torch.device("cpu"),
    )
    assert [(r["size"], r["precision"]) for r in rows] == [("tiny", "fp32"), ("tiny", "bf16")]
    assert all(isinstance(r["step_ms"], float) and r["step_ms"] > 0 for r in rows)
    (fp32, bf16) = plot_step_time(rows).axes[0].containers
    assert [fp32[0].get_height(), bf16[0].get_height()] == [rows[0]["step_ms"], rows[1]["step_ms"]]
    assert plot_step_time([{**row, "step_ms": "OOM", "step_std_ms": "OOM"} for row in rows]) is None

    out = tmp_path / "prec"
    assert (
        main(
            [
                "precision",
                "--device",
                "cpu",
                "--count",
                "50",
                "--size",
                "tiny",
                "--context-length",
                "16",
                "--batch-size",
                "2",
                "--warmup",
                "0",
                "--steps",
                "1",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    for name in ("precision_accumulation", "precision_autocast", "precision_step_time"):
        document = json.loads((out / f"{name}.json").read_text())
        assert document["rows"] and "environment" in document
    assert (out / "precision_step_time.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.gpu
def test_autocast_dtypes_on_cuda():
    rows = autocast_rows(torch.device("cuda"))
    for name in ("fp16", "bf16"):
        by_tensor = {r["tensor"]: r for r in rows if r["autocast"] == name}
        assert by_tensor["fc1 (Linear) output"]["dtype"] == name
        # CUDA autocast runs layer_norm in float32 (PyTorch's autocast op reference).
        assert by_tensor["ln (LayerNorm) output"]["dtype"] == "fp32"
        assert by_tensor["parameter gradients"]["dtype"] == "fp32"
