"""Output conventions: result files, tables, output arguments, progress, CLI errors."""

import argparse
import csv
import json
import multiprocessing
import os
import shlex
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

import benchkit
from benchkit import cli
from benchkit.errors import BenchkitError
from benchkit.options import add_output_arguments
from benchkit.report import environment, format_table, progress, write_results
from benchkit.timing import summarize

ENVIRONMENT_KEYS = {"device", "torch", "triton", "cuda", "numpy", "git_revision", "command", "date", "hostname"}


def test_environment_records_device_versions_and_command():
    env = environment()
    assert set(env) >= ENVIRONMENT_KEYS
    assert env["torch"] and env["numpy"] and env["device"] and env["date"].endswith("+00:00")


def test_environment_records_python_dash_m_as_typed(monkeypatch):
    # What the interpreter sets under `python -X utf8 -m benchkit model --size tiny`.
    main_file = str(Path(benchkit.__file__).with_name("__main__.py"))
    monkeypatch.setattr(sys, "argv", [main_file, "model", "--size", "tiny"])
    monkeypatch.setattr(sys, "orig_argv", ["python", "-X", "utf8", "-m", "benchkit", "model", "--size", "tiny"])
    assert environment()["command"] == "python -X utf8 -m benchkit model --size tiny"
    # A rank spawned by that run inherits sys.argv; its own command line is multiprocessing's.
    monkeypatch.setattr(sys, "orig_argv", ["python", "-c", "from multiprocessing.spawn import spawn_main"])
    monkeypatch.setattr(multiprocessing, "parent_process", lambda: object())
    assert environment()["command"] == shlex.join([sys.executable, "-m", "benchkit", "model", "--size", "tiny"])


def test_environment_records_the_console_script_as_run(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["/venv/bin/benchkit", "model", "--out", "a b"])
    monkeypatch.setattr(sys, "orig_argv", ["/venv/bin/python", "/venv/bin/benchkit", "model", "--out", "a b"])
    assert environment()["command"] == "/venv/bin/benchkit model --out 'a b'"


def test_environment_records_the_console_script_by_the_name_typed(tmp_path, monkeypatch):
    # As `hatch run bench:run --size small` or an activated venv run it: the script's folder is on PATH,
    # and the interpreter only sees the script's absolute path.
    script = tmp_path / "env" / "bin" / "benchkit"
    script.parent.mkdir(parents=True)
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{script.parent}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setattr(sys, "argv", [str(script), "run", "--size", "small"])
    assert environment()["command"] == "benchkit run --size small"
    # Another benchkit first on PATH: the name would not run this one, so the path stays.
    other = tmp_path / "other" / "benchkit"
    other.parent.mkdir()
    shutil.copy(script, other)
    monkeypatch.setenv("PATH", f"{other.parent}{os.pathsep}{script.parent}")
    assert environment()["command"] == f"{script} run --size small"


def test_python_dash_m_benchkit_writes_its_command_line(tmp_path):
    out = tmp_path / "acc"
    command = [sys.executable, "-m", "benchkit", "accounting", "--model", "tiny", "--fsdp", "1", "--out", str(out)]
    subprocess.run(command, check=True, capture_output=True)
    assert json.loads((out / "accounting.json").read_text())["environment"]["command"] == shlex.join(command)


def test_write_results_json_and_csv(tmp_path):
    rows = [
        {"size": "tiny", "forward": summarize([0.5, 1.5]), "tokens_per_s": 1234.5},
        {"size": "small", "oom": True, "tokens_per_s": float("nan")},
    ]
    path = write_results(tmp_path / "new", "model", rows, meta={"steps": 10}, csv=True)
    assert path == tmp_path / "new" / "model.json"
    document = json.loads(path.read_text())
    assert set(document["environment"]) >= ENVIRONMENT_KEYS
    assert document["meta"] == {"steps": 10}
    assert document["rows"][0]["forward"] == {"mean": 1.0, "std": 0.5**0.5 * 1.0, "median": 1.0, "min": 0.5, "max": 1.5}
    assert document["rows"][1]["tokens_per_s"] is None  # NaN is not JSON
    with open(tmp_path / "new" / "model.csv", newline="") as handle:
        table = list(csv.DictReader(handle))
    assert list(table[0]) == ["size", "forward", "tokens_per_s", "oom"]
    assert table[0]["tokens_per_s"] == "1234.5" and table[1]["oom"] == "True"
    assert json.loads(table[0]["forward"])["max"] == 1.5
    assert not (tmp_path / "new" / "other.csv").exists()


def test_write_results_rejects_what_json_cannot_hold(tmp_path):
    with pytest.raises(TypeError, match="object"):
        write_results(tmp_path, "bad", [{"x": object()}])


def test_format_table_aligns_columns():
    rows = [{"name": "a", "ms": 1.23456, "n": 3}, {"name": "longer", "ms": 120.0, "n": None}]
    lines = format_table(rows).splitlines()
    assert lines[0].split() == ["name", "ms", "n"]
    assert set(lines[1].replace(" ", "")) == {"-"}
    assert lines[2].split() == ["a", "1.235", "3"] and lines[3].split() == ["longer", "120", "-"]
    assert len({len(line) for line in lines[:3]}) == 1  # fixed width, numbers right-aligned
    assert format_table(rows, columns=["n", "name"]).splitlines()[0].split() == ["n", "name"]


def test_output_arguments_default_to_the_command_folder(tmp_path):
    parser = argparse.ArgumentParser(prog="benchkit model")
    add_output_arguments(parser)
    args = parser.parse_args([])
    assert str(args.out) == "benchkit-results/model" and args.csv is False
    args = parser.parse_args(["--out", str(tmp_path), "--csv"])
    assert args.out == tmp_path and args.csv is True


@pytest.mark.parametrize("command", sorted(cli._command_modules()))
def test_every_out_option_is_checked_before_the_command_runs(command, tmp_path, monkeypatch, capsys):
    file = tmp_path / "results.json"
    file.write_text("{}")
    monkeypatch.setattr(
        cli.importlib.import_module(f"benchkit.commands.{command}"), "run", lambda args: pytest.fail("the command ran")
    )
    with pytest.raises(SystemExit) as exit_info:
        cli.main([command, "--out", str(file)])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"benchkit {command}: error: argument --out: {file} exists and is not a folder"
    )
    # The default folder is checked too: here benchkit-results is a file.
    (tmp_path / "benchkit-results").write_text("")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit):
        cli.main([command])
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"benchkit {command}: error: argument --out: benchkit-results/{command} cannot be created: "
        f"benchkit-results is not a folder"
    )


def test_a_second_run_into_the_same_folder_says_it_replaces_the_first(tmp_path, capsys):
    out = tmp_path / "acc"
    argv = ["accounting", "--model", "tiny", "--fsdp", "1", "--out", str(out)]
    assert cli.main(argv) == 0
    assert "note" not in capsys.readouterr().err  # a new folder: nothing to say
    assert cli.main(argv) == 0
    err = capsys.readouterr().err
    assert err.startswith(f"benchkit accounting: note: {out} already holds 2 files (accounting.json, accounting.png)")
    assert "replaces those it writes again" in err and "--out" in err


def test_the_default_results_folder_is_ignored_by_git():
    root = Path(__file__).resolve().parents[3]
    if shutil.which("git") is None or not (root / ".git").exists():
        pytest.skip("needs git and the repository's checkout")
    for path in ("benchkit-results/run/report.md", "benchkit-report/x.md"):
        done = subprocess.run(["git", "check-ignore", "-q", path], cwd=root)
        assert done.returncode == 0, f"{path} is not ignored by .gitignore"


def test_progress_yields_everything_and_reports_on_stderr(capsys):
    assert list(progress(iter(range(3)), "sweep", total=3)) == [0, 1, 2]
    err = capsys.readouterr().err
    assert "sweep: 3/3" in err and "sweep: 1/3" in err


def test_cli_turns_benchkit_error_into_exit_code_2(monkeypatch, capsys):
    def run(args):
        raise BenchkitError("needs a CUDA GPU")

    fake = types.SimpleNamespace(HELP="fails", EXAMPLES="  benchkit failing\n", add_arguments=lambda p: None, run=run)
    monkeypatch.setattr(cli, "_command_modules", lambda: {"failing": fake})
    assert cli.main(["failing"]) == 2
    assert capsys.readouterr().err.strip() == "benchkit failing: error: needs a CUDA GPU"
