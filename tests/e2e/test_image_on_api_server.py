"""The webhook and the recorder from gpufleet's image, against the testbed's API server.

``image/build.sh`` builds the image from this checkout's wheel (the Debian layer cached across runs),
``umoci unpack`` unpacks it, and each process runs from the image's filesystem as a pod would:
the image's user (65532, not root), a read-only root filesystem, the rendered Deployment's own
arguments and volumes (``gpufleet.testbed.rootfs``: a mount namespace and chroot; CI has no
container runtime). The network is the host's, so the API server calls the webhook on 127.0.0.1 as
``test_webhook_on_api_server`` does with a local process. The webhook mutates a real Job that Kueue
then admits; the recorder writes a ledger of real Jobs. Needs root, mmdebstrap and umoci
(``.ci/setup.d/image.sh``); skips and says why without them.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from gpufleet import __version__
from gpufleet.cli import app
from gpufleet.ledger.records import EndReason
from gpufleet.ledger.store import Ledger
from gpufleet.recorder.manifests import KEY_DIR, SQLITE_PATH
from gpufleet.testbed import rootfs
from gpufleet.testbed.webhook import local_configurations
from tests.e2e.conftest import POLICY, REPO, Cluster, eventually
from tests.e2e.recorder_live import job as recorder_job
from tests.e2e.test_webhook_on_api_server import LABELS, PRIORITY, QUEUE, dry_run
from tests.e2e.test_webhook_on_api_server import job as webhook_job

pytestmark = pytest.mark.image
USER_ID = 65532  # the image's user, and the recorder Deployment's runAsUser and fsGroup


@dataclass
class Image:
    layout: Path
    config: dict[str, Any]
    bundle: rootfs.Bundle


def _skip_reason() -> str | None:
    missing = [tool for tool in ("mmdebstrap", "umoci") if shutil.which(tool) is None]
    if missing:
        return f"the image build needs {', '.join(missing)}: bash .ci/setup.d/image.sh installs them"
    return rootfs.available()


def _config(layout: Path) -> dict[str, Any]:
    """The image's config blob (labels, user, entrypoint), read through index.json and the manifest."""

    def blob(digest: str) -> Any:
        algorithm, _, hexa = digest.partition(":")
        return json.loads((layout / "blobs" / algorithm / hexa).read_text())

    (manifest_ref,) = json.loads((layout / "index.json").read_text())["manifests"]
    return blob(blob(manifest_ref["digest"])["config"]["digest"])  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> Image:
    reason = _skip_reason()
    if reason is not None:
        pytest.skip(reason)
    folder = tmp_path_factory.mktemp("image")
    subprocess.run([sys.executable, "-m", "build", "--wheel", "-q", "--outdir", folder, REPO], check=True)
    wheel = folder / f"gpufleet-{__version__}-py3-none-any.whl"
    archive = folder / "gpufleet.oci.tar"
    env = {**os.environ, "PY": sys.executable, "GPUFLEET_IMAGE_OUT": str(archive)}
    began = time.monotonic()
    built = subprocess.run(
        ["bash", "image/build.sh", str(wheel)], check=False, cwd=REPO, env=env, capture_output=True, text=True
    )
    (folder / "build.log").write_text(built.stdout + built.stderr)
    assert built.returncode == 0, built.stderr[-3000:]
    print(f"image built in {time.monotonic() - began:.0f}s: {built.stdout.strip().splitlines()[-2]}")
    layout = folder / "layout"
    with tarfile.open(archive) as tar:
        tar.extractall(layout, filter="tar")
    subprocess.run(["umoci", "unpack", "--image", f"{layout}:{__version__}", folder / "bundle"], check=True)
    return Image(layout, _config(layout), rootfs.Bundle.read(folder / "bundle"))


def _run(image: Image, args: list[str]) -> subprocess.CompletedProcess[str]:
    command = rootfs.contained(image.bundle, args)
    return subprocess.run(
        command, check=False, env=image.bundle.environment(), capture_output=True, text=True, timeout=120
    )


def test_the_image_runs_gpufleet_as_a_non_root_user_on_a_read_only_root(image: Image) -> None:
    config, bundle = image.config, image.bundle
    assert config["config"]["User"] == f"{USER_ID}:{USER_ID}" and (bundle.uid, bundle.gid) == (USER_ID, USER_ID)
    labels = config["config"]["Labels"]
    assert labels["org.opencontainers.image.version"] == __version__
    assert labels["org.opencontainers.image.source"].startswith("https://")
    version = _run(image, [*bundle.args, "--version"])
    assert (version.returncode, version.stdout.strip()) == (0, __version__), version.stderr
    probe = "import os, pathlib; print(os.getuid(), os.getgid()); pathlib.Path('/probe').write_text('x')"
    written = _run(image, ["/usr/bin/python3", "-c", probe])
    assert written.stdout.split() == [str(USER_ID), str(USER_ID)]
    assert "Read-only file system" in written.stderr and not (bundle.rootfs / "probe").exists()


def test_the_image_holds_no_package_manager_and_no_compiler(image: Image) -> None:
    root = image.bundle.rootfs
    tools = ("dpkg", "apt", "apt-get", "pip", "pip3", "perl", "gcc", "cc", "c++", "make", "ld", "as")
    found = [f"{d}/{t}" for d in ("usr/bin", "usr/sbin", "usr/local/bin") for t in tools if (root / d / t).exists()]
    assert found == []
    site = root / "usr/local/lib/python3.11/dist-packages"
    assert (site / "gpufleet").is_dir() and not (site / "pip").exists()
    assert not (root / "usr/lib/python3.11/ensurepip").exists()
    # byte-compiled in the build: a read-only root never compiles at start
    assert list((site / "gpufleet" / "cli" / "__pycache__").glob("__init__.cpython-311.pyc"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _rendered(applied: Path, file: str) -> dict[str, Any]:
    """The container of gpufleet's own Deployment in a rendered file."""
    for doc in yaml.safe_load_all((applied / file).read_text(encoding="utf-8")):
        if doc and doc["kind"] == "Deployment":
            (container,) = doc["spec"]["template"]["spec"]["containers"]
            return container  # type: ignore[no-any-return]
    raise AssertionError(f"no Deployment in {file}")


def _owned_by_the_image_user(folder: Path) -> None:
    """What the pod's fsGroup and the Secret volumes' modes give the user: its files, readable."""
    for path in [folder, *folder.rglob("*")]:
        os.chown(path, USER_ID, USER_ID)


@dataclass
class Served:
    process: subprocess.Popen[bytes]
    log: Path
    ready_s: float

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()


def _start(image: Image, args: list[str], volumes: list[rootfs.Volume], log: Path, port: int) -> Served:
    command = rootfs.contained(image.bundle, args, volumes)
    began = time.monotonic()
    with log.open("ab") as out:
        process = subprocess.Popen(
            command, env=image.bundle.environment(), stdout=out, stderr=subprocess.STDOUT, process_group=0
        )
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return Served(process, log, time.monotonic() - began)
        except OSError:
            if process.poll() is not None or time.monotonic() - began > 120:
                Served(process, log, 0).stop()
                pytest.fail(f"{args[1]} from the image did not start; see {log}:\n{log.read_text()[-2000:]}")
            time.sleep(0.05)


@pytest.fixture(scope="module")
def webhook(
    image: Image, cluster: Cluster, applied: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("image-webhook")
    certs = folder / "certs"
    rendered_file = applied / "admission-webhook.yaml"
    made = CliRunner().invoke(
        app, ["webhook", "certs", "-o", str(certs), "--ip", "127.0.0.1", "--configuration", str(rendered_file)]
    )
    assert made.exit_code == 0, made.output
    # /etc/gpufleet as the pod sees it: the policy ConfigMap, the TLS Secret beneath it
    etc = folder / "etc"
    (etc / "tls").mkdir(parents=True)
    shutil.copy(POLICY, etc / "fleet.yaml")
    for name in ("tls.crt", "tls.key"):
        shutil.copy(certs / name, etc / "tls" / name)
    _owned_by_the_image_user(etc)
    container = _rendered(applied, "admission-webhook.yaml")
    port = _free_port()
    args = [*image.bundle.args, *container["args"], "--host", "127.0.0.1"]
    args[args.index("--port") + 1] = str(port)  # the rendered 8443, on a free port of this machine
    served = _start(image, args, [rootfs.Volume(etc, "/etc/gpufleet")], folder / "webhook.log", port)
    print(f"webhook from the image: ready (accepting TLS connections) {served.ready_s:.2f}s after start")
    configured = list(yaml.safe_load_all((certs / "admission-webhook.yaml").read_text(encoding="utf-8")))
    configurations = local_configurations(configured, host="127.0.0.1", port=port)
    try:
        cluster.apply(configurations)
        eventually(
            lambda: QUEUE in json.loads(dry_run(cluster, webhook_job("probe", LABELS)).stdout or "{}")
            .get("metadata", {}).get("labels", {}),
            "the API server to call the webhook from the image",
        )  # fmt: skip
        yield served
    finally:
        for config in configurations:
            cluster.kubectl("delete", config["kind"], config["metadata"]["name"], "--ignore-not-found", check=False)
        served.stop()


def test_the_webhook_from_the_image_mutates_a_real_job_that_kueue_admits(cluster: Cluster, webhook: Served) -> None:
    name = "image-filled"
    created = cluster.kubectl(
        "create", "--output=json", "--filename=-", stdin=yaml.safe_dump(webhook_job(name, LABELS))
    )
    try:
        labels = json.loads(created.stdout)["metadata"]["labels"]
        assert (labels[QUEUE], labels[PRIORITY]) == ("alpha", "normal")
        reviews = [json.loads(line) for line in webhook.log.read_text().splitlines() if line.startswith("{")]
        assert any(
            r.get("msg") == "review" and r.get("name") == name and r.get("outcome") == "patched" for r in reviews
        )

        def admitted() -> bool:
            for wl in cluster.get("workloads", "--namespace=alpha")["items"]:
                owners = [o.get("name") for o in wl["metadata"].get("ownerReferences", [])]
                conditions = wl.get("status", {}).get("conditions", [])
                if name in owners and any(c["type"] == "Admitted" and c["status"] == "True" for c in conditions):
                    return True
            return False

        eventually(admitted, f"Kueue to admit {name}, mutated by the webhook from the image")
    finally:
        cluster.kubectl(
            "delete", "job", name, "--namespace=alpha", "--cascade=foreground", "--wait=true", "--timeout=60s",
            check=False,
        )  # fmt: skip


def _kubeconfig_for_the_image(path: str, folder: Path, mounted: str) -> None:
    """The testbed's kubeconfig and the files it names, copied into ``folder`` (mounted at ``mounted``):
    the image's user cannot read root's files. Paths, not inlined data, which the client would write
    to a temporary file that a read-only root does not have."""
    config = yaml.safe_load(Path(path).read_text())
    for entry, keys in (("clusters", ("certificate-authority",)), ("users", ("client-certificate", "client-key"))):
        for item in config[entry]:
            inner = item["cluster" if entry == "clusters" else "user"]
            for key in keys:
                if key in inner:
                    shutil.copy(inner[key], folder / key)
                    inner[key] = f"{mounted}/{key}"
    (folder / "config").write_text(yaml.safe_dump(config))


def test_the_recorder_from_the_image_writes_a_ledger_of_real_jobs(
    image: Image, cluster: Cluster, applied: Path, tmp_path: Path
) -> None:
    kube, key, data = tmp_path / "kube", tmp_path / "key", tmp_path / "ledger"
    for folder in (kube, key, data):
        folder.mkdir()
    _kubeconfig_for_the_image(cluster.kubeconfig, kube, "/etc/gpufleet/kube")
    made = CliRunner().invoke(app, ["audit", "keygen", "-o", str(key / "key"), "--name", "image-e2e"])
    assert made.exit_code == 0, made.output
    for folder in (kube, key, data):
        _owned_by_the_image_user(folder)
    container = _rendered(applied, "recorder.yaml")
    args = [*image.bundle.args, *container["args"]]
    args[args.index("--in-cluster")] = "--kubeconfig=/etc/gpufleet/kube/config"  # a process outside the cluster
    port = _free_port()
    args[args.index("--metrics-host") + 1], args[args.index("--metrics-port") + 1] = "127.0.0.1", str(port)
    args += ["--lease-name", "image-recorder", "--identity", "image-0"]
    volumes = [
        rootfs.Volume(kube, "/etc/gpufleet/kube"),
        rootfs.Volume(key, KEY_DIR),
        rootfs.Volume(data, str(Path(SQLITE_PATH).parent), writable=True),
    ]
    ledger = data / Path(SQLITE_PATH).name
    served = _start(image, args, volumes, tmp_path / "recorder.log", port)
    names = ["image-rec-a", "image-rec-b"]
    try:
        cluster.apply([recorder_job(n, "alpha", "image", gpus=1, run_for="2s") for n in names])

        def recorded() -> list[Any]:
            if not ledger.exists():
                return []
            with Ledger.read(str(ledger)) as opened:
                done = [a for a in opened.allocations() if a.end_reason == EndReason.FINISHED]
            return sorted(a.name.rsplit("-", 1)[0] for a in done if any(n in a.name for n in names))

        got = eventually(lambda: len(recorded()) == 2 and recorded(), "the recorder from the image to record both")
        assert got == [f"job-{n}" for n in names]
        assert served.process.poll() is None, "the recorder still runs"
        assert ledger.stat().st_uid == USER_ID  # written by the image's user, not root
    finally:
        served.stop()
        for n in names:
            cluster.kubectl("delete", "job", n, "--namespace=alpha", "--wait=true", "--timeout=60s", check=False)
