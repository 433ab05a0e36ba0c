"""``benchkit allreduce`` on gloo with tiny messages; the bandwidth arithmetic by hand."""

import json

import pytest

from benchkit.allreduce import bus_bandwidth, result_rows
from benchkit.cli import main


def test_bus_bandwidth_is_nccl_tests_definition():
    assert bus_bandwidth(10.0, 2) == 10.0
    assert bus_bandwidth(10.0, 4) == 15.0  # 2 * 3 / 4
    # 1 GiB in 4.54 ms on 4 ranks is about 355 GB/s of bus bandwidth.
    assert bus_bandwidth(2**30 / 4.54e-3 / 1e9, 4) == pytest.approx(354.8, abs=0.1)


def test_the_slowest_rank_sets_each_iteration():
    per_rank = [[[1.0, 3.0]], [[2.0, 1.0]]]  # rank, size, iteration (seconds)
    (row,) = result_rows("gloo", 2, [1.0], "fp32", per_rank)
    assert row["ms"] == pytest.approx(2500.0)  # iterations take 2 s and 3 s
    assert row["bytes"] == 2**20 and row["algbw_GBps"] == pytest.approx(2**20 / 2.5 / 1e9)


@pytest.mark.distributed
def test_gloo_run_writes_rows_and_plots(tmp_path, capsys):
    code = main(
        [
            "allreduce",
            "--backend",
            "gloo",
            "--world-sizes",
            "2",
            "--sizes-mb",
            "0.001",
            "0.01",
            "--dtype",
            "bf16",
            "--warmup",
            "1",
            "--iters",
            "3",
            "--out",
            str(tmp_path),
        ]
    )
    assert code == 0
    assert "busbw_GBps" in capsys.readouterr().out
    rows = json.loads((tmp_path / "allreduce.json").read_text())["rows"]
    assert [(r["backend"], r["world_size"], r["size_mb"]) for r in rows] == [("gloo", 2, 0.001), ("gloo", 2, 0.01)]
    for row in rows:
        assert row["bytes"] == round(row["size_mb"] * 2**20 / 2) * 2  # bf16: 2 bytes per element
        assert row["ms"] > 0 and row["algbw_GBps"] == pytest.approx(row["bytes"] / row["time"]["mean"] / 1e9)
        assert row["busbw_GBps"] == pytest.approx(row["algbw_GBps"])  # 2 ranks: 2 (n - 1) / n = 1
    for name in ("allreduce_busbw.png", "allreduce_ms.png"):
        assert (tmp_path / name).read_bytes().startswith(b"\x89PNG")


def test_requests_this_machine_cannot_serve(capsys, monkeypatch):
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    assert main(["allreduce", "--backend", "nccl"]) == 2
    assert "needs CUDA GPUs" in capsys.readouterr().err
    assert main(["allreduce", "--backend", "gloo", "--world-sizes", "100000"]) == 2
    assert "no run fits this machine" in capsys.readouterr().err
