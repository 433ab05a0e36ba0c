"""``benchkit run`` on a CPU: the whole tour, with its report holding measured numbers."""

import json
import re

import pytest

from benchkit.cli import main


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

    parallel = {r["setup"]: r for r in rows if r["section"] == "parallel"}
    for setup in ("BucketedDDP + AdamW", "BucketedDDP + ZeRO-1 AdamW"):
        assert parallel[setup]["ok"] and parallel[setup]["max_abs_param_diff"] <= parallel[setup]["tolerance"]

    report = (tmp_path / "report.md").read_text()
    assert "**PASS**" in report
    for image in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", report):
        assert (tmp_path / image).stat().st_size > 0, image
    # The model table in the report carries the measured step time of each row.
    for row in model:
        assert f"{row['step']['mean'] * 1e3:.4g}" in report
