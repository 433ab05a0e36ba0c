"""The shared options: one meaning of --size, --nproc, --device and --format in every subcommand,
their defaults, and how the distributed benchmarks read them."""

import pytest
import torch

from benchkit.cli import build_parser
from benchkit.errors import BenchkitError
from benchkit.options import default_nproc, default_sizes, earlier_results_note
from benchkit.ranks import rank_device_type, rank_runs


def test_default_sizes_are_tiny_on_a_cpu_and_the_commands_own_on_a_gpu():
    assert default_sizes(torch.device("cpu"), ("small", "xl")) == ["tiny"]
    assert default_sizes(torch.device("cuda"), ("small", "xl")) == ["small", "xl"]


def test_default_nproc_is_one_rank_per_gpu_or_two_on_a_cpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 3)
    assert default_nproc(torch.device("cuda")) == [3] and default_nproc(torch.device("cpu")) == [2]


@pytest.mark.parametrize("command", ["ddp", "zero"])
def test_nproc_takes_one_run_per_value_in_each_distributed_command(command):
    parser = build_parser()
    assert parser.parse_args([command, "--nproc", "2", "4"]).nproc == [2, 4]
    assert parser.parse_args([command]).nproc is None  # default_nproc decides
    with pytest.raises(SystemExit):
        parser.parse_args([command, "--nproc", "0"])


def test_ranks_take_one_gpu_each_and_torchrun_sets_their_number(monkeypatch):
    assert rank_device_type(torch.device("cpu")) == "cpu" and rank_device_type(torch.device("cuda")) == "cuda"
    with pytest.raises(BenchkitError, match="--device cuda:1 names one GPU, but the ranks take one GPU each"):
        rank_device_type(torch.device("cuda", 1))
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)
    assert rank_runs([2, 4]) == [2, 4]
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("LOCAL_RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "8")
    assert rank_runs([2, 4]) == [8]


@pytest.mark.parametrize(
    "command", ["accounting", "allreduce", "attention", "ddp", "memory", "precision", "run", "zero"]
)
def test_every_command_that_draws_takes_a_figure_format(command):
    parser = build_parser()
    assert parser.parse_args([command]).format == "png"
    assert parser.parse_args([command, "--format", "svg"]).format == "svg"
    with pytest.raises(SystemExit):
        parser.parse_args([command, "--format", "jpg"])


def test_earlier_results_note(tmp_path):
    assert earlier_results_note(tmp_path / "new") is None
    assert earlier_results_note(tmp_path) is None  # empty
    for name in ("b.json", "a.png", "c.csv", "d.json"):
        (tmp_path / name).write_text("")
    assert earlier_results_note(tmp_path) == (
        f"{tmp_path} already holds 4 files (a.png, b.json, c.csv, ...); this run replaces those it writes again. "
        f"Use --out DIR to keep runs apart"
    )
