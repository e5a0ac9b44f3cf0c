"""Resuming a study: one made under other rules (before the ``stranded`` constraint) is refused."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest

from gpufleet.errors import InputError
from gpufleet.tune.objectives import Constraints
from gpufleet.tune.study import StudySpec
from gpufleet.tune.tuning import tune
from tests.tune.cases import HOUR, a_alone, policy

BORROW = "teams[a].quota[train].borrowingLimit"


def _journal(tmp_path: Path, trials: int) -> StudySpec:
    return StudySpec(str(tmp_path / "study.journal"), trials=trials)


def test_a_study_from_before_the_stranded_constraint_is_refused(tmp_path: Path) -> None:
    """A study whose trials carry fewer constraint values than this gpufleet judges (one made before
    ``stranded``) is refused with exit 2's error, even with no fingerprint to tell it apart: resuming it
    would rank its trials as if they met the constraint they were never judged by."""
    spec = _journal(tmp_path, 3)
    old = optuna.create_study(
        storage=optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(spec.storage)),
        study_name=spec.name,
        directions=["maximize", "minimize"],
    )
    dist = optuna.distributions.CategoricalDistribution(["0", "unlimited"])
    old.add_trial(
        optuna.trial.create_trial(
            params={BORROW: "0"},
            distributions={BORROW: dist},
            values=[4.0, 3.0],
            user_attrs={"constraints": [0.0, 0.0, 0.0], "source": "input"},  # servingStarvation, preemptions, jain
        )
    )
    with pytest.raises(InputError, match="carries 3 constraint values where this gpufleet judges 4"):
        tune(policy(), a_alone(), spec)


def test_the_fingerprint_names_the_constraints_and_the_protected_jobs() -> None:
    """A study's fingerprint changes with the jobs no trial may strand and with the rules' format, so a
    study made under other rules never resumes silently."""
    from gpufleet.simulate.config import SimulationConfig
    from gpufleet.tune import tuning

    args = (policy(), a_alone(), Constraints(), SimulationConfig(), (0, 2 * HOUR))
    plain = tuning.fingerprint(*args)
    assert tuning.fingerprint(*args, protected=frozenset({"a/a-0"})) != plain
    assert tuning.fingerprint(*args) == plain  # deterministic
    was = tuning.STUDY_FORMAT
    try:
        tuning.STUDY_FORMAT = was - 1
        assert tuning.fingerprint(*args) != plain
    finally:
        tuning.STUDY_FORMAT = was
