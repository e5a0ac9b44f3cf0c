"""One Kubernetes vocabulary for the twin and placement: Kubernetes' rules, one type each.

The twin reads a ResourceFlavor's tolerations from YAML; the simulator hands them to placement's
pods as they are (Kueue injects them), so the two must be the very same values.
"""

from __future__ import annotations

import pytest

from gpufleet import placement, vocabulary
from gpufleet.twin.apis import specs
from gpufleet.twin.apis.objects import parse_cluster
from gpufleet.vocabulary import Operator, Requirement, Taint, TaintEffect, Toleration, TolerationOperator

GPU_TAINT = Taint("nvidia.com/gpu", "present", TaintEffect.NO_SCHEDULE)


def test_twin_and_placement_share_one_type_per_term() -> None:
    for name in ("Taint", "Toleration", "Requirement"):
        assert getattr(specs, name) is getattr(vocabulary, name) is getattr(placement, name)
    assert placement.GPU == vocabulary.GPU == "nvidia.com/gpu"
    assert placement.mig_resource("1g.10gb") == "nvidia.com/mig-1g.10gb"


TOLERATES = {
    "equal, same key and value": (Toleration("nvidia.com/gpu", "present"), GPU_TAINT, True),
    "equal, other value": (Toleration("nvidia.com/gpu", "absent"), GPU_TAINT, False),
    "exists, same key": (Toleration("nvidia.com/gpu", operator=TolerationOperator.EXISTS), GPU_TAINT, True),
    "exists, empty key: everything": (Toleration(operator=TolerationOperator.EXISTS), GPU_TAINT, True),
    "equal, empty key: nothing": (Toleration(), GPU_TAINT, False),
    "other effect": (Toleration("nvidia.com/gpu", "present", effect=TaintEffect.NO_EXECUTE), GPU_TAINT, False),
    "same effect": (Toleration("nvidia.com/gpu", "present", effect=TaintEffect.NO_SCHEDULE), GPU_TAINT, True),
}


@pytest.mark.parametrize(("toleration", "taint", "expected"), TOLERATES.values(), ids=TOLERATES.keys())
def test_tolerations_follow_kubernetes(toleration: Toleration, taint: Taint, expected: bool) -> None:
    assert toleration.tolerates(taint) is expected


LABELS = {"gpu": "h100", "gpus": "8"}
MATCHES = {
    "In": (Requirement("gpu", Operator.IN, ("h100", "a100")), True),
    "NotIn": (Requirement("gpu", Operator.NOT_IN, ("h100",)), False),
    "NotIn, absent label": (Requirement("zone", Operator.NOT_IN, ("a",)), True),
    "Exists": (Requirement("gpu", Operator.EXISTS), True),
    "DoesNotExist": (Requirement("gpu", Operator.DOES_NOT_EXIST), False),
    "Gt": (Requirement("gpus", Operator.GT, ("4",)), True),
    "Gt, equal": (Requirement("gpus", Operator.GT, ("8",)), False),
    "Lt": (Requirement("gpus", Operator.LT, ("16",)), True),
    "Lt, not an integer": (Requirement("gpu", Operator.LT, ("16",)), False),
    "Gt, absent label": (Requirement("zone", Operator.GT, ("1",)), False),
}


@pytest.mark.parametrize(("requirement", "expected"), MATCHES.values(), ids=MATCHES.keys())
def test_requirements_follow_kubernetes(requirement: Requirement, expected: bool) -> None:
    assert requirement.matches(LABELS) is expected


def test_text_becomes_the_enum_and_an_unknown_word_is_refused() -> None:
    assert Toleration("k", operator="Exists").operator is TolerationOperator.EXISTS  # type: ignore[arg-type]
    assert Requirement("k", "NotIn").operator is Operator.NOT_IN  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        Requirement("k", "Within")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        Taint("k", "v", "NoSchedul")  # type: ignore[arg-type]


def test_the_twin_reads_yaml_into_the_shared_terms() -> None:
    text = (
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: h100}\nspec:\n"
        "  nodeTaints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]\n"
        "  tolerations: [{key: nvidia.com/gpu, operator: Exists}]\n"
    )
    flavor = parse_cluster([("f.yaml", text)]).flavors["h100"]
    assert flavor.node_taints == (GPU_TAINT,)
    assert flavor.tolerations == (Toleration("nvidia.com/gpu", operator=TolerationOperator.EXISTS),)
    assert flavor.tolerations[0].tolerates(GPU_TAINT)
