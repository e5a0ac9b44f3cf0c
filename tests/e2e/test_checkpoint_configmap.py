"""Checkpoints in a ConfigMap, on the real testbed API server, written as the recorder's own
ServiceAccount with the rendered RBAC.

The rendered recorder objects (its ServiceAccount, the empty checkpoint ConfigMap, and the Role and
RoleBinding for it) are applied to a namespace of their own; the publisher runs with a token of
that ServiceAccount, so the API server's RBAC decides what it may write. An auditor reads the
checkpoint with ``kubectl get configmap -o jsonpath`` and hands it to ``audit verify``.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from gpufleet.cli import app
from gpufleet.ledger import checkpoint as checkpoints
from gpufleet.ledger import note
from gpufleet.ledger.records import Allocation, Record
from gpufleet.ledger.store import Ledger
from gpufleet.recorder.manifests import CHECKPOINT_CONFIGMAP, NAME, recorder_objects
from gpufleet.recorder.metrics import Metrics
from gpufleet.recorder.publish import CONFIGMAP_KEY, CheckpointPolicy, Publisher
from tests.e2e.conftest import Cluster
from tests.ledger import ledger_golden

NAMESPACE = "ledger-checkpoint-e2e"
SERVICE_ACCOUNT = f"system:serviceaccount:{NAMESPACE}:{NAME}"
runner = CliRunner()


@pytest.fixture(scope="module")
def recorder_kubeconfig(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The rendered recorder's RBAC and ConfigMap applied; a kubeconfig with its ServiceAccount's token."""
    cluster.kubectl("create", "namespace", NAMESPACE)
    wanted = {"ServiceAccount", "ConfigMap", "Role", "RoleBinding"}
    cluster.apply([o for o in recorder_objects(NAMESPACE, "img", None) if o["kind"] in wanted])
    token = cluster.kubectl("create", "token", NAME, f"--namespace={NAMESPACE}").stdout.strip()
    admin = yaml.safe_load(Path(cluster.kubeconfig).read_text())
    (entry,) = admin["clusters"]
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [entry],
        "users": [{"name": "recorder", "user": {"token": token}}],
        "contexts": [{"name": "recorder", "context": {"cluster": entry["name"], "user": "recorder"}}],
        "current-context": "recorder",
    }
    path = tmp_path_factory.mktemp("recorder") / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    yield str(path)
    cluster.kubectl("delete", "namespace", NAMESPACE, "--wait=false", check=False)


@pytest.fixture
def keys(tmp_path: Path) -> tuple[Path, Path]:
    prefix = tmp_path / "ledger-key"
    result = runner.invoke(app, ["audit", "keygen", "-o", str(prefix), "--name", "e2e.example/ledger"])
    assert result.exit_code == 0, result.output
    return prefix, tmp_path / "ledger-key.pub"


@pytest.fixture
def new_publisher(keys: tuple[Path, Path], recorder_kubeconfig: str) -> Callable[..., tuple[Publisher, Metrics]]:
    """Makes a fresh publisher (no memory of what was published) signing with the test's key and
    writing to the ConfigMap ``configmap`` as the recorder's ServiceAccount."""
    private, _ = keys

    def make(configmap: str = CHECKPOINT_CONFIGMAP) -> tuple[Publisher, Metrics]:
        policy = CheckpointPolicy(key=private, targets=(f"configmap:{NAMESPACE}/{configmap}",), every_entries=1)
        signer = note.parse_signer(private.read_text(encoding="utf-8"))
        metrics = Metrics()
        return Publisher(policy, signer, metrics, kubeconfig=recorder_kubeconfig), metrics

    return make


def _configmap(cluster: Cluster) -> dict[str, Any]:
    found: dict[str, Any] = cluster.get("configmap", CHECKPOINT_CONFIGMAP, f"--namespace={NAMESPACE}")
    return found


def _as_an_auditor_reads_it(cluster: Cluster, out: Path) -> Path:
    """``kubectl get configmap NAME -o jsonpath='{.data.checkpoint}' > FILE``, as the docs say."""
    jsonpath = "jsonpath={.data." + CONFIGMAP_KEY + "}"
    text = cluster.kubectl("get", "configmap", CHECKPOINT_CONFIGMAP, f"--namespace={NAMESPACE}", "-o", jsonpath).stdout
    out.write_text(text, encoding="utf-8")
    return out


def _ledger(path: Path, records: list[Record]) -> str:
    with Ledger.open(str(path)) as ledger:
        ledger.append(records)
    return str(path)


def _verify(ledger: str, checkpoint: Path, public: Path) -> Any:
    return runner.invoke(
        app, ["audit", "verify", "--ledger", ledger, "--checkpoint", str(checkpoint), "--pubkey", str(public)]
    )


@pytest.mark.parametrize(
    ("verb", "what", "allowed"),
    [
        ("get", f"configmap/{CHECKPOINT_CONFIGMAP}", "yes"),
        ("update", f"configmap/{CHECKPOINT_CONFIGMAP}", "yes"),
        ("patch", f"configmap/{CHECKPOINT_CONFIGMAP}", "no"),
        ("delete", f"configmap/{CHECKPOINT_CONFIGMAP}", "no"),
        ("update", "configmap/another", "no"),
        ("get", "configmap/another", "no"),
        ("create", "configmaps", "no"),
        ("list", "configmaps", "no"),
        ("update", "leases", "yes"),
    ],
)
def test_the_rendered_rbac_allows_exactly_the_checkpoint_configmap(
    cluster: Cluster, recorder_kubeconfig: str, verb: str, what: str, allowed: str
) -> None:
    result = cluster.kubectl(
        "auth", "can-i", verb, what, f"--namespace={NAMESPACE}", f"--as={SERVICE_ACCOUNT}", check=False
    )
    assert result.stdout.strip() == allowed, (verb, what, result.stdout, result.stderr)


def test_published_to_the_configmap_updated_by_the_next_and_verify_uses_it(
    cluster: Cluster, new_publisher: Callable[..., tuple[Publisher, Metrics]], keys: tuple[Path, Path], tmp_path: Path
) -> None:
    _, public = keys
    records = ledger_golden.records()
    ledger_path = tmp_path / "ledger.db"
    publisher, metrics = new_publisher()
    with Ledger.open(str(ledger_path)) as ledger:
        ledger.append(records[:100])
        first = publisher.publish(ledger)
        assert first is not None and first.size == 100
        before = _configmap(cluster)
        ledger.append(records[100:])
        second = publisher.publish(ledger)
        assert second is not None and second.size == len(records) == 294
    after = _configmap(cluster)

    assert checkpoints.parse(before["data"][CONFIGMAP_KEY])[0].size == 100
    assert after["metadata"]["resourceVersion"] != before["metadata"]["resourceVersion"]
    assert after["metadata"]["labels"] == before["metadata"]["labels"]  # the bundle's metadata is kept
    assert set(after["data"]) == {CONFIGMAP_KEY}
    assert metrics.registry.get_sample_value("gpufleet_recorder_last_checkpoint_size") == 294

    anchor = _as_an_auditor_reads_it(cluster, tmp_path / "checkpoint")
    assert anchor.read_text(encoding="utf-8") == second.signed(publisher.signer)  # byte for byte
    intact = _verify(str(ledger_path), anchor, public)
    assert intact.exit_code == 0, intact.output
    assert "extends checkpoint" in intact.output and "294" in intact.output

    # the tail cut, with a clean chain and head recomputed by gpufleet's own code
    truncated = _ledger(tmp_path / "truncated.db", records[:250])
    cut = _verify(truncated, anchor, public)
    assert cut.exit_code == 1, cut.output
    assert "SizeShrank" in cut.output and "entries 251..294 were removed" in cut.output

    # one early allocation rewritten, every hash recomputed
    forged = list(records)
    victim = next(i for i, r in enumerate(forged) if isinstance(r, Allocation))
    original = forged[victim]
    assert isinstance(original, Allocation)
    forged[victim] = replace(original, gpu_count=original.gpu_count + 1)
    rewritten = _verify(_ledger(tmp_path / "rewritten.db", forged), anchor, public)
    assert rewritten.exit_code == 1 and "RootDiffers" in rewritten.output, rewritten.output


def test_a_restarted_publisher_will_not_sign_a_ledger_cut_below_the_configmaps_checkpoint(
    cluster: Cluster,
    new_publisher: Callable[..., tuple[Publisher, Metrics]],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    records = ledger_golden.records()
    publisher, _ = new_publisher()
    with Ledger.open(_ledger(tmp_path / "ledger.db", records)) as ledger:
        assert publisher.publish(ledger) is not None
    published = _configmap(cluster)

    restarted, _ = new_publisher()
    restarted.resume()  # reads the ConfigMap's checkpoint back
    assert restarted.last is not None and restarted.last[0] == len(records)
    truncated = tmp_path / "truncated.db"
    with Ledger.open(_ledger(truncated, records[:200])) as ledger, caplog.at_level(logging.ERROR):
        assert restarted.publish(ledger) is None
        fresh, _ = new_publisher()  # no memory at all: the ConfigMap still anchors it
        assert fresh.publish(ledger) is None
    assert "NOT publishing" in caplog.text
    assert _configmap(cluster)["metadata"]["resourceVersion"] == published["metadata"]["resourceVersion"]
    with sqlite3.connect(truncated) as conn:
        assert conn.execute("SELECT count(*) FROM ledger_entries").fetchone() == (200,)


def test_a_configmap_the_role_does_not_name_is_refused_and_logged_not_fatal(
    cluster: Cluster,
    new_publisher: Callable[..., tuple[Publisher, Metrics]],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    publisher, metrics = new_publisher(configmap="not-the-checkpoint")
    ledger_url = _ledger(tmp_path / "ledger.db", ledger_golden.records()[:10])
    with Ledger.open(ledger_url) as ledger, caplog.at_level(logging.ERROR):
        assert publisher.publish(ledger) is not None  # signed (the next must extend it), not written
    assert "cannot write the checkpoint to configmap" in caplog.text and "403" in caplog.text
    assert (
        metrics.registry.get_sample_value("gpufleet_recorder_last_checkpoint_size") == 0
    )  # so the staleness alert fires
    missing = cluster.kubectl("get", "configmap", "not-the-checkpoint", f"--namespace={NAMESPACE}", check=False)
    assert missing.returncode != 0 and "NotFound" in missing.stderr
