"""The command line: options reach their subcommand, from the shell and from hatch's bench scripts,
and the wrong ones are that subcommand's error, with its usage."""

import sys
from pathlib import Path

import pytest

from benchkit.cli import build_parser, main

HATCH_TOML = Path(__file__).resolve().parents[3] / "hatch.toml"


def test_run_takes_the_shared_size_option():
    args = build_parser().parse_args(["run", "--size", "small", "--device", "cpu"])
    assert args.command == "run" and args.size == ["small"]


def test_an_unknown_option_is_the_subcommands_error_with_its_usage(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["run", "--sizes", "small"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: benchkit run ")
    assert err.splitlines()[-1] == "benchkit run: error: unrecognized arguments: --sizes small"


@pytest.mark.skipif(sys.version_info < (3, 11), reason="reads hatch.toml with tomllib (Python 3.11)")
@pytest.mark.skipif(not HATCH_TOML.exists(), reason="needs the repository's hatch.toml")
def test_hatch_bench_scripts_pass_what_follows_them_to_their_subcommand(tmp_path):
    import tomllib

    scripts = tomllib.loads(HATCH_TOML.read_text())["envs"]["bench"]["scripts"]
    assert "run" in scripts
    for name, script in scripts.items():
        # hatch puts what follows `hatch run bench:<name>` where {args} stands.
        words = script.split()
        assert words[:2] == ["benchkit", name] and words[-1] == "{args}", script
        build_parser().parse_args([*words[1:-1], "--out", str(tmp_path)])
    # What the README's users type: `hatch run bench:run --size small`.
    args = build_parser().parse_args([*scripts["run"].split()[1:-1], "--size", "small"])
    assert args.command == "run" and args.size == ["small"]
