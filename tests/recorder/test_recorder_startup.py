"""``gpufleet record`` checks what it was given before it creates anything."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpufleet.cli import app

runner = CliRunner()


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        ([], "no usable cluster configuration"),
        (["--kubeconfig", "{tmp}/missing-kubeconfig"], "no usable cluster configuration"),
        (["--kubeconfig", "{tmp}/kubeconfig", "--checkpoint-key", "{tmp}/no-key"], "--checkpoint-key"),
        (["--kubeconfig", "{tmp}/kubeconfig", "--checkpoint-to", "file:x"], "needs --checkpoint-key"),
        (
            ["--kubeconfig", "{tmp}/kubeconfig", "--checkpoint-key", "{tmp}/k", "--checkpoint-to", "s3://x"],
            "file:PATH, configmap:NAMESPACE/NAME or log",
        ),
    ],
    ids=["no-kubeconfig", "missing-kubeconfig", "missing-key", "target-without-key", "unknown-target"],
)
def test_record_refuses_bad_configuration_before_creating_the_ledger(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, extra: list[str], said: str
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    (tmp_path / "kubeconfig").write_text(
        "apiVersion: v1\nkind: Config\nclusters: [{name: t, cluster: {server: 'http://127.0.0.1:1'}}]\n"
        "users: [{name: t, user: {}}]\ncontexts: [{name: t, context: {cluster: t, user: t}}]\ncurrent-context: t\n"
    )
    ledger = tmp_path / "ledger.db"
    args = [a.replace("{tmp}", str(tmp_path)) for a in extra]
    result = runner.invoke(app, ["record", "--ledger", str(ledger), "--metrics-port", "0", *args])
    assert result.exit_code == 2, result.output
    assert said in result.stderr and "Traceback" not in result.output
    assert not ledger.exists()
