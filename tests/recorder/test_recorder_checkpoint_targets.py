"""``record --checkpoint-to``: every target form is checked before the recorder starts."""

from __future__ import annotations

import pytest

from gpufleet.errors import InputError
from gpufleet.recorder.publish import parse_targets


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([], ("log",)),
        (["log"], ("log",)),
        (["file:/var/cp"], ("file:/var/cp",)),
        (
            ["configmap:gpufleet-system/gpufleet-ledger-checkpoint"],
            ("configmap:gpufleet-system/gpufleet-ledger-checkpoint",),
        ),
        (["configmap:ns/a.b-c", "log"], ("configmap:ns/a.b-c", "log")),
    ],
)
def test_good_targets_are_kept_in_order(values: list[str], expected: tuple[str, ...]) -> None:
    assert parse_targets(values) == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("configmap:", "configmap:NAMESPACE/NAME"),
        ("configmap:only-a-name", "configmap:NAMESPACE/NAME"),
        ("configmap:ns/", "configmap:NAMESPACE/NAME"),
        ("configmap:/name", "configmap:NAMESPACE/NAME"),
        ("configmap:Upper/name", "Kubernetes names"),
        ("configmap:ns/under_score", "Kubernetes names"),
        ("configmap:a.b/name", "Kubernetes names"),  # a namespace is a label: no dots
        ("configmap:ns/name/extra", "Kubernetes names"),
        (f"configmap:{'n' * 64}/name", "Kubernetes names"),
        ("file:", "file:PATH"),
        ("s3://bucket/cp", "file:PATH, configmap:NAMESPACE/NAME or log"),
    ],
)
def test_a_bad_target_is_a_clear_error_naming_the_option(value: str, message: str) -> None:
    with pytest.raises(InputError) as caught:
        parse_targets([value])
    text = str(caught.value)
    assert message in text and repr(value) in text and "--checkpoint-to" in text
