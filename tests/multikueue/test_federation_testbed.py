"""The federation testbed's pieces that need no control plane: its kubeconfigs pass Kueue's checks, and
it refuses a policy it cannot federate. (Starting it is the e2e tests' work: tests/e2e/test_federation.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gpufleet.policy import load_policy, resolve
from gpufleet.render.worker_secret import kubeconfig_problems
from gpufleet.testbed import TestbedError
from gpufleet.testbed.__main__ import main
from gpufleet.testbed.federation import Federation, inline_kubeconfig
from gpufleet.testbed.pki import Authority
from gpufleet.yamldoc import read_document
from tests.support import EXAMPLES


def test_the_kubeconfig_given_to_the_manager_is_one_kueue_accepts(tmp_path: Path) -> None:
    ca = Authority.create(tmp_path)
    client = ca.issue("admin", "admin", organization="system:masters", client=True)
    config = inline_kubeconfig("https://127.0.0.1:6443", ca.pair.cert, client.cert, client.key, "west")
    text = yaml.safe_dump(config)
    assert list(kubeconfig_problems(read_document(text, "west.kubeconfig"))) == []
    assert "certificate-authority-data" in config["clusters"][0]["cluster"]
    assert set(config["users"][0]["user"]) == {"client-certificate-data", "client-key-data"}


def test_a_policy_without_clusters_is_refused_before_anything_starts(tmp_path: Path) -> None:
    fleet = resolve(load_policy(EXAMPLES / "tiny.yaml"))
    with pytest.raises(TestbedError, match="declares no clusters"):
        Federation(tmp_path).up(fleet)
    assert not (tmp_path / "manager").exists()


def test_status_of_a_federation_that_never_ran(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", "--federation", "--run-dir", str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip() == "manager: nothing"
