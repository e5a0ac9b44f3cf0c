"""``gpufleet webhook certs``: a CA and serving pair a real TLS client trusts, written safely, renewed in place."""

from __future__ import annotations

import base64
import socket
import ssl
import stat
from pathlib import Path
from typing import Any

import httpx2
import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from typer.testing import CliRunner

from gpufleet.check.facts import AdmissionFacts
from gpufleet.check.manifests import NAMESPACE, WEBHOOK, webhook_objects
from gpufleet.cli import app
from gpufleet.outputs import KEPT_SUFFIX
from gpufleet.policy import Fleet
from gpufleet.webhook.app import create_app
from gpufleet.webhook.server import WebhookServer
from gpufleet.webhook.tls import Listen
from tests.webhook.tls_server import serve_in_thread

runner = CliRunner()


def certs(*args: str) -> Any:
    return runner.invoke(app, ["webhook", "certs", *args])


def load(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def names(cert: x509.Certificate) -> list[str]:
    alt = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return [*alt.get_values_for_type(x509.DNSName), *(str(i) for i in alt.get_values_for_type(x509.IPAddress))]


def test_the_serving_certificate_is_signed_by_the_ca_for_the_service_names(tmp_path: Path) -> None:
    out = tmp_path / "certs"
    result = certs("-o", str(out), "--dns", "webhook.example", "--ip", "127.0.0.1")
    assert result.exit_code == 0, result.output
    ca, leaf = load(out / "ca.crt"), load(out / "tls.crt")
    leaf.verify_directly_issued_by(ca)
    assert names(leaf) == [
        f"{WEBHOOK}.{NAMESPACE}.svc",
        f"{WEBHOOK}.{NAMESPACE}.svc.cluster.local",
        "webhook.example",
        "127.0.0.1",
    ]
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    assert leaf.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False
    key = serialization.load_pem_private_key((out / "tls.key").read_bytes(), password=None)
    assert key.public_key() == leaf.public_key()


def test_keys_are_private_and_the_folder_is_closed(tmp_path: Path) -> None:
    out = tmp_path / "certs"
    assert certs("-o", str(out)).exit_code == 0
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in out.iterdir()}
    assert modes["ca.key"] == modes["tls.key"] == modes["secret.yaml"] == 0o600
    assert modes["ca.crt"] == modes["tls.crt"] == 0o644
    assert stat.S_IMODE(out.stat().st_mode) == 0o700
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging folder left behind


def test_the_secret_has_the_shape_cert_manager_writes(tmp_path: Path) -> None:
    out = tmp_path / "certs"
    assert certs("-o", str(out)).exit_code == 0
    secret = yaml.safe_load((out / "secret.yaml").read_text())
    assert (secret["kind"], secret["type"]) == ("Secret", "kubernetes.io/tls")
    assert secret["metadata"]["name"] == f"{WEBHOOK}-tls"
    assert secret["metadata"]["namespace"] == NAMESPACE
    for key in ("ca.crt", "tls.crt", "tls.key"):
        assert base64.b64decode(secret["data"][key]) == (out / key).read_bytes()


@pytest.mark.parametrize(
    ("before", "args", "why"),
    [
        ("ours", [], "--renew issues a new serving certificate"),
        ("foreign", [], "--force"),
        ("file", ["--force"], "not a folder"),
        ("empty", ["--renew"], "--renew needs the output of an earlier"),
    ],
    ids=["own-output-without-renew", "foreign-folder", "a-file-even-forced", "renew-without-ca"],
)
def test_refused_without_renew_or_force(tmp_path: Path, before: str, args: list[str], why: str) -> None:
    out = tmp_path / "certs"
    if before == "ours":
        assert certs("-o", str(out)).exit_code == 0
    elif before == "foreign":
        out.mkdir()
        (out / "notes.txt").write_text("mine")
    elif before == "file":
        out.write_text("mine")
    else:
        out.mkdir()
    snapshot = {p.name: p.read_bytes() for p in out.iterdir()} if out.is_dir() else out.read_bytes()
    result = certs("-o", str(out), *args)
    assert result.exit_code == 2
    assert why in " ".join(result.output.split())
    assert "Traceback" not in result.output
    assert snapshot == ({p.name: p.read_bytes() for p in out.iterdir()} if out.is_dir() else out.read_bytes())


def test_force_keeps_a_foreign_folder_beside_the_new_one(tmp_path: Path) -> None:
    out = tmp_path / "certs"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    assert certs("-o", str(out), "--force").exit_code == 0
    assert (tmp_path / f"certs{KEPT_SUFFIX}" / "notes.txt").read_text() == "mine"
    assert (out / "ca.crt").is_file()


def test_renew_keeps_the_ca_and_the_names(tmp_path: Path) -> None:
    out = tmp_path / "certs"
    assert certs("-o", str(out), "--ip", "127.0.0.1").exit_code == 0
    ca_before, ca_key_before, leaf_before = (
        (out / "ca.crt").read_bytes(),
        (out / "ca.key").read_bytes(),
        load(out / "tls.crt"),
    )
    result = certs("-o", str(out), "--renew")
    assert result.exit_code == 0, result.output
    leaf = load(out / "tls.crt")
    assert (out / "ca.crt").read_bytes() == ca_before and (out / "ca.key").read_bytes() == ca_key_before
    assert leaf.serial_number != leaf_before.serial_number
    leaf.verify_directly_issued_by(load(out / "ca.crt"))
    assert names(leaf) == names(leaf_before)


def test_renew_refuses_a_ca_key_that_is_not_the_cas(tmp_path: Path) -> None:
    out, other = tmp_path / "certs", tmp_path / "other"
    assert certs("-o", str(out)).exit_code == 0
    assert certs("-o", str(other)).exit_code == 0
    # the marker lists ca.key, so swapping its content keeps the folder gpufleet's own output
    (out / "ca.key").write_bytes((other / "ca.key").read_bytes())
    result = certs("-o", str(out), "--renew")
    assert result.exit_code == 2
    assert "ca.key is not the key of ca.crt" in result.output


def test_a_bad_ip_is_named(tmp_path: Path) -> None:
    result = certs("-o", str(tmp_path / "certs"), "--ip", "not-an-ip")
    assert result.exit_code == 2
    assert "--ip" in result.output and "'not-an-ip' is not an IP address" in result.output
    assert not (tmp_path / "certs").exists()


def test_the_configured_copy_trusts_the_ca_and_drops_cert_manager(fleet: Fleet, tmp_path: Path) -> None:
    rendered = tmp_path / "admission-webhook.yaml"
    rendered.write_text(yaml.safe_dump_all(webhook_objects(fleet)))
    out = tmp_path / "certs"
    result = certs("-o", str(out), "--configuration", str(rendered))
    assert result.exit_code == 0, result.output
    objects = list(yaml.safe_load_all((out / "admission-webhook.yaml").read_text()))
    originals = webhook_objects(fleet)
    assert [o["kind"] for o in objects] == [
        o["kind"] for o in originals if not o["apiVersion"].startswith("cert-manager.io/")
    ]
    bundle = base64.b64encode((out / "ca.crt").read_bytes()).decode()
    configurations = [o for o in objects if o["kind"].endswith("WebhookConfiguration")]
    assert len(configurations) == 2
    for config, original in zip(
        configurations, [o for o in originals if o["kind"].endswith("WebhookConfiguration")], strict=True
    ):
        assert "annotations" not in config["metadata"]
        for hook, was in zip(config["webhooks"], original["webhooks"], strict=True):
            assert hook["clientConfig"] == {**was["clientConfig"], "caBundle": bundle}
            assert {k: v for k, v in hook.items() if k != "clientConfig"} == {
                k: v for k, v in was.items() if k != "clientConfig"
            }
    assert rendered.read_text() == yaml.safe_dump_all(webhook_objects(fleet))  # what it read is unchanged


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("a: [1\n", "is not YAML at line"),
        ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n", "holds no MutatingWebhookConfiguration"),
        ("- 1\n", "expected Kubernetes objects"),
    ],
    ids=["not-yaml", "no-webhook", "not-objects"],
)
def test_a_bad_configuration_is_named_and_nothing_is_written(tmp_path: Path, content: str, message: str) -> None:
    rendered = tmp_path / "admission-webhook.yaml"
    rendered.write_text(content)
    result = certs("-o", str(tmp_path / "certs"), "--configuration", str(rendered))
    assert result.exit_code == 2
    assert str(rendered) in result.output and message in " ".join(result.output.split())
    assert not (tmp_path / "certs").exists()


def test_the_webhook_serves_the_pair_and_a_client_trusting_only_the_ca_connects(
    facts: AdmissionFacts, tmp_path: Path
) -> None:
    """The real server and a real TLS client, verifying the name: what the API server does."""
    out = tmp_path / "certs"
    assert certs("-o", str(out), "--ip", "127.0.0.1").exit_code == 0
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = WebhookServer(create_app(facts), Listen(out / "tls.crt", out / "tls.key", "127.0.0.1", port))
    thread = serve_in_thread(server)
    try:
        context = ssl.create_default_context(cafile=str(out / "ca.crt"))
        with httpx2.Client(base_url=f"https://127.0.0.1:{port}", verify=context, timeout=10) as client:
            assert client.get("/healthz").status_code == 200
        wrong = ssl.create_default_context(cafile=str(out / "ca.crt"))
        with (
            pytest.raises(ssl.SSLCertVerificationError),
            socket.create_connection(("127.0.0.1", port)) as raw,
            wrong.wrap_socket(raw, server_hostname="elsewhere.example"),
        ):
            pass
    finally:
        server.stop()
        thread.join(timeout=10)
