"""``benchkit ddp`` at a tiny CPU size: both ways of starting, the result files, the derived columns, rounds."""

import json

import pytest
import torch

import benchkit.commands.ddp
from benchkit import data_parallel
from benchkit.cli import main
from benchkit.data_parallel import DataParallelPlan, add_derived_columns, rounds_order, run_rank
from benchkit.timing import PhaseTimer, summarize
from ddp.launch import spawn

TINY = [
    "--device",
    "cpu",
    "--size",
    "tiny",
    "--context-length",
    "8",
    "--batch-size",
    "1",
    "--warmup",
    "0",
    "--steps",
    "2",
]


@pytest.mark.distributed
def test_self_spawning_run_writes_table_json_and_plot(tmp_path, capsys):
    code = main(["ddp", *TINY, "--nproc", "2", "--bucket-mb", "1", "1000", "--out", str(tmp_path)])
    assert code == 0
    out = capsys.readouterr().out
    assert "2 ranks over gloo" in out and "x_torch" in out
    document = json.loads((tmp_path / "ddp.json").read_text())
    assert document["meta"]["world_sizes"] == [2] and document["meta"]["backend"] == "gloo"
    rows = document["rows"]
    assert [r["variant"] for r in rows] == [
        "local",
        "naive",
        "flat",
        "overlap",
        "bucketed-1MB",
        "bucketed-1000MB",
        "torch-ddp-25MB",
    ]
    for row in rows:
        assert row["status"] == "ok" and row["size"] == "tiny" and row["world_size"] == 2 and row["step"]["mean"] > 0
        assert set(row["phases"]) == (
            {"forward", "backward", "optimizer"}
            | ({"sync"} if row["variant"] not in ("local", "torch-ddp-25MB") else set())
        )
        for key in ("step_ms", "step_std_ms", "sync_ms", "over_local_ms", "hidden_pct", "vs_torch"):
            assert key in row
    assert (tmp_path / "ddp_tiny.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    partial = json.loads((tmp_path / "ddp.partial.json").read_text())["rows"]  # saved by rank 0 as it went
    assert [r["variant"] for r in partial] == [r["variant"] for r in rows]


def test_each_nproc_value_is_a_run_and_variants_compare_within_it(tmp_path, monkeypatch, capsys):
    runs = []

    def fake_run(plan, *, nproc, timeout_s):  # every variant takes 10 ms per rank
        runs.append((nproc, plan.earlier_rows))
        return [
            {
                "size": "tiny",
                "variant": variant,
                "world_size": nproc,
                "precision": "fp32",
                "status": "ok",
                "step": summarize([0.01 * nproc]),
                "phases": {"forward": summarize([0.01 * nproc])},
            }
            for variant in plan.variants
        ]

    monkeypatch.setattr(benchkit.commands.ddp, "run_data_parallel", fake_run)
    argv = ["ddp", *TINY, "--nproc", "1", "2", "--variants", "local", "naive", "--out", str(tmp_path)]
    assert main(argv) == 0
    assert [nproc for nproc, _ in runs] == [1, 2]
    # The second run's partial results are saved after the first run's rows.
    assert runs[0][1] == () and [(r["world_size"], r["variant"]) for r in runs[1][1]] == [(1, "local"), (1, "naive")]
    document = json.loads((tmp_path / "ddp.json").read_text())
    assert document["meta"]["world_sizes"] == [1, 2] and document["meta"]["nproc"] == [1, 2]
    rows = document["rows"]
    assert [(r["world_size"], r["variant"]) for r in rows] == [(1, "local"), (1, "naive"), (2, "local"), (2, "naive")]
    assert [r["over_local_ms"] for r in rows] == [0.0] * 4  # against the local run of the same world size
    assert "1 and 2 ranks over gloo" in capsys.readouterr().out
    assert (tmp_path / "ddp_tiny.png").read_bytes().startswith(b"\x89PNG")


def _under_torchrun(rank, world_size, out_dir):
    # ddp.launch.spawn sets RANK and WORLD_SIZE and initializes the group, as torchrun would.
    return main(["ddp", *TINY, "--variants", "bucketed", "torch-ddp", "--bucket-mb", "25", "--out", out_dir])


@pytest.mark.distributed
def test_under_a_launcher_it_does_not_spawn_and_rank_zero_writes(tmp_path):
    assert spawn(_under_torchrun, 2, args=(str(tmp_path),), timeout_s=120) == [0, 0]
    document = json.loads((tmp_path / "ddp.json").read_text())
    assert document["meta"]["world_sizes"] == [2]
    assert [r["variant"] for r in document["rows"]] == ["bucketed-25MB", "torch-ddp-25MB"]


def _torch_ddp_bucket_caps(rank, world_size):
    wrapped = data_parallel.wrap("torch-ddp-25MB", torch.nn.Linear(4, 4), torch.device("cpu"))
    no_finish = not hasattr(wrapped, "finish_gradient_synchronization")  # it synchronizes inside backward
    return no_finish, wrapped.bucket_bytes_cap, wrapped.bucket_bytes_cap_default


@pytest.mark.distributed
def test_torch_ddp_runs_at_its_defaults():
    # An explicit bucket_cap_mb, even 25, would turn off PyTorch DDP's 1 MiB first bucket.
    assert spawn(_torch_ddp_bucket_caps, 1, timeout_s=60) == [(True, 25 * 2**20, True)]


def _bucketed_variants(rank, world_size):
    names = data_parallel.variant_names(["local", "bucketed", "bucketed-bf16"], [1, 25])
    wrappers = [data_parallel.wrap(name, torch.nn.Linear(4, 4), torch.device("cpu")) for name in names[1:]]
    return names, [(w.bucket_size_mb, w.compress_bf16) for w in wrappers]


@pytest.mark.distributed
def test_bucketed_variants_with_and_without_bf16_compression():
    names, settings = spawn(_bucketed_variants, 1, timeout_s=60)[0]
    assert names == ["local", "bucketed-1MB", "bucketed-25MB", "bucketed-1MB-bf16", "bucketed-25MB-bf16"]
    assert settings == [(1.0, False), (25.0, False), (1.0, True), (25.0, True)]


def test_derived_columns_by_hand():
    def row(variant, step_s, sync_s=None):
        phases = {"forward": summarize([step_s / 2])}
        if sync_s is not None:
            phases["sync"] = summarize([sync_s])
        return {"size": "xl", "variant": variant, "status": "ok", "step": summarize([step_s]), "phases": phases}

    rows = [
        row("local", 0.100),
        row("naive", 0.150, 0.040),
        row("bucketed-25MB", 0.104, 0.002),
        row("torch-ddp-25MB", 0.105),
        {"size": "xl", "variant": "flat", "status": "OOM"},
    ]
    add_derived_columns(rows)
    local, naive, bucketed, torch_ddp, failed = rows
    assert failed["step_ms"] is None and failed["vs_torch"] is None
    assert bucketed["over_local_ms"] == pytest.approx(4.0) and torch_ddp["over_local_ms"] == pytest.approx(5.0)
    assert naive["hidden_pct"] == pytest.approx(0.0) and bucketed["hidden_pct"] == pytest.approx(95.0)
    assert local["hidden_pct"] is None and torch_ddp["sync_ms"] is None
    assert bucketed["vs_torch"] == pytest.approx(104 / 105)


def test_gpu_request_without_gpu_is_a_one_line_error(capsys, monkeypatch):
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    assert main(["ddp", *TINY[2:], "--device", "cuda"]) == 2
    assert "no CUDA GPU is visible" in capsys.readouterr().err


def test_rounds_order_starts_each_round_one_variant_later():
    assert rounds_order(["a", "b", "c"], 1) == ["a", "b", "c"]
    assert rounds_order(["a", "b", "c"], 2) == ["a", "b", "c", "b", "c", "a"]
    assert rounds_order(["a", "b"], 3) == ["a", "b", "b", "a", "a", "b"]


def _plan(tmp_path, rounds):
    return DataParallelPlan(
        sizes=("tiny",),
        context_length=8,
        batch_size=1,
        precision="fp32",
        attention="sdpa",
        variants=("local", "naive", "torch-ddp-25MB"),
        warmup=0,
        steps=1,
        rounds=rounds,
        device_type="cpu",
        out_dir=str(tmp_path),
    )


def test_rounds_pool_each_variants_timed_steps(tmp_path, monkeypatch):
    # A fake measurement: the n-th call times its one step's forward as n seconds, backward as 1.
    calls = []

    def measure(variant, base, plan):
        calls.append(variant)
        timer = PhaseTimer("cpu")
        timer.samples = {"forward": [float(len(calls))], "backward": [1.0]}
        return timer

    monkeypatch.setattr(data_parallel, "measure_variant", measure)
    rows = run_rank(0, 1, _plan(tmp_path, rounds=2))
    assert calls == ["local", "naive", "torch-ddp-25MB", "naive", "torch-ddp-25MB", "local"]
    assert [r["variant"] for r in rows] == ["local", "naive", "torch-ddp-25MB"]  # plan order
    local, naive, torch_ddp = rows
    assert local["phases"]["forward"].mean == 3.5  # calls 1 and 6
    assert local["step"].mean == 4.5 and naive["step"].mean == 4.0 and torch_ddp["step"].mean == 5.0
    assert local["step"].std == pytest.approx(summarize([2.0, 7.0]).std)  # over both rounds' steps
    assert all(r["rounds"] == 2 and r["status"] == "ok" for r in rows)
    partial = json.loads((tmp_path / "ddp.partial.json").read_text())["rows"]
    assert [r["variant"] for r in partial] == ["local", "naive", "torch-ddp-25MB"]
    assert partial[0]["step"]["mean"] == 4.5


def test_a_variant_that_fails_is_not_run_again_in_later_rounds(tmp_path, monkeypatch):
    calls = []

    def measure(variant, base, plan):
        calls.append(variant)
        if variant == "naive":
            raise torch.OutOfMemoryError("planted by the test")
        timer = PhaseTimer("cpu")
        timer.samples = {"forward": [1.0]}
        return timer

    monkeypatch.setattr(data_parallel, "measure_variant", measure)
    rows = run_rank(0, 1, _plan(tmp_path, rounds=2))
    assert calls == ["local", "naive", "torch-ddp-25MB", "torch-ddp-25MB", "local"]
    assert [r["status"] for r in rows] == ["ok", "OOM", "ok"] and "step" not in rows[1]
