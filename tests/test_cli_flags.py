"""What a script relies on: --version, one -o/--output, --json answers and errors, exit codes, completion."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import gpufleet.cli.policy as policy_cli
from gpufleet import __version__
from gpufleet.cli import EXIT_CRASH, app, main
from gpufleet.trace import write_trace
from tests.simulate.fleets import SERVING_AT_RISK, job
from tests.support import EXAMPLES

runner = CliRunner()
FLEET = EXAMPLES / "fleet.yaml"


def _gpufleet(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "gpufleet", *args], capture_output=True, text=True, env=full_env, check=False
    )


def test_version_is_a_root_option_and_a_command() -> None:
    for args in (["--version"], ["version"]):
        result = runner.invoke(app, args)
        assert result.exit_code == 0
        assert result.stdout.strip() == __version__


def test_shell_completion_is_offered_and_completes_commands() -> None:
    helped = runner.invoke(app, ["--help"])
    assert "--install-completion" in helped.output and "--show-completion" in helped.output
    done = _gpufleet(env={"_GPUFLEET_COMPLETE": "complete_bash", "COMP_WORDS": "gpufleet pl", "COMP_CWORD": "1"})
    assert done.returncode == 0, done.stderr
    assert "plan" in done.stdout.split()


def test_output_is_spelled_o_or_output_and_the_old_out_still_works(tmp_path: Path) -> None:
    helped = " ".join(runner.invoke(app, ["render", "--help"]).output.split())
    assert "-o" in helped and "--output" in helped
    assert not re.search(r"--out\b", helped), "the old spelling is hidden"
    for flag, name in (("-o", "a"), ("--output", "b"), ("--out", "c")):
        result = runner.invoke(app, ["render", str(FLEET), flag, str(tmp_path / name)])
        assert result.exit_code == 0, result.output
        assert (tmp_path / name / "kustomization.yaml").exists()
    both = runner.invoke(app, ["render", str(FLEET), "-o", str(tmp_path / "x"), "--out", str(tmp_path / "y")])
    assert both.exit_code == 2
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


@pytest.fixture
def small(tmp_path: Path) -> dict[str, Path]:
    policy, trace = tmp_path / "fleet.yaml", tmp_path / "trace.csv"
    policy.write_text(SERVING_AT_RISK)
    write_trace([job("t1", "a", 0, 7200, gpus=2), job("t2", "a", 60, 300)], trace)
    return {"policy": policy, "trace": trace, "tmp": tmp_path}


def _json(args: list[str]) -> tuple[int, Any]:
    result = runner.invoke(app, args)
    try:
        return result.exit_code, json.loads(result.stdout)
    except ValueError:
        pytest.fail(f"stdout is not one JSON document: {result.stdout!r}")


def test_json_answers_are_json_only(small: dict[str, Path]) -> None:
    tmp = small["tmp"]
    code, plan = _json(["plan", str(FLEET), "--json"])
    assert code == 0 and {p["name"] for p in plan["pools"]} >= {"h100-train", "a100-mig"}
    code, rendered = _json(["render", str(FLEET), "-o", str(tmp / "m"), "--json"])
    assert code == 0 and rendered["output"] == str(tmp / "m")
    assert str(tmp / "m" / "kustomization.yaml") in rendered["files"]
    code, shown = _json(["trace", "show", str(small["trace"]), "--json"])
    assert code == 0 and shown["jobs"] == 2 and shown["submitSpanSeconds"] == 60
    args = ["simulate", str(small["policy"]), "--trace", str(small["trace"]), "-o", str(tmp / "sim"), "--json"]
    code, simulated = _json(args)
    assert code == 0 and list(simulated["runs"]) == ["queue"]
    assert simulated["files"]["results"] == str(tmp / "sim" / "results.json")
    assert json.loads((tmp / "sim" / "results.json").read_text())["runs"] == simulated["runs"]
    wait = simulated["runs"]["queue"]["teams"]["a"]["waitSeconds"]["max"]
    assert isinstance(wait, int | float), "seconds in JSON, not text for people"


BAD_POLICY = "pools:\n  - name: p\n    gpu: L41S\n    nodes: 1\n"


@pytest.mark.parametrize(
    ("case", "args", "file"),
    [
        ("plan", ["plan", "{missing}", "--json"], "{missing}"),
        ("plan bad field", ["plan", "{bad}", "--json"], "{bad}"),
        ("render", ["render", "{missing}", "-o", "{tmp}/m", "--json"], "{missing}"),
        ("check", ["check", "{missing}", "{missing}", "--json"], "{missing}"),
        ("scan", ["scan", "--kubeconfig", "{missing}", "--json"], "{missing}"),
        ("scan not a kubeconfig", ["scan", "--kubeconfig", "{garbage}", "--json"], "{garbage}"),
        ("scan not yaml", ["scan", "--kubeconfig", "{bad_yaml}", "--json"], "{bad_yaml}"),
        ("twin step", ["twin", "step", "{missing}", "--json"], "{missing}"),
        ("trace show", ["trace", "show", "{missing}", "--json"], "{missing}"),
        ("trace synth", ["trace", "synth", "{missing}", "-o", "{tmp}/t.csv", "--json"], "{missing}"),
        ("simulate", ["simulate", "{missing}", "--trace", "{missing}", "--json"], "{missing}"),
        ("demo in the way", ["demo", "-o", "{file}", "--json"], "{file}"),
    ],
)
def test_errors_under_json_are_json_with_located_problems(
    tmp_path: Path, case: str, args: list[str], file: str
) -> None:
    names = {"missing": str(tmp_path / "missing.yaml"), "bad": str(tmp_path / "bad.yaml"), "tmp": str(tmp_path)}
    names["file"] = str(tmp_path / "a-file")
    names["garbage"] = str(tmp_path / "garbage.yaml")
    names["bad_yaml"] = str(tmp_path / "bad-yaml")
    (tmp_path / "garbage.yaml").write_text("clusters: 3\n")  # YAML, but not a kubeconfig
    (tmp_path / "bad-yaml").write_text("not: [yaml")
    (tmp_path / "bad.yaml").write_text(BAD_POLICY)
    (tmp_path / "a-file").write_text("keep")
    code, document = _json([a.format(**names) for a in args])
    assert code == 2, case
    assert re.fullmatch(r"\d+ problems? found", document["error"])
    assert document["problems"], case
    for problem in document["problems"]:
        assert set(problem) == {"file", "line", "column", "path", "message"}
        assert problem["message"]
    assert file.format(**names) in {p["file"] for p in document["problems"]}


def test_a_usage_error_exits_2_and_is_json_under_json() -> None:
    plain = _gpufleet("plan", str(FLEET), "--no-such-flag")
    assert plain.returncode == 2 and "No such option" in plain.stderr
    as_json = _gpufleet("plan", str(FLEET), "--no-such-flag", "--json")
    assert as_json.returncode == 2
    assert "No such option" in json.loads(as_json.stdout)["error"]


def _boom(*_: object, **__: object) -> None:
    raise RuntimeError("a bug in make_plan")


@pytest.mark.parametrize("debug", [False, True])
def test_a_crash_exits_70_with_a_short_message_and_the_traceback_kept(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path, debug: bool
) -> None:
    """A double for the bug (make_plan raising): no real command is known to crash, and must not."""
    monkeypatch.setattr(policy_cli, "make_plan", _boom)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    if debug:
        monkeypatch.setenv("GPUFLEET_DEBUG", "1")
    else:
        monkeypatch.delenv("GPUFLEET_DEBUG", raising=False)
    with pytest.raises(SystemExit) as exited:
        main(["plan", str(FLEET)])
    assert exited.value.code == EXIT_CRASH != 1
    err = capsys.readouterr().err
    assert "gpufleet crashed: RuntimeError: a bug in make_plan" in err
    kept = list(tmp_path.glob("gpufleet-crash-*.txt"))
    if debug:
        assert "Traceback (most recent call last)" in err and not kept
    else:
        assert "Traceback" not in err and "GPUFLEET_DEBUG=1" in err
        assert len(kept) == 1 and str(kept[0]) in " ".join(err.split())
        assert "RuntimeError: a bug in make_plan" in kept[0].read_text()


def test_a_crash_under_json_is_a_json_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setattr(policy_cli, "make_plan", _boom)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with pytest.raises(SystemExit) as exited:
        main(["plan", str(FLEET), "--json"])
    assert exited.value.code == EXIT_CRASH
    assert "a bug in make_plan" in json.loads(capsys.readouterr().out)["error"]
    assert len(list(tmp_path.glob("gpufleet-crash-*.txt"))) == 1


@pytest.mark.parametrize(("args", "code"), [(["check", str(FLEET), "-"], 1), (["plan", str(FLEET)], 0)])
def test_main_keeps_the_commands_own_exit_codes(
    monkeypatch: pytest.MonkeyPatch, args: list[str], code: int, capsys: pytest.CaptureFixture[str]
) -> None:
    denied = "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j, namespace: research}\nspec: {template: {spec: {containers: []}}}\n"
    monkeypatch.setattr(sys, "stdin", __import__("io").StringIO(denied))
    with pytest.raises(SystemExit) as exited:
        main(args)
    assert exited.value.code == code, capsys.readouterr()


@pytest.mark.parametrize("extra", [[], ["--json"]], ids=["table", "json"])
def test_a_reader_that_goes_away_is_no_finding(extra: list[str]) -> None:
    """`gpufleet plan … | head`: the pipe closes before gpufleet writes; exit 141, not 1 (a finding)."""
    run = subprocess.Popen(
        [sys.executable, "-m", "gpufleet", "plan", str(FLEET), *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert run.stdout is not None and run.stderr is not None
    run.stdout.close()
    err = run.stderr.read().decode()
    assert run.wait() == 141, err
    assert "Traceback" not in err
