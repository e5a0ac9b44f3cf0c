"""``trace convert --from-ledger``: a ledger's workloads back into a trace, on SQLite and PostgreSQL.

The ledger is written by simulating jobs worked out by hand on a tiny fleet (the recorder writes the
same records from a real cluster); converting it must give back what each job asked for, when it
was submitted and how long it ran.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpufleet.cli import app
from gpufleet.ledger.records import Allocation, EndReason, Placement
from gpufleet.ledger.store import Ledger
from gpufleet.simulate.config import Mode, SimulationConfig
from gpufleet.simulate.run import simulate
from gpufleet.trace import Job, JobKind, read_trace
from gpufleet.trace.from_ledger import catalogue_name, to_jobs
from tests.ledger.conftest import postgres_url
from tests.ledger.ledger_pgserver import create_database
from tests.tune.cases import LIMITED, job, policy

__all__ = ["postgres_url"]  # the ledger tests' real PostgreSQL server, reused

runner = CliRunner()
HOUR = 3600


def _jobs() -> list:
    gang = Job("gang", "b", "b", 600, 2 * HOUR, JobKind.TRAINING, pods=2, gpus=2, priority_class="batch")
    return [job("one", "a", 0, HOUR), job("two", "a", 0, HOUR), job("three", "a", 60, HOUR), gang]


@pytest.fixture(params=["sqlite", "postgresql"])
def ledger_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "ledger.sqlite")
    return create_database(request.getfixturevalue("postgres_url"), "trace_from_ledger")


def test_a_ledger_converts_back_to_the_jobs_that_ran(tmp_path: Path, ledger_url: str) -> None:
    from gpufleet.policy import resolve

    run = simulate(resolve(policy()), _jobs(), SimulationConfig(mode=Mode.QUEUE))
    with Ledger.open(ledger_url) as ledger:
        ledger.append(run.records)
    (tmp_path / "policy.yaml").write_text(LIMITED)
    out = tmp_path / "trace.csv"
    args = ["trace", "convert", "--from-ledger", ledger_url, "--policy", str(tmp_path / "policy.yaml")]
    result = runner.invoke(app, [*args, "-o", str(out), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["jobs"] == 4 and doc["workloads"] == 4 and doc["simulated"] == 4
    back = {j.job_id: j for j in read_trace(out)}
    assert set(back) == {"one", "two", "three", "gang"}
    for original in _jobs():
        j = back[original.job_id]
        assert (j.team, j.namespace, j.submit_s, j.duration_s) == (
            original.team,
            original.namespace,
            original.submit_s,
            original.duration_s,
        )
        assert j.pods * j.gpus == original.pods * original.gpus
        assert j.priority_class == "batch"  # the policy's class of value 100
        assert j.gpu_models in ((), ("H100-SXM5-80GB",))
    # the ledger knows no kind: four cards (two pods on the one node) read as training, one card as batch-eval
    assert back["gang"].kind is JobKind.TRAINING
    assert {back[n].kind for n in ("one", "two", "three")} == {JobKind.BATCH_EVAL}


def test_a_missing_ledger_file_is_refused_not_created(tmp_path: Path) -> None:
    missing = tmp_path / "nope.sqlite"
    result = runner.invoke(app, ["trace", "convert", "--from-ledger", str(missing), "-o", str(tmp_path / "t.csv")])
    assert result.exit_code == 2 and "no such ledger file" in result.output
    assert not missing.exists() and not (tmp_path / "t.csv").exists()
    both = runner.invoke(app, ["trace", "convert", "x.csv", "--from-ledger", str(missing), "-o", "t.csv"])
    assert both.exit_code == 2


# Records shaped exactly as ``gpufleet record`` writes them from a real cluster (not written by the
# recorder here: no testbed run in this unit test): the placement's gpu_model is the node's
# ``nvidia.com/gpu.product`` label, taken from the testbed's own nodes for the e2e fleet.
E2E_FLEET = Path(__file__).resolve().parents[1] / "e2e" / "fleet.yaml"


def _recorded(uid: str, node: str, product: str, resource: str = "nvidia.com/gpu") -> Allocation:
    at = datetime(2026, 1, 5, tzinfo=UTC)
    return Allocation(
        workload_uid=uid, attempt=1, namespace="alpha", name=f"job-{uid}", team="alpha", model=None,
        data_class=None, checkpoint=None, local_queue="alpha", cluster_queue="alpha", priority=100,
        flavors=((resource, "train"),), gpu_resource=resource, gpu_count=1,
        placements=(Placement(node, 1, (), product),), created=at, quota_reserved=at, admitted=at,
        started=at, finished=at + timedelta(seconds=60), end_reason=EndReason.FINISHED, end_detail="Succeeded",
        end_message="", borrowing=False, simulated=False,
    )  # fmt: skip


def test_recorded_gfd_products_become_the_catalogue_names_the_simulator_pins_on() -> None:
    from gpufleet.policy import load_policy, resolve
    from gpufleet.testbed.nodes import fake_nodes

    fleet = resolve(load_policy(E2E_FLEET))
    records = [
        _recorded(str(i), n["metadata"]["name"], n["metadata"]["labels"]["nvidia.com/gpu.product"])
        for i, n in enumerate(fake_nodes(fleet))
    ]
    converted = to_jobs(records, fleet.policy)
    by_node = {r.placements[0].node: j.gpu_models for r, j in zip(records, converted.jobs, strict=True)}
    labels = {n["metadata"]["name"]: n["metadata"]["labels"]["gpufleet.io/gpu"] for n in fake_nodes(fleet)}
    assert by_node == {node: (model,) for node, model in labels.items()}
    assert set(labels.values()) == {"H100-SXM5-80GB", "A100-SXM4-80GB", "L4"}


@pytest.mark.parametrize(
    ("recorded", "name"),
    [
        ("NVIDIA-H100-80GB-HBM3", "H100-SXM5-80GB"),  # GFD's product
        ("NVIDIA-L4-SHARED", "L4"),  # a time-sliced node whose resource is not renamed
        ("NVIDIA-A100-SXM4-80GB-MIG-1g.10gb", "A100-SXM4-80GB"),  # the single MIG strategy
        ("nvidia-a100-80gb-pcie", "A100-PCIE-80GB"),  # letter case does not matter
        ("H100-SXM5-80GB", "H100-SXM5-80GB"),  # a ledger the simulator wrote
        ("H100-80GB", "H100-SXM5-80GB"),  # an alias
    ],
)
def test_a_recorded_model_maps_to_its_catalogue_name(recorded: str, name: str) -> None:
    assert catalogue_name(recorded) == name


def test_an_unknown_product_stops_the_conversion_naming_workload_node_and_value(tmp_path: Path) -> None:
    url = str(tmp_path / "ledger.sqlite")
    with Ledger.open(url) as ledger:
        ledger.append([_recorded("w-1", "node-7", "NVIDIA-Imaginary-9000")])
    out = tmp_path / "trace.csv"
    result = runner.invoke(app, ["trace", "convert", "--from-ledger", url, "-o", str(out)])
    assert result.exit_code == 2, result.output
    assert "NVIDIA-Imaginary-9000" in result.output and "node-7" in result.output and "w-1" in result.output
    assert url in result.output
    assert not out.exists()


def test_a_product_two_models_share_is_settled_by_the_policy_or_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """No two catalogue models share a GFD product today, so the catalogue is extended here (a test
    double of the table: the real one cannot show the case) with a twin of the L4."""
    from dataclasses import replace as copy_with

    from gpufleet import gpus
    from gpufleet.policy import load_policy

    real = gpus.models()
    l4 = next(m for m in real if m.name == "L4")
    monkeypatch.setattr(gpus, "models", lambda: (*real, copy_with(l4, name="L4-TWIN", aliases=())))
    with pytest.raises(ValueError, match="ambiguous: it is the product of L4, L4-TWIN"):
        catalogue_name("NVIDIA-L4")
    tiny = load_policy(Path(__file__).resolve().parents[2] / "examples" / "tiny.yaml")  # an L4 pool
    assert catalogue_name("NVIDIA-L4", tiny) == "L4"
