"""The webhook's own certificates, for clusters without cert-manager: a CA and a serving certificate.

The API server trusts the webhook through the ``caBundle`` of its configurations, so the CA is what
must last: ``issue`` makes a new CA only when asked, and ``renew`` signs a fresh serving certificate
with the CA already in the folder, leaving every ``caBundle`` valid. The files are those a
``kubernetes.io/tls`` Secret holds (``ca.crt``, ``tls.crt``, ``tls.key``, as cert-manager writes
them) plus ``ca.key``; keys are ECDSA P-256 and written 0600. The folder is written as every gpufleet
output is (``gpufleet.outputs``): staged, renamed into place, never over what gpufleet did not write.
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from gpufleet.errors import InputError
from gpufleet.outputs import State, check, replace_folder

CA_CERT, CA_KEY, TLS_CERT, TLS_KEY = "ca.crt", "ca.key", "tls.crt", "tls.key"
SECRET_FILE = "secret.yaml"
CONFIGURED_FILE = "admission-webhook.yaml"
COMMAND = "webhook certs"
CA_DAYS = 3650
SERVING_DAYS = 365
CLOCK_SKEW = datetime.timedelta(minutes=5)
CERT_MANAGER_GROUP = "cert-manager.io/"
INJECT_ANNOTATION = "cert-manager.io/inject-ca-from"
WEBHOOK_KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")


@dataclass(frozen=True)
class Names:
    """Who the serving certificate is for: the Service's DNS names, and addresses when called by URL."""

    dns: tuple[str, ...]
    ips: tuple[str, ...] = ()

    @classmethod
    def service(cls, name: str, namespace: str, extra_dns: tuple[str, ...] = (), ips: tuple[str, ...] = ()) -> Names:
        own = (f"{name}.{namespace}.svc", f"{name}.{namespace}.svc.cluster.local")
        for ip in ips:
            try:
                ipaddress.ip_address(ip)
            except ValueError:
                raise InputError.one(f"{ip!r} is not an IP address", path="--ip") from None
        return cls(own + tuple(d for d in extra_dns if d not in own), ips)


@dataclass(frozen=True)
class Issued:
    folder: Path
    ca_pem: bytes
    renewed: bool  # the CA was kept, only the serving certificate is new
    names: Names
    not_after: datetime.datetime


def private_key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    """PKCS#8 PEM, unencrypted: the file mode (0600) is what protects it, as for cert-manager's Secret."""
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def authority(common_name: str, days: int) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    """A new self-signed CA that signs leaf certificates only (path length 0); the testbed's CA too."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - CLOCK_SKEW)
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def _serving(
    ca: x509.Certificate, ca_key: ec.EllipticCurvePrivateKey, names: Names, days: int
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    not_after = min(now + datetime.timedelta(days=days), ca.not_valid_after_utc)
    alt: list[x509.GeneralName] = [x509.DNSName(d) for d in names.dns]
    alt += [x509.IPAddress(ipaddress.ip_address(i)) for i in names.ips]
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names.dns[0])]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - CLOCK_SKEW)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(True, False, True, False, False, False, False, False, False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(alt), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return cert, key


def _load_ca(folder: Path) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    """The CA kept in an earlier output, for ``--renew``; a clear error when it is not there or unusable."""
    cert_path, key_path = folder / CA_CERT, folder / CA_KEY
    for path in (cert_path, key_path):
        if not path.is_file():
            raise InputError.one(
                f"--renew needs the CA of an earlier `gpufleet webhook certs` here; {path.name} is missing",
                file=str(path),
            )
    try:
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
        key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
        raise InputError.one(f"is not a PEM certificate and unencrypted key pair: {exc}", file=str(folder)) from None
    if not isinstance(key, ec.EllipticCurvePrivateKey) or key.public_key() != cert.public_key():
        raise InputError.one("ca.key is not the key of ca.crt", file=str(key_path))
    return cert, key


def _with_earlier_names(folder: Path, names: Names) -> Names:
    """A renewed certificate keeps every name of the one it replaces (plus any given now)."""
    try:
        old = x509.load_pem_x509_certificate((folder / TLS_CERT).read_bytes())
        alt = old.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (OSError, ValueError, x509.ExtensionNotFound):
        return names
    dns = tuple(dict.fromkeys(names.dns + tuple(alt.get_values_for_type(x509.DNSName))))
    ips = tuple(dict.fromkeys(names.ips + tuple(str(i) for i in alt.get_values_for_type(x509.IPAddress))))
    return Names(dns, ips)


def secret(ca_pem: bytes, cert_pem: bytes, key_pem: bytes, name: str, namespace: str) -> dict[str, Any]:
    """The Secret the webhook's Deployment mounts, in the shape cert-manager writes it."""
    data = {CA_CERT: ca_pem, TLS_CERT: cert_pem, TLS_KEY: key_pem}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app.kubernetes.io/managed-by": "gpufleet"}},
        "type": "kubernetes.io/tls",
        "data": {k: base64.b64encode(v).decode() for k, v in data.items()},
    }


def configured(documents: list[Any], ca_pem: bytes, source: str) -> list[dict[str, Any]]:
    """The rendered webhook objects made to work without cert-manager.

    Its Issuer and Certificate are dropped, the injection annotation removed, and every webhook's
    ``caBundle`` set to the CA; nothing else changes.
    """
    bundle = base64.b64encode(ca_pem).decode()
    out: list[dict[str, Any]] = []
    hooks = 0
    for doc in documents:
        if doc is None:
            continue
        if not isinstance(doc, dict) or "kind" not in doc:
            raise InputError.one("expected Kubernetes objects (a mapping with kind)", file=source)
        if str(doc.get("apiVersion", "")).startswith(CERT_MANAGER_GROUP):
            continue
        if doc["kind"] in WEBHOOK_KINDS:
            meta = dict(doc.get("metadata") or {})
            annotations = {k: v for k, v in (meta.pop("annotations", None) or {}).items() if k != INJECT_ANNOTATION}
            if annotations:
                meta["annotations"] = annotations
            webhooks = [
                {**hook, "clientConfig": {**hook.get("clientConfig", {}), "caBundle": bundle}}
                for hook in doc.get("webhooks") or []
            ]
            hooks += len(webhooks)
            out.append({**doc, "metadata": meta, "webhooks": webhooks})
            continue
        out.append(doc)
    if hooks == 0:
        raise InputError.one(
            "holds no MutatingWebhookConfiguration or ValidatingWebhookConfiguration; "
            "give the admission-webhook.yaml that `gpufleet render` wrote",
            file=source,
        )
    return out


def _read_configuration(path: Path) -> list[Any]:
    try:
        return list(yaml.safe_load_all(path.read_text(encoding="utf-8")))
    except OSError as exc:
        raise InputError.one(f"cannot be read: {exc.strerror}", file=str(path)) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" at line {mark.line + 1}" if mark is not None else ""
        raise InputError.one(f"is not YAML{line}: {getattr(exc, 'problem', exc)}", file=str(path)) from None


def _write(folder: Path, name: str, data: bytes, mode: int) -> None:
    path = folder / name
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def issue(
    out: Path,
    names: Names,
    *,
    secret_name: str,
    namespace: str,
    configuration: Path | None = None,
    renew: bool = False,
    force: bool = False,
    ca_days: int = CA_DAYS,
    days: int = SERVING_DAYS,
) -> Issued:
    """Write the CA and serving pair into ``out`` (a new CA, or with ``renew`` the one already there).

    An existing folder is refused unless ``renew`` (keep its CA) or ``force`` (a new CA: every
    caBundle must then be updated); a folder gpufleet did not write is kept beside it with ``force``.
    """
    if days < 1 or ca_days < 1:
        raise InputError.one("certificate lifetimes must be at least one day", path="--days")
    documents = _read_configuration(configuration) if configuration is not None else None
    kept_configuration = None
    state = check(out, force=force).state
    if renew and state is not State.OURS:
        raise InputError.one("--renew needs the output of an earlier `gpufleet webhook certs` here", file=str(out))
    if state in (State.OURS, State.FOREIGN) and not (renew or force):
        raise InputError.one(
            "already exists: it may hold the CA your webhook configurations trust; "
            "--renew issues a new serving certificate from that CA, --force makes a new CA",
            file=str(out),
        )
    if renew and documents is None and (out / CONFIGURED_FILE).is_file():
        kept_configuration = (out / CONFIGURED_FILE).read_bytes()  # its caBundle still holds: same CA
    if renew:
        names = _with_earlier_names(out, names)
    ca, ca_key = _load_ca(out) if renew else authority(f"gpufleet-webhook-ca ({namespace})", ca_days)
    cert, key = _serving(ca, ca_key, names, days)
    ca_pem = ca.public_bytes(serialization.Encoding.PEM)
    cert_pem, key_pem = cert.public_bytes(serialization.Encoding.PEM), private_key_pem(key)
    with replace_folder(out, COMMAND, force=force or renew) as staging:
        staging.chmod(0o700)
        _write(staging, CA_CERT, ca_pem, 0o644)
        _write(staging, CA_KEY, private_key_pem(ca_key), 0o600)
        _write(staging, TLS_CERT, cert_pem, 0o644)
        _write(staging, TLS_KEY, key_pem, 0o600)
        tls_secret = secret(ca_pem, cert_pem, key_pem, secret_name, namespace)
        _write(staging, SECRET_FILE, yaml.safe_dump(tls_secret, sort_keys=False).encode(), 0o600)
        if documents is not None and configuration is not None:
            objects = configured(documents, ca_pem, str(configuration))
            _write(staging, CONFIGURED_FILE, yaml.safe_dump_all(objects, sort_keys=False).encode(), 0o644)
        elif kept_configuration is not None:
            _write(staging, CONFIGURED_FILE, kept_configuration, 0o644)
    return Issued(out, ca_pem, renew, names, cert.not_valid_after_utc)
