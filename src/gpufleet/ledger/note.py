"""Signed notes (C2SP signed-note) with Ed25519 keys, from the ``cryptography`` package.

A signed note is a UTF-8 text ending in a newline, a blank line, then one signature line per
signer: ``— <key name> <base64(key ID || signature)>`` (an em dash, U+2014). The key ID is the first
4 bytes of SHA-256(key name || 0x0A || 0x01 || 32-byte public key), 0x01 being Ed25519's
signature type, so a verifier can tell which line is meant for its key.

Key files use the encodings Go's ``golang.org/x/mod/sumdb/note`` reads, so a checkpoint can be
checked with other tools too:

- verifier key: ``<name>+<key ID as 8 hex digits>+<base64(0x01 || public key)>``;
- signer key: ``PRIVATE+KEY+<name>+<key ID>+<base64(0x01 || 32-byte seed)>``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from gpufleet.errors import InputError

ED25519 = 0x01
DASH = "\u2014 "
PRIVATE_PREFIX = "PRIVATE+KEY+"


def key_id(name: str, public: bytes) -> bytes:
    return hashlib.sha256(name.encode() + b"\n" + bytes([ED25519]) + public).digest()[:4]


def check_name(name: str, where: str = "--name") -> str:
    if not name or any(c.isspace() for c in name) or "+" in name:
        raise InputError.one(f"a key name must be non-empty, without spaces or '+', got {name!r}", path=where)
    return name


@dataclass(frozen=True, slots=True)
class VerifierKey:
    name: str
    public: bytes  # 32 bytes

    @property
    def id(self) -> bytes:
        return key_id(self.name, self.public)

    def encode(self) -> str:
        return f"{self.name}+{self.id.hex()}+{base64.b64encode(bytes([ED25519]) + self.public).decode()}"

    def verifies(self, message: bytes, signature: bytes) -> bool:
        try:
            Ed25519PublicKey.from_public_bytes(self.public).verify(signature, message)
        except InvalidSignature:
            return False
        return True


@dataclass(frozen=True, slots=True)
class SignerKey:
    name: str
    seed: bytes  # the 32-byte Ed25519 private key

    @classmethod
    def generate(cls, name: str) -> SignerKey:
        from cryptography.hazmat.primitives.serialization import NoEncryption, PrivateFormat

        private = Ed25519PrivateKey.generate()
        return cls(check_name(name), private.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption()))

    @property
    def verifier(self) -> VerifierKey:
        public = Ed25519PrivateKey.from_private_bytes(self.seed).public_key()
        return VerifierKey(self.name, public.public_bytes(Encoding.Raw, PublicFormat.Raw))

    def encode(self) -> str:
        seed = base64.b64encode(bytes([ED25519]) + self.seed).decode()
        return f"{PRIVATE_PREFIX}{self.name}+{self.verifier.id.hex()}+{seed}"

    def sign(self, message: bytes) -> bytes:
        return Ed25519PrivateKey.from_private_bytes(self.seed).sign(message)


def _parts(text: str, file: str, what: str) -> tuple[str, bytes, bytes]:
    """(name, key ID, key bytes) of ``name+hexid+base64``; an InputError naming the file otherwise."""
    parts = text.strip().split("+", 2)  # the base64 may itself contain "+"
    expected = f"{what}: NAME+KEYID+BASE64 (as written by `gpufleet audit keygen`)"
    if len(parts) != 3:
        raise InputError.one(f"not a {expected}", file=file)
    name, hex_id, b64 = parts
    try:
        ident, raw = bytes.fromhex(hex_id), base64.b64decode(b64, validate=True)
    except (ValueError, binascii.Error):
        raise InputError.one(f"not a {expected}: the key ID or key is not hex/base64", file=file) from None
    if len(ident) != 4 or len(raw) != 33 or raw[0] != ED25519:
        raise InputError.one(f"not a {expected}: not an Ed25519 key", file=file)
    check_name(name, "key name")
    return name, ident, raw[1:]


def parse_verifier(text: str, file: str = "") -> VerifierKey:
    if text.strip().startswith(PRIVATE_PREFIX):
        raise InputError.one("this is a private key; give the public key file (.pub)", file=file)
    name, ident, public = _parts(text, file, "public key")
    key = VerifierKey(name, public)
    if key.id != ident:
        raise InputError.one("the key ID does not match the key (the file was edited)", file=file)
    return key


def parse_signer(text: str, file: str = "") -> SignerKey:
    stripped = text.strip()
    if not stripped.startswith(PRIVATE_PREFIX):
        raise InputError.one("not a private key: expected a line starting with PRIVATE+KEY+", file=file)
    name, ident, seed = _parts(stripped[len(PRIVATE_PREFIX) :], file, "private key")
    key = SignerKey(name, seed)
    if key.verifier.id != ident:
        raise InputError.one("the key ID does not match the key (the file was edited)", file=file)
    return key


@dataclass(frozen=True, slots=True)
class Signature:
    name: str
    id: bytes
    signature: bytes


def sign(text: str, key: SignerKey) -> str:
    """The note ``text`` (ending in a newline) signed by ``key``."""
    if not text.endswith("\n"):
        raise ValueError("a note's text ends in a newline")
    signature = base64.b64encode(key.verifier.id + key.sign(text.encode())).decode()
    return f"{text}\n{DASH}{key.name} {signature}\n"


def split(note: str, file: str = "") -> tuple[str, list[Signature]]:
    """(text, signatures) of a signed note; an InputError with the line when it is malformed."""
    text, sep, block = note.rpartition("\n\n")
    if not sep:
        raise InputError.one("not a signed note: no blank line before the signatures", file=file)
    text += "\n"
    first = text.count("\n") + 2
    signatures: list[Signature] = []
    lines = block.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for offset, line in enumerate(lines):
        number = first + offset
        if not line.startswith(DASH):
            raise InputError.one(f"line {number}: expected a signature line '— NAME SIGNATURE'", file=file)
        name, _, b64 = line[len(DASH) :].partition(" ")
        try:
            raw = base64.b64decode(b64, validate=True)
        except binascii.Error:
            raise InputError.one(f"line {number}: the signature is not base64", file=file) from None
        if len(raw) < 5 or not name:
            raise InputError.one(f"line {number}: the signature is too short", file=file)
        signatures.append(Signature(name, raw[:4], raw[4:]))
    if not signatures:
        raise InputError.one("not a signed note: no signature lines", file=file)
    return text, signatures


def signed_by(text: str, signatures: list[Signature], key: VerifierKey) -> bool | None:
    """True when a signature line for ``key`` verifies; False when one exists and fails; None when
    no line names this key (by name and key ID)."""
    mine = [s for s in signatures if s.name == key.name and s.id == key.id]
    if not mine:
        return None
    return any(key.verifies(text.encode(), s.signature) for s in mine)
