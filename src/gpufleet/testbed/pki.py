"""The testbed's certificates: one CA, serving certificates for loopback, and an admin client.

Every component talks TLS as it would in a real cluster, so the API server's client-certificate
authentication, its calls to admission webhooks and Kueue's webhook server are exercised for real.
Keys are ECDSA P-256: quick to make, and accepted by every component (service-account tokens too).
The CA is made as ``gpufleet webhook certs`` makes its own (``webhook.certs.authority``): it signs
leaf certificates only.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from gpufleet.webhook.certs import authority, private_key_pem

VALIDITY = datetime.timedelta(days=30)
LOOPBACK_NAMES = ("localhost",)
LOOPBACK_IPS = ("127.0.0.1",)
# The in-cluster names of the API server, for clients that reach it as the kubernetes Service.
APISERVER_NAMES = ("kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local")
APISERVER_SERVICE_IP = "10.0.0.1"


@dataclass(frozen=True)
class KeyPair:
    cert: Path
    key: Path


def _write(path: Path, data: bytes, mode: int = 0o644) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.chmod(tmp, mode)
    os.replace(tmp, path)


def _name(common_name: str, organization: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(attrs)


@dataclass(frozen=True)
class Authority:
    """A CA that signs the testbed's certificates; its files live in ``folder``."""

    folder: Path
    pair: KeyPair
    _cert: x509.Certificate
    _key: ec.EllipticCurvePrivateKey

    @classmethod
    def create(cls, folder: Path) -> Authority:
        folder.mkdir(parents=True, exist_ok=True)
        cert, key = authority("gpufleet-testbed-ca", VALIDITY.days)
        pair = KeyPair(folder / "ca.crt", folder / "ca.key")
        _write(pair.cert, cert.public_bytes(serialization.Encoding.PEM))
        _write(pair.key, private_key_pem(key), 0o600)
        return cls(folder, pair, cert, key)

    def issue(
        self,
        stem: str,
        common_name: str,
        *,
        organization: str | None = None,
        dns: tuple[str, ...] = (),
        ips: tuple[str, ...] = (),
        client: bool = False,
    ) -> KeyPair:
        """Sign a leaf certificate: a server one when it has names, a client one when ``client``."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        usages = [ExtendedKeyUsageOID.CLIENT_AUTH] if client else [ExtendedKeyUsageOID.SERVER_AUTH]
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(common_name, organization))
            .issuer_name(self._cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        )
        alt: list[x509.GeneralName] = [x509.DNSName(d) for d in dns]
        alt += [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
        if alt:
            builder = builder.add_extension(x509.SubjectAlternativeName(alt), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        pair = KeyPair(self.folder / f"{stem}.crt", self.folder / f"{stem}.key")
        _write(pair.cert, cert.public_bytes(serialization.Encoding.PEM))
        _write(pair.key, private_key_pem(key), 0o600)
        return pair

    def serving(
        self, stem: str, common_name: str, *, extra_dns: tuple[str, ...] = (), extra_ips: tuple[str, ...] = ()
    ) -> KeyPair:
        return self.issue(stem, common_name, dns=LOOPBACK_NAMES + extra_dns, ips=LOOPBACK_IPS + extra_ips)


def signing_key(folder: Path) -> KeyPair:
    """The service-account token signing key (``.key``) and its public half (``.pub``)."""
    key = ec.generate_private_key(ec.SECP256R1())
    pair = KeyPair(folder / "sa.pub", folder / "sa.key")
    public = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    _write(pair.cert, public)
    _write(pair.key, private_key_pem(key), 0o600)
    return pair
