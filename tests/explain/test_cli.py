"""``gpufleet why`` and ``what-if`` refuse unusable input with exit 2 and a located message, before or
without reaching any cluster (the answers themselves are tested on the testbed, tests/e2e/test_why_live.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from gpufleet.cli import app


def unreachable(tmp_path: Path) -> Path:
    """A well-formed kubeconfig whose API server listens nowhere (port 9 on loopback: discard, closed)."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:9"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["why", "no-slash"], "expected NAMESPACE/NAME of a Workload or Job, got 'no-slash'"),
        (["why", "a/b/c"], "expected NAMESPACE/NAME"),
        (["why", "a/b", "--kubeconfig", "{tmp}/missing"], "cannot load a kubeconfig"),
        (["why", "a/b", "--kubeconfig", "{tmp}/broken"], "cannot load a kubeconfig: not a kubeconfig"),
        (["why", "a/b", "--kubeconfig", "{tmp}/kubeconfig"], "cannot reach the API server"),
        (["what-if", "{tmp}/broken", "--kubeconfig", "{tmp}/kubeconfig"], "broken"),
        (["what-if", "{tmp}/nowhere.yaml"], "nowhere.yaml"),
        # the ledger is checked before the cluster is reached (the kubeconfig's server listens nowhere):
        # whatever the workload's state turns out to be, a bad --ledger is an error, never ignored
        (["why", "a/b", "--kubeconfig", "{tmp}/kubeconfig", "--ledger", "sqlite:///{tmp}/l.db"], "needs --policy"),
        (
            [
                "why",
                "a/b",
                "--kubeconfig",
                "{tmp}/kubeconfig",
                "--policy",
                "{tmp}/p.yaml",
                "--ledger",
                "sqlite:///{tmp}/l.db",
            ],
            "no such ledger file",
        ),
    ],
    ids=[
        "no-slash",
        "two-slashes",
        "no-kubeconfig",
        "not-a-kubeconfig",
        "no-server",
        "bad-policy",
        "no-policy",
        "ledger-without-policy",
        "no-ledger",
    ],
)
def test_unusable_input_exits_2_without_a_traceback(tmp_path: Path, args: list[str], words: str) -> None:
    unreachable(tmp_path)
    (tmp_path / "broken").write_text("not: [yaml", encoding="utf-8")
    argv = [a.format(tmp=tmp_path) for a in args]
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 2, result.output
    assert words.format(tmp=tmp_path) in " ".join(result.output.split())
    assert "Traceback" not in result.output
    as_json = CliRunner().invoke(app, [*argv, "--json"])
    assert as_json.exit_code == 2
    assert json.loads(as_json.stdout)["problems"]
    assert not (tmp_path / "l.db").exists()  # reading commands never create what they read


def test_the_human_answer_wraps_at_the_terminal_and_cuts_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Printed at 100 columns: every line fits, no ellipsis, every name and Kueue's message whole."""
    import io

    from rich.console import Console

    from gpufleet.cli import common
    from gpufleet.cli import why as why_cli
    from gpufleet.explain.report import why_json
    from gpufleet.explain.why import explain
    from tests.explain.objects import cluster_queue, short, team_setup, workload

    objects = [
        *team_setup(cluster_queue("alpha", 4, borrowing_limit=0), cluster_queue("beta", 4, borrowing_limit=4)),
        workload("beta", "a-rather-long-workload-name-for-borrowing", pods=3, gpus=2, admitted_to="beta"),
        workload("alpha", "wait", pods=1, gpus=4, message=short(2)),
    ]
    out = io.StringIO()
    narrow = Console(file=out, width=100, color_system=None)
    monkeypatch.setattr(common, "console", narrow)
    monkeypatch.setattr(why_cli, "console", narrow)
    report = why_json(explain(objects, "alpha", "wait"))
    report["kueueConfiguration"] = "Kueue's defaults"
    why_cli.print_why(report)
    text = out.getvalue()
    assert all(len(line) <= 100 for line in text.splitlines()), text
    assert "…" not in text
    assert "beta/a-rather-long-workload-name-for-borrowing" in text
    assert short(2) in " ".join(text.split())
    assert "WaitsBehindBorrowing" in text and "PreemptionNever" in text
    # what the borrower holds, in words (at 100 columns the cell wraps at a space: nothing is cut)
    assert "6 nvidia.com/gpu" in text and "in train" in text
