"""``gpufleet worker-secret``: a kubeconfig Kueue accepts becomes the policy's Secret; one Kueue's
``validateKubeconfig`` would refuse is a located error, exit 2, nothing written. (That Kueue accepts
what passes is shown on the real Kueue by the federation e2e tests, whose Secrets this writes.)"""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from gpufleet.cli import app
from gpufleet.errors import InputError
from gpufleet.render.worker_secret import worker_secret
from tests.support import EXAMPLES

GOOD = """\
apiVersion: v1
kind: Config
clusters:
- name: weu
  cluster:
    server: https://aks-weu.hcp.westeurope.azmk8s.io:443
    certificate-authority-data: Q0E=
users:
- name: mk
  user:
    token: abc
contexts:
- name: weu
  context: {cluster: weu, user: mk}
current-context: weu
"""


def test_an_acceptable_kubeconfig_becomes_the_named_secret() -> None:
    secret = worker_secret("aks-weu-kubeconfig", GOOD, "weu.yaml")
    assert secret["metadata"]["name"] == "aks-weu-kubeconfig" and secret["metadata"]["namespace"] == "kueue-system"
    assert base64.b64decode(secret["data"]["kubeconfig"]).decode() == GOOD


# (id, old, new, path, message fragment)
CASES = [
    ("token-file", "token: abc", "tokenFile: /var/run/token", "users[0].user.tokenFile", "tokenFile is not allowed"),
    ("exec", "token: abc", "exec: {command: kubelogin}", "users[0].user.exec", "exec plugins are not allowed"),
    ("basic-auth", "token: abc", "username: admin", "users[0].user.username", "basic auth"),
    (
        "cert-file",
        "token: abc",
        "client-certificate: /tmp/c.crt",
        "users[0].user.client-certificate",
        "client-certificate-data",
    ),
    (
        "ca-file",
        "certificate-authority-data: Q0E=",
        "certificate-authority: /tmp/ca.crt",
        "clusters[0].cluster.certificate-authority",
        "use certificate-authority-data",
    ),
    (
        "insecure",
        "certificate-authority-data: Q0E=",
        "insecure-skip-tls-verify: true",
        "clusters[0].cluster.insecure-skip-tls-verify",
        "insecure TLS",
    ),
    (
        "no-server",
        "    server: https://aks-weu.hcp.westeurope.azmk8s.io:443\n",
        "",
        "clusters[0].cluster",
        "server URL is required",
    ),
    (
        "bad-host",
        "aks-weu.hcp.westeurope.azmk8s.io",
        "aks_weu.example",
        "clusters[0].cluster.server",
        "untrusted server endpoint",
    ),
    ("no-context", "current-context: weu", "current-context: eus", "current-context", "names no context"),
]


@pytest.mark.parametrize(("old", "new", "path", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_what_kueue_refuses_is_a_located_error(old: str, new: str, path: str, message: str) -> None:
    assert old in GOOD
    with pytest.raises(InputError) as caught:
        worker_secret("s", GOOD.replace(old, new), "weu.yaml")
    problems = {p.path: p for p in caught.value.problems}
    assert path in problems, caught.value.summary()
    assert message in problems[path].message and problems[path].line is not None


def test_the_cli_writes_the_secret_the_policy_names_or_nothing(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "weu.yaml"
    kubeconfig.write_text(GOOD, encoding="utf-8")
    out = tmp_path / "secret.yaml"
    policy = str(EXAMPLES / "federation.yaml")
    result = CliRunner().invoke(
        app, ["worker-secret", policy, "aks-weu", "--kubeconfig", str(kubeconfig), "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert yaml.safe_load(out.read_text())["metadata"]["name"] == "aks-weu-kubeconfig"
    assert out.stat().st_mode & 0o777 == 0o600
    kubeconfig.write_text(GOOD.replace("token: abc", "tokenFile: /t"), encoding="utf-8")
    refused = tmp_path / "refused.yaml"
    result = CliRunner().invoke(
        app, ["worker-secret", policy, "aks-weu", "--kubeconfig", str(kubeconfig), "-o", str(refused)]
    )
    assert result.exit_code == 2 and "tokenFile is not allowed" in result.output
    assert not refused.exists()
    result = CliRunner().invoke(app, ["worker-secret", policy, "nowhere", "--kubeconfig", str(kubeconfig)])
    assert result.exit_code == 2 and "no cluster 'nowhere'" in result.output
