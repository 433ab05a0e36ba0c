"""The measured workload, model FLOPs and the ``benchkit model`` subcommand on tiny settings."""

import json

import pytest
import torch

from benchkit.cli import main
from benchkit.devices import resolve_device
from benchkit.errors import BenchkitError
from benchkit.flops import matmul_parameters, model_flops, peak_flops
from benchkit.model import model_config
from benchkit.timing import PhaseTimer
from benchkit.training import LEARNING_RATE, PHASES, adamw_options, measure
from benchkit.workload import Workload, WorkloadSettings, benchmark


def test_model_flops_by_hand():
    config = model_config("tiny", context_length=32)
    # tiny: d 64, d_ff 256, 2 layers, vocab 10000. N excludes the embedding table:
    # 2*(4*64*64 + 3*64*256 + 2*64) + 64 + 64*10000 = 771_392.
    assert matmul_parameters(config) == 771_392
    forward = 3 * 32 * (2 * 771_392 + 4 * 2 * 64 * 32)  # batch 3, 32 tokens each
    assert model_flops(config, 3, 32, backward=False) == forward
    assert model_flops(config, 3, 32, backward=True) == 3 * forward
    with pytest.raises(ValueError, match="seq_len"):
        model_flops(config, 1, 33, backward=True)


def test_peak_flops_lookup():
    assert peak_flops("NVIDIA H100 80GB HBM3", "bf16") == pytest.approx(989.4e12)
    assert peak_flops("NVIDIA H100 PCIe", "fp16") == pytest.approx(756e12)
    assert peak_flops("NVIDIA H100 80GB HBM3", "fp32") == pytest.approx(66.9e12)
    assert peak_flops("NVIDIA H100 80GB HBM3", "fp32", float32_matmul_precision="high") == pytest.approx(494.7e12)
    assert peak_flops("Some Other GPU", "bf16") is None
    with pytest.raises(ValueError, match="precision"):
        peak_flops("NVIDIA H100 80GB HBM3", "int8")


class StepClock:
    """A fake clock advancing by the given durations, two readings per timed phase."""

    def __init__(self, durations):
        self.readings, now = [], 0.0
        for duration in durations:
            self.readings += [now, now + duration]
            now += duration + 1.0

    def __call__(self):
        return self.readings.pop(0)


def test_measure_skips_warmup_and_sums_phases_per_step():
    workload = Workload(model_config("tiny", 8), batch_size=1, device="cpu")
    phases = PHASES["train-step"]
    warmup, steps = 2, 3
    durations = [0.5] * (warmup * len(phases)) + [0.1 * (i + 1) for i in range(steps * len(phases))]
    stats = measure(
        workload, "train-step", warmup=warmup, steps=steps, timer=PhaseTimer("cpu", clock=StepClock(durations))
    )
    assert list(stats) == [*phases, "step"]
    timed = durations[warmup * len(phases) :]
    per_step = [sum(timed[3 * i : 3 * i + 3]) for i in range(steps)]
    assert stats["forward"].mean == pytest.approx((0.1 + 0.4 + 0.7) / 3)
    assert stats["step"].median == pytest.approx(per_step[1]) and stats["step"].max == pytest.approx(per_step[2])


@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16"])
def test_train_step_updates_the_parameters_in_every_precision(precision):
    workload = Workload(model_config("tiny", 16), batch_size=2, device="cpu", precision=precision)
    before = [p.detach().clone() for p in workload.model.parameters()]
    losses = [workload.step("train-step", PhaseTimer("cpu")) for _ in range(3)]
    assert all(torch.isfinite(torch.tensor(losses)))
    changed = [not torch.equal(a, p) for a, p in zip(before, workload.model.parameters())]
    # fp16: GradScaler may skip the first step(s) on overflow, but three steps move every parameter.
    assert all(changed)
    assert workload.scaler.is_enabled() == (precision == "fp16")


def test_forward_mode_keeps_no_graph_and_no_gradients():
    workload = Workload(model_config("tiny", 8), batch_size=1, device="cpu")
    workload.step("forward", PhaseTimer("cpu"))
    assert all(p.grad is None for p in workload.model.parameters())
    workload.step("forward-backward", PhaseTimer("cpu"))
    assert all(p.grad is not None for p in workload.model.parameters())


def test_benchmark_measures_one_configuration():
    settings = WorkloadSettings(size="tiny", context_length=8, batch_size=2, mode="forward-backward", warmup=0, steps=2)
    row = benchmark(settings, "cpu")
    assert row["status"] == "ok" and list(row["phases"]) == ["forward", "backward"]
    assert row["step"].mean == pytest.approx(sum(stats.mean for stats in row["phases"].values()))
    assert row["model_flops"] == model_flops(model_config("tiny", 8), 2, 8, backward=True)
    assert row["tokens_per_s"] == pytest.approx(2 * 8 / row["step"].mean) and row["mfu"] is None
    with pytest.raises(ValueError, match=r"WorkloadSettings\.mode must be one of"):
        WorkloadSettings(size="tiny", mode="train")
    with pytest.raises(ValueError, match=r"WorkloadSettings\.size must be one of"):
        WorkloadSettings(size="huge")


def test_model_command_writes_rows_with_statistics(tmp_path, capsys):
    code = main(
        [
            "model",
            "--size",
            "tiny",
            "--context-length",
            "16",
            "--batch-size",
            "2",
            "--mode",
            "forward",
            "train-step",
            "--precision",
            "fp32",
            "bf16",
            "--warmup",
            "1",
            "--steps",
            "2",
            "--device",
            "cpu",
            "--out",
            str(tmp_path),
            "--csv",
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "step_ms" in out and "train-step" in out and str(tmp_path / "model.json") in out
    header, _, *lines = out.splitlines()[1:7]  # after the "device: ..." line: 4 rows
    assert header.split()[:2] == ["size", "params_M"]
    assert [line.split()[:2] for line in lines] == [["tiny", "1.411"]] * 4  # 1,411,392 parameters
    document = json.loads((tmp_path / "model.json").read_text())
    assert document["environment"]["torch"] == torch.__version__
    rows = document["rows"]
    assert [(r["mode"], r["precision"]) for r in rows] == [
        ("forward", "fp32"),
        ("forward", "bf16"),
        ("train-step", "fp32"),
        ("train-step", "bf16"),
    ]
    for row in rows:
        assert row["status"] == "ok" and row["mfu"] is None  # no MFU on a CPU
        assert list(row["phases"]) == list(PHASES[row["mode"]])
        step = row["step"]
        assert 0 < step["min"] <= step["median"] <= step["max"] and step["std"] >= 0
        assert row["tokens_per_s"] == pytest.approx(2 * 16 / step["mean"])
        assert row["parameters"] == 1_411_392  # 771_392 + the 640_000-entry embedding table
    assert (tmp_path / "model.csv").read_text().count("\n") == 5


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on a machine without a GPU")
def test_gpu_request_on_a_cpu_machine_is_a_clear_error(tmp_path, capsys):
    assert main(["model", "--device", "cuda", "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip() == (
        "benchkit model: error: --device cuda was requested but no CUDA GPU is visible on this machine"
    )


@pytest.fixture
def two_gpus(monkeypatch):
    """A machine that reports 2 CUDA GPUs; returns the devices passed to torch.cuda.set_device."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    selected = []
    monkeypatch.setattr(torch.cuda, "set_device", selected.append)
    return selected


def test_cuda_n_becomes_the_current_device(two_gpus):
    assert resolve_device("cuda:1") == torch.device("cuda", 1)
    assert two_gpus == [torch.device("cuda", 1)]
    assert resolve_device("cuda") == torch.device("cuda") and resolve_device("auto") == torch.device("cuda")
    assert two_gpus == [torch.device("cuda", 1)]  # no index: the current device stays


def test_cuda_n_beyond_the_visible_gpus_is_a_clear_error(two_gpus, monkeypatch, tmp_path, capsys):
    with pytest.raises(BenchkitError, match="--device cuda:2 was requested but only cuda:0 to cuda:1 are visible"):
        resolve_device("cuda:2")
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert main(["model", "--device", "cuda:7", "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip() == (
        "benchkit model: error: --device cuda:7 was requested but only cuda:0 is visible on this machine"
    )
    assert two_gpus == []


def test_bad_arguments_get_argparse_errors(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["model", "--steps", "0"])
    assert exit_info.value.code == 2 and "--steps" in capsys.readouterr().err


@pytest.mark.gpu
def test_model_command_on_gpu_reports_mfu_for_known_devices(tmp_path):
    assert (
        main(
            [
                "model",
                "--size",
                "tiny",
                "--context-length",
                "64",
                "--precision",
                "bf16",
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
    (row,) = json.loads((tmp_path / "model.json").read_text())["rows"]
    assert row["status"] == "ok" and row["tokens_per_s"] > 0
    known = peak_flops(torch.cuda.get_device_name(), "bf16") is not None
    assert (row["mfu"] is not None) == known
    if known:
        assert 0 < row["mfu"] < 1


def test_an_out_of_memory_configuration_is_recorded_and_the_sweep_goes_on(tmp_path, monkeypatch):
    import benchkit.workload

    real_workload = benchkit.workload.Workload

    def workload_that_fails_for_bf16(config, **kwargs):
        if kwargs["precision"] == "bf16":
            raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
        return real_workload(config, **kwargs)

    monkeypatch.setattr(benchkit.workload, "Workload", workload_that_fails_for_bf16)
    assert (
        main(
            [
                "model",
                "--size",
                "tiny",
                "--context-length",
                "8",
                "--precision",
                "bf16",
                "fp32",
                "--warmup",
                "0",
                "--steps",
                "1",
                "--device",
                "cpu",
                "--out",
                str(tmp_path),
            ]
        )
        == 0
    )
    rows = json.loads((tmp_path / "model.json").read_text())["rows"]
    assert [(r["precision"], r["status"]) for r in rows] == [("bf16", "OOM"), ("fp32", "ok")]


class FakeParameter:
    """Stands in for a parameter where only its device and dtype class matter."""

    def __init__(self, is_cuda: bool, floating: bool) -> None:
        self.is_cuda, self._floating = is_cuda, floating

    def is_floating_point(self) -> bool:
        return self._floating


def test_adamw_is_fused_only_when_every_parameter_is_a_floating_cuda_tensor():
    cuda_float, cuda_int, cpu_float = FakeParameter(True, True), FakeParameter(True, False), FakeParameter(False, True)
    assert adamw_options([cuda_float, cuda_float]) == {"lr": LEARNING_RATE, "fused": True}
    assert adamw_options(iter([cuda_float]), lr=1e-3) == {"lr": 1e-3, "fused": True}  # any iterable
    assert adamw_options([cuda_float, cpu_float]) == {"lr": LEARNING_RATE}
    assert adamw_options([cuda_float, cuda_int]) == {"lr": LEARNING_RATE}
    assert adamw_options([]) == {"lr": LEARNING_RATE}
    # On a CPU the workload's AdamW keeps PyTorch's defaults.
    workload = Workload(model_config("tiny", 16), batch_size=1, device="cpu")
    assert workload.optimizer.defaults["fused"] is None


@pytest.mark.gpu
def test_workload_adamw_is_fused_on_cuda():
    workload = Workload(model_config("tiny", 16), batch_size=1, device="cuda")
    assert workload.optimizer.defaults["fused"] is True
    measure(workload, "train-step", warmup=1, steps=1)
