"""Loading CRDs: a folder of YAML files or parsed documents; every mistake is an InputError."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gpufleet.errors import InputError
from gpufleet.validation import CrdIndex, load_crds

CRD = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Cluster
  names: {kind: Widget, plural: widgets}
  versions:
    - name: v1
      served: true
      storage: true
      schema: {openAPIV3Schema: {type: object}}
"""


def test_kueue_folder_serves_both_versions_of_every_kind(kueue_crds: CrdIndex) -> None:
    kinds = [
        "AdmissionCheck",
        "ClusterQueue",
        "Cohort",
        "LocalQueue",
        "MultiKueueCluster",
        "MultiKueueConfig",
        "ProvisioningRequestConfig",
        "ResourceFlavor",
        "Topology",
        "Workload",
        "WorkloadPriorityClass",
    ]
    assert kueue_crds.kinds() == sorted(f"kueue.x-k8s.io/{v} {k}" for k in kinds for v in ("v1beta1", "v1beta2"))
    cluster_queue = kueue_crds.resolve("kueue.x-k8s.io/v1beta2", "ClusterQueue").version
    local_queue = kueue_crds.resolve("kueue.x-k8s.io/v1beta2", "LocalQueue").version
    old = kueue_crds.resolve("kueue.x-k8s.io/v1beta1", "ClusterQueue").version
    assert cluster_queue is not None and not cluster_queue.namespaced and not cluster_queue.deprecated
    assert local_queue is not None and local_queue.namespaced
    assert old is not None and old.deprecated


def test_folder_skips_documents_that_are_not_crds(tmp_path: Path) -> None:
    (tmp_path / "widgets.yaml").write_text(CRD)
    (tmp_path / "kustomization.yaml").write_text("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n")
    (tmp_path / "README.md").write_text("not yaml: [")
    assert load_crds(tmp_path).kinds() == ["example.com/v1 Widget"]


def test_single_file_and_parsed_documents_give_the_same_index(tmp_path: Path) -> None:
    path = tmp_path / "widgets.yaml"
    path.write_text(CRD)
    assert load_crds(path).kinds() == load_crds([yaml.safe_load(CRD)]).kinds()


@pytest.mark.parametrize(
    ("files", "fragment", "line"),
    [
        pytest.param({"bad.yaml": "a: [1, 2\n"}, "not valid YAML", 2, id="bad-yaml"),
        pytest.param(
            {"a.yaml": CRD, "b.yaml": CRD},
            "Widget.example.com is already defined in",
            None,
            id="duplicate-kind",
        ),
        pytest.param(
            {"a.yaml": CRD.replace("      schema: {openAPIV3Schema: {type: object}}\n", "")},
            "a served version needs a name and schema.openAPIV3Schema",
            None,
            id="served-version-without-schema",
        ),
        pytest.param(
            {"a.yaml": CRD.replace("apiextensions.k8s.io/v1", "apiextensions.k8s.io/v1beta1")},
            "CRDs must be",
            None,
            id="old-crd-api",
        ),
        pytest.param(
            {"a.yaml": CRD.replace("  names: {kind: Widget, plural: widgets}\n", "")},
            "a CRD needs",
            None,
            id="no-names",
        ),
    ],
)
def test_mistakes_are_input_errors_naming_the_file(
    tmp_path: Path, files: dict[str, str], fragment: str, line: int | None
) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    with pytest.raises(InputError) as caught:
        load_crds(tmp_path)
    (problem,) = caught.value.problems
    assert fragment in problem.message
    assert problem.file.startswith(str(tmp_path))
    assert problem.line == line


def test_missing_folder_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such CRD file or folder"):
        load_crds(tmp_path / "nowhere")
