"""A fleet that hands its cards out through DRA simulates as Kueue counts claims: onto the same budget.

Kueue maps each claim's DeviceClass to the quota resource the ClusterQueues already count
(``deviceClassMappings``), so a Job whose pods claim one H100 each waits, borrows and is admitted
exactly as one asking ``nvidia.com/gpu: 1`` (the twin's claim counting: tests/twin/test_dra_claims.py).
The simulator reads the rendered Configuration with its mappings and must give the same run on the
e2e fleet with ``dra: on`` as with ``dra: off``.
"""

from __future__ import annotations

from gpufleet.policy import parse_policy, resolve
from gpufleet.render import kueue_objects
from gpufleet.simulate.config import Mode, SimulationConfig
from gpufleet.simulate.run import simulate
from gpufleet.trace.job import Job, JobKind
from tests.check.claim_cases import E2E_POLICY, dra_policy_text


def job(job_id: str, team: str, submit: int, duration: int, *, gpus: int, pods: int = 1, mig: str = "") -> Job:
    kind = JobKind.TRAINING
    return Job(
        job_id, team, team, submit, duration, kind, pods=pods, gpus=gpus, mig_profile=mig, priority_class="normal"
    )


JOBS = [
    job("a1", "alpha", 0, 3600, gpus=2, pods=2),
    job("a2", "alpha", 30, 1800, gpus=4),
    job("b1", "beta", 60, 7200, gpus=4, pods=2),
    job("m1", "alpha", 90, 600, gpus=1, mig="1g.10gb", pods=2),
    job("m2", "alpha", 120, 600, gpus=1, mig="1g.10gb", pods=2),
]


def test_the_rendered_configuration_maps_the_claims_the_simulator_reads() -> None:
    dra = resolve(parse_policy(dra_policy_text(), "fleet-dra.yaml"))
    (config,) = [o for o in kueue_objects(dra) if o.get("kind") == "Configuration"]
    names = {m["name"]: m["deviceClassNames"] for m in config["resources"]["deviceClassMappings"]}
    assert names["nvidia.com/gpu"] == ["gpufleet-h100-sxm5-80gb-gpu"]


def test_a_dra_fleet_simulates_as_the_device_plugin_fleet() -> None:
    plugin = resolve(parse_policy(E2E_POLICY.read_text(encoding="utf-8"), "fleet.yaml"))
    dra = resolve(parse_policy(dra_policy_text(), "fleet-dra.yaml"))
    config = SimulationConfig(mode=Mode.QUEUE, until_s=20_000)
    with_plugin = simulate(plugin, JOBS, config)
    with_claims = simulate(dra, JOBS, config)
    waits = [(r["job_id"], r["wait_s"]) for r in with_claims.rows]
    print(waits)
    assert any(w > 0 for _, w in waits)  # the trace does queue: the comparison is not vacuous
    assert with_claims.rows == with_plugin.rows
