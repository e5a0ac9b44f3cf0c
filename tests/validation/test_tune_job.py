"""The rendered tune workers' ConfigMap and Job against Kubernetes' strict schemas (kubernetes-validate)."""

from __future__ import annotations

import pytest

from gpufleet.render.tune_job import TuneJob, tune_job
from gpufleet.validation import validate

POLICY = "apiVersion: gpufleet.io/v1alpha1\nkind: FleetPolicy\n"


def spec(claim: str | None) -> TuneJob:
    return TuneJob(
        name="gpufleet-tune",
        namespace="research",
        image="registry.example.com/gpufleet:0.1.0",
        workers=4,
        trials=40,
        study="week-49",
        secret="tune-storage",
        trace_name="trace.parquet" if claim else "trace.csv",
        trace_claim=claim,
    )


@pytest.mark.parametrize("kubernetes", ["1.33", "1.34"])
@pytest.mark.parametrize("claim", [None, "traces"], ids=["trace-in-configmap", "trace-on-claim"])
def test_the_rendered_job_is_valid(kubernetes: str, claim: str | None) -> None:
    objects = tune_job(spec(claim), POLICY, None if claim else b"id,team\nj,a\n")
    assert validate(objects, kubernetes=kubernetes, crds=None) == []


def test_the_schema_check_is_strict_for_these_objects() -> None:
    """A misspelt field in the Job is a finding: the test above could fail."""
    objects = tune_job(spec(None), POLICY, b"id\n")
    objects[1]["spec"]["backoffLimitPerIdx"] = objects[1]["spec"].pop("backoffLimitPerIndex")
    assert validate(objects, kubernetes="1.34", crds=None) != []
