"""Which image the webhook and recorder Deployments run: ``render --image``, the policy's
``cluster.image``, else the project's published name; a reference no registry takes is a located
error and nothing is written."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from gpufleet import __version__
from gpufleet.cli import app
from gpufleet.policy.images import image_problem
from tests.support import EXAMPLES

runner = CliRunner()
FLEET = EXAMPLES / "fleet.yaml"


def _images(out: Path) -> dict[str, set[str]]:
    """The images of gpufleet's own Deployments (the webhook's and the recorder's), by file."""
    found: dict[str, set[str]] = {}
    for name in ("admission-webhook.yaml", "recorder.yaml"):
        for doc in yaml.safe_load_all((out / name).read_text()):
            if doc and doc.get("kind") == "Deployment" and doc["metadata"].get("namespace") == "gpufleet-system":
                containers = doc["spec"]["template"]["spec"]["containers"]
                found.setdefault(name, set()).update(c["image"] for c in containers)
    return found


def _with_image(tmp_path: Path, image: str) -> Path:
    text = FLEET.read_text()
    assert "\ncluster:\n" in text
    policy = tmp_path / "fleet.yaml"
    policy.write_text(text.replace("\ncluster:\n", f"\ncluster:\n  image: {image}\n", 1))
    return policy


@pytest.mark.parametrize(
    ("policy_image", "flag", "expected"),
    [
        (None, None, f"ghcr.io/gpufleet/gpufleet:{__version__}"),
        ("registry.example.com/platform/gpufleet:0.1.0", None, "registry.example.com/platform/gpufleet:0.1.0"),
        (None, "localhost:5000/gpufleet:dev", "localhost:5000/gpufleet:dev"),
        ("registry.example.com/platform/gpufleet:0.1.0", "localhost:5000/gpufleet:dev", "localhost:5000/gpufleet:dev"),
    ],
    ids=["default", "policy", "flag", "flag-over-policy"],
)
def test_both_deployments_run_the_chosen_image(
    tmp_path: Path, policy_image: str | None, flag: str | None, expected: str
) -> None:
    policy = FLEET if policy_image is None else _with_image(tmp_path, policy_image)
    args = ["render", str(policy), "-o", str(tmp_path / "m")] + (["--image", flag] if flag else [])
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert _images(tmp_path / "m") == {"admission-webhook.yaml": {expected}, "recorder.yaml": {expected}}


def test_a_bad_image_flag_is_a_located_error_and_nothing_is_written(tmp_path: Path) -> None:
    result = runner.invoke(app, ["render", str(FLEET), "-o", str(tmp_path / "m"), "--image", "gpufleet image"])
    assert result.exit_code == 2
    assert "--image" in result.output and "no spaces" in result.output
    assert not (tmp_path / "m").exists()


def test_a_bad_image_in_the_policy_names_the_file_line_and_field(tmp_path: Path) -> None:
    policy = _with_image(tmp_path, "ghcr.io/MyOrg/gpufleet:1")
    result = runner.invoke(app, ["render", str(policy), "-o", str(tmp_path / "m")])
    assert result.exit_code == 2
    flat = " ".join(result.output.split())
    assert f"{policy}:" in flat and "cluster.image" in flat and "upper-case" in flat
    assert not (tmp_path / "m").exists()


@pytest.mark.parametrize(
    ("reference", "problem"),
    [
        ("ghcr.io/gpufleet/gpufleet:0.1.0", None),
        ("gpufleet", None),
        ("localhost:5000/gpufleet:dev", None),
        ("Registry.Example.com/a/b-c__d.e:1.0", None),
        ("registry.example.com:5000/gpufleet@sha256:" + "ab" * 32, None),
        ("registry.example.com/gpufleet:0.1.0@sha256:" + "ab" * 32, None),
        ("[::1]:5000/gpufleet:dev", None),
        ("", "no spaces"),
        ("gpufleet image", "no spaces"),
        (" gpufleet", "no spaces"),
        ("gpufleet:", "tag ''"),
        ("gpufleet:-dev", "tag '-dev'"),
        ("gpufleet:" + "a" * 129, "tag"),
        ("ghcr.io/MyOrg/gpufleet", "upper-case"),
        ("a//b", "is not [host[:port]/]path"),
        ("-a/b", "is not [host[:port]/]path"),
        ("a/b_", "is not [host[:port]/]path"),
        ("gpufleet@sha256:xyz", "digest"),
        ("gpufleet@sha256:abc", "digest"),
        ("r.io/" + "a" * 260, "at most 255"),
    ],
)
def test_image_references(reference: str, problem: str | None) -> None:
    found = image_problem(reference)
    if problem is None:
        assert found is None
    else:
        assert found is not None and problem in found
