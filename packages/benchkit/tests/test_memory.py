"""Memory accounting: the formula against tensors actually saved, the snapshot timeline,
and ``benchkit memory`` (CUDA only; on a CPU it must refuse clearly)."""

import json
import random

import pytest
import torch

from benchkit.cli import main
from benchkit.memory import (
    compare_with_formula,
    downsample,
    measure_breakdown,
    plot_peaks,
    plot_timelines,
    predicted_memory,
    timeline_from_snapshot,
)
from benchkit.model import ModelConfig, model_config
from benchkit.units import GIB
from benchkit.workload import Workload


def _random_config(attention):
    heads = random.choice([2, 4])
    return ModelConfig(
        vocab_size=random.randint(50, 500),
        context_length=random.choice([8, 16, 24]),
        d_model=heads * random.choice([8, 16]),
        d_ff=random.choice([32, 96]),
        num_layers=random.randint(1, 3),
        num_heads=heads,
        attention=attention,
    )


@pytest.mark.parametrize(
    ("attention", "precision"), [("sdpa", "fp32"), ("sdpa", "bf16"), ("sdpa", "fp16"), ("naive", "fp32")]
)
def test_formula_matches_the_tensors_saved_for_backward(attention, precision):
    config = _random_config(attention)
    batch_size = random.randint(2 if attention == "naive" else 1, 3)  # naive: the formula's batch >= 2
    workload = Workload(config, batch_size=batch_size, device="cpu", precision=precision)
    measured = measure_breakdown(workload)
    predicted = predicted_memory(config, batch_size, precision)
    assert measured["parameters"] == predicted["parameters"]
    assert measured["gradients"] == predicted["gradients"]
    # AdamW also keeps a float32 step counter per parameter tensor.
    assert measured["optimizer_state"] == predicted["optimizer_state"] + 4 * len(list(workload.model.parameters()))
    # The only saved tensor the formula leaves out is the 4-byte loss itself.
    assert measured["activations"] == predicted["activations"] + 4


def test_activations_grow_linearly_with_batch_and_weight_copies_only_under_autocast():
    config = _random_config("sdpa")
    one, two = (predicted_memory(config, b, "fp32")["activations"] for b in (1, 2))
    rope_rows = config.num_layers * 4 * config.head_dim * config.context_length
    assert two - one == one - rope_rows  # everything but the RoPE rows is per sequence
    with pytest.raises(ValueError, match="precision"):
        predicted_memory(config, 1, "int8")


def test_timeline_adds_allocations_and_subtracts_completed_frees():
    events = [
        {"action": "segment_alloc", "size": 2048},
        {"action": "alloc", "size": 512},
        {"action": "alloc", "size": 1024},
        {"action": "free_requested", "size": 512},
        {"action": "free_completed", "size": 512},
        {"action": "alloc", "size": 256},
    ]
    snapshot = {"device_traces": [[], events]}
    assert timeline_from_snapshot(snapshot, device=1, start_bytes=100) == [612, 1636, 1124, 1380]


def test_downsample_keeps_the_peak_of_every_bucket():
    values = [random.randint(0, 1000) for _ in range(1000)]
    xs, ys = downsample(values, 100)
    assert xs == [float(10 * b) for b in range(100)]
    assert ys == [float(max(values[10 * b : 10 * b + 10])) for b in range(100)]
    assert downsample([3, 1, 2], 100) == ([0.0, 1.0, 2.0], [3.0, 1.0, 2.0])  # short series stay whole


def _peak_row(context_length, precision, mode, peak_gib, **extra):
    return {
        "size": "tiny",
        "context_length": context_length,
        "precision": precision,
        "mode": mode,
        "batch_size": 2,
        "attention": "sdpa",
        "status": "ok" if peak_gib is not None else "OOM",
        **({"peak_bytes": peak_gib * GIB} if peak_gib is not None else {}),
        **extra,
    }


def test_measured_breakdown_is_set_against_the_formula():
    predicted = predicted_memory(model_config("tiny", 16), 2, "bf16")
    measured = {part: 2 * value for part, value in predicted.items()}
    train = _peak_row(16, "bf16", "train-step", 1.0, breakdown={**measured, "allocated_after_forward": GIB // 2})
    table = compare_with_formula([_peak_row(16, "bf16", "forward", 0.5), train])
    assert train["predicted"] == predicted
    assert [line["part"] for line in table] == [*predicted, "allocated after forward"]
    assert all(line["measured/formula"] == 2 for line in table[:-1])
    assert table[0]["formula_GiB"] == predicted["parameters"] / GIB and table[-1]["measured_GiB"] == 0.5


def test_memory_figures_show_the_peaks_and_the_timelines():
    rows = [
        _peak_row(16, "fp32", "forward", 0.25, timeline=list(range(1000))),
        _peak_row(16, "fp32", "train-step", 1.0),
        _peak_row(32, "fp32", "forward", 0.5),
        _peak_row(32, "fp32", "train-step", None),
    ]
    (timeline,) = plot_timelines(rows).axes[0].get_lines()
    assert len(timeline.get_xdata()) == 400 and timeline.get_ydata()[-1] == pytest.approx(999 / GIB)
    assert plot_timelines(rows[1:]) is None
    forward, train = plot_peaks(rows).axes[0].containers
    assert [bar.get_height() for bar in forward] == [0.25, 0.5]
    assert [bar.get_height() for bar in train] == [1.0]  # out of memory at T=32: no bar


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without a GPU")
def test_memory_command_needs_cuda(tmp_path, capsys):
    assert main(["memory", "--size", "tiny", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("benchkit memory: error: needs a CUDA GPU") and "Traceback" not in err


@pytest.mark.gpu
def test_memory_command_on_gpu(tmp_path):
    assert (
        main(
            [
                "memory",
                "--size",
                "tiny",
                "--context-length",
                "16",
                "32",
                "--precision",
                "fp32",
                "bf16",
                "--out",
                str(tmp_path),
            ]
        )
        == 0
    )
    for name in (
        "memory.json",
        "timeline.png",
        "peak_memory.png",
        "snapshot_forward.pickle",
        "snapshot_train-step.pickle",
    ):
        assert (tmp_path / name).stat().st_size > 0
    rows = json.loads((tmp_path / "memory.json").read_text())["rows"]
    assert len(rows) == 8 and all(r["status"] == "ok" and r["peak_bytes"] > 0 for r in rows)
    for row in rows:
        if row["mode"] == "train-step":
            assert row["breakdown"]["parameters"] == row["predicted"]["parameters"]
            assert row["breakdown"]["activations"] > 0
