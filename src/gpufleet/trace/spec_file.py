"""The synthetic generator's spec as a small YAML file (until the policy file drives it).

```yaml
days: 7
load: 0.8            # offered GPU-hours over the fleet's GPU-hours
floodShare: 0.4      # share of jobs from the team marked flood
teams:
  - {name: research, namespace: research, weight: 2, priorityClasses: [train-high, batch],
     dataClasses: [internal], models: [meta-llama/Llama-3.1-8B], checkpoints: ["s3://eu-central-1/research/"]}
  - {name: interns, weight: 1, flood: true}
pools:
  - {name: h100-train, gpu: H100-SXM5-80GB, gpus: 16}
  - {name: a100-mig, gpu: A100-SXM4-80GB, gpus: 8, slicing: mig, migProfiles: [3g.40gb, 1g.10gb]}
  - {name: l40s-dev, gpu: L40S, gpus: 8, slicing: timeslice, replicas: 4}
```
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from gpufleet.errors import InputError, Problem
from gpufleet.trace.synth import PoolSpec, Slicing, SynthSpec, TeamSpec
from gpufleet.yamldoc import read_document, validation_problems


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)


class _Team(_Model):
    name: str = Field(min_length=1)
    namespace: str = ""
    weight: float = Field(1.0, gt=0)
    priority_classes: list[str] = Field(default_factory=list, alias="priorityClasses")
    data_classes: list[str] = Field(default_factory=list, alias="dataClasses")
    models: list[str] = Field(default_factory=list)
    checkpoints: list[str] = Field(default_factory=list)
    flood: bool = False


class _Pool(_Model):
    name: str = Field(min_length=1)
    gpu: str = Field(min_length=1)
    gpus: int = Field(gt=0)
    slicing: Slicing = Slicing.FULL
    mig_profiles: list[str] = Field(default_factory=list, alias="migProfiles")
    replicas: int = Field(1, ge=1)

    @model_validator(mode="after")
    def _mig_needs_profiles(self) -> _Pool:
        if self.slicing is Slicing.MIG and not self.mig_profiles:
            raise ValueError("a mig pool needs migProfiles")
        return self


class _Spec(_Model):
    days: int = Field(7, ge=1)
    load: float = Field(0.8, gt=0)
    flood_share: float = Field(0.4, ge=0, lt=1, alias="floodShare")
    teams: list[_Team] = Field(min_length=1)
    pools: list[_Pool] = Field(min_length=1)


def load_spec(path: Path) -> SynthSpec:
    """Read and check a spec file; every mistake is reported with its field path."""
    try:
        doc = read_document(path.read_text(encoding="utf-8"), str(path))
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError.one(f"cannot read spec: {exc}", file=str(path)) from None
    if not isinstance(doc.data, dict):
        raise InputError(
            [Problem("expected a mapping at the top level (days, load, teams, pools)", str(path), "", 1, 1)]
        )
    try:
        spec = _Spec.model_validate(doc.data)
    except ValidationError as exc:
        raise InputError(list(validation_problems(doc, exc))) from None
    if sum(t.flood for t in spec.teams) > 1:
        raise InputError([doc.problem(("teams",), "at most one team may flood the queue")])
    return SynthSpec(
        teams=tuple(
            TeamSpec(
                t.name,
                t.namespace or t.name,
                t.weight,
                tuple(t.priority_classes),
                tuple(t.data_classes),
                tuple(t.models),
                tuple(t.checkpoints),
                t.flood,
            )
            for t in spec.teams
        ),
        pools=tuple(PoolSpec(p.name, p.gpu, p.gpus, p.slicing, tuple(p.mig_profiles), p.replicas) for p in spec.pools),
        days=spec.days,
        load=spec.load,
        flood_share=spec.flood_share,
    )
