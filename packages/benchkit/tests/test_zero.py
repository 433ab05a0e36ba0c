"""``benchkit zero`` at tiny CPU settings: its rows, the state accounting against the model, its files."""

import json
import math

import pytest
import torch

from benchkit.cli import main
from benchkit.model import TransformerLM, model_config, parameter_count
from benchkit.units import MIB
from benchkit.zero import VARIANTS


@pytest.mark.distributed
def test_zero_on_two_cpu_processes(tmp_path):
    out = tmp_path / "zero"
    argv = [
        "zero",
        "--size",
        "tiny",
        "--context-length",
        "8",
        "--batch-size",
        "1",
        "--nproc",
        "2",
        "--warmup",
        "1",
        "--steps",
        "2",
        "--device",
        "cpu",
        "--timeout-s",
        "120",
        "--out",
        str(out),
        "--csv",
    ]
    assert main(argv) == 0
    rows = json.loads((out / "zero.json").read_text())["rows"]
    assert [r["variant"] for r in rows] == list(VARIANTS)
    assert all((out / name).stat().st_size > 0 for name in ("zero.csv", "zero_step_ms.png", "zero_memory.png"))

    params = list(TransformerLM(model_config("tiny", 8)).parameters())
    total = parameter_count(model_config("tiny", 8))
    # AdamW: exp_avg and exp_avg_sq (4 bytes each per element) plus a 4-byte step counter per tensor.
    whole_state = 8 * total + 4 * len(params)
    for row in rows:
        assert row["nproc"] == 2 and row["parameters"] == total
        assert math.isfinite(row["step_ms"]) and row["step_ms"] > 0 and 0 < row["optimizer_ms"] < row["step_ms"]
        per_rank = [mib * MIB for mib in row["state_per_rank_MiB"]]
        assert row["before_step_MiB"] is None  # no allocator to read on a CPU
        if row["variant"] == "adamw":
            assert per_rank == [whole_state, whole_state]
            continue
        assert sum(per_rank) == whole_state  # one copy of the state across the ranks, nothing more
        largest = max(p.numel() for p in params)
        assert max(per_rank) <= 1.02 * 8 * (total / 2 + largest)  # ZeRO-1's target: state / N plus the largest tensor
        assert row["state_vs_bound"] <= 1.02
        if row["variant"] == "torch-zero":
            continue  # PyTorch's own partition: only the bound is ours to check
        # The formula leaves out the step counters: measured exceeds it by at most 4 bytes per tensor.
        assert 0 <= max(per_rank) - row["predicted_state_MiB"] * MIB <= 4 * len(params)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without a GPU")
def test_zero_cuda_request_without_gpu_is_a_clear_error(capsys):
    assert main(["zero", "--device", "cuda"]) == 2
    assert "no CUDA GPU" in capsys.readouterr().err


def test_zero_bad_arguments_are_argparse_errors():
    for bad in (["--nproc", "0"], ["--warmup", "0"], ["--variants", "adam"], ["--bucket-size-mb", "-1"]):
        with pytest.raises(SystemExit) as exit_info:
            main(["zero", *bad])
        assert exit_info.value.code == 2
