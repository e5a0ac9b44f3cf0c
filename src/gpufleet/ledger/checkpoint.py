"""Checkpoints (C2SP tlog-checkpoint) of the ledger's Merkle tree, and checking a ledger against one.

A checkpoint is the signed note

    <origin>
    <tree size, decimal>
    <root hash, base64>
    [extension lines]

    — <key name> <base64(key ID || Ed25519 signature)>

Published outside the database (a file, a ConfigMap, a log line), it pins the first ``size``
entries: whoever later rewrites, removes or replaces any of them, even recomputing every hash
in the database, cannot produce entries whose tree has that root at that size, and cannot sign a
new checkpoint without the private key. ``check`` proves today's ledger extends a checkpoint.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass, field

from gpufleet.errors import InputError
from gpufleet.ledger import merkle, note, proofs
from gpufleet.ledger.store import Ledger
from gpufleet.ledger.verification import LedgerVerdict, Problem

_DECIMAL = re.compile(r"0|[1-9][0-9]{0,19}")


@dataclass(frozen=True, slots=True)
class Checkpoint:
    origin: str
    size: int
    root: bytes
    extensions: tuple[str, ...] = ()

    def text(self) -> str:
        """The note text that is signed (ends in a newline)."""
        lines = [self.origin, str(self.size), base64.b64encode(self.root).decode(), *self.extensions]
        return "".join(line + "\n" for line in lines)

    def signed(self, key: note.SignerKey) -> str:
        return note.sign(self.text(), key)


def parse(signed: str, file: str = "") -> tuple[Checkpoint, str, list[note.Signature]]:
    """(checkpoint, signed text, signatures); an InputError naming the line when malformed."""
    text, signatures = note.split(signed, file)
    lines = text.split("\n")[:-1]
    if len(lines) < 3:
        raise InputError.one("a checkpoint has an origin, a tree size and a root hash line", file=file)
    origin, size_text, root_text, *extensions = lines
    if not origin.strip():
        raise InputError.one("line 1: the origin is empty", file=file)
    if not _DECIMAL.fullmatch(size_text):
        raise InputError.one(f"line 2: expected the tree size as a decimal number, got {size_text!r}", file=file)
    try:
        root = base64.b64decode(root_text, validate=True)
    except binascii.Error:
        root = b""
    if len(root) != merkle.HASH_SIZE:
        raise InputError.one(f"line 3: expected a base64 SHA-256 root hash, got {root_text!r}", file=file)
    for number, line in enumerate(extensions, start=4):
        if not line:
            raise InputError.one(f"line {number}: an extension line is empty", file=file)
    return Checkpoint(origin, int(size_text), root, tuple(extensions)), text, signatures


def current(ledger: Ledger, origin: str) -> Checkpoint:
    """A checkpoint of the ledger's head, from the stored frontier."""
    size, root = ledger.tree_head()
    return Checkpoint(origin, size, root)


@dataclass(frozen=True, slots=True)
class Extension:
    """What ``check`` found: the verdict of the full pass, and the problems with the checkpoint."""

    checkpoint: Checkpoint
    verdict: LedgerVerdict | None
    problems: list[Problem] = field(default_factory=list)
    proof: list[bytes] = field(default_factory=list)  # the verified consistency proof

    @property
    def ok(self) -> bool:
        return not self.problems and self.verdict is not None and self.verdict.ok


def check(ledger: Ledger, signed: str, key: note.VerifierKey, *, origin: str | None, file: str = "") -> Extension:
    """Does today's ledger extend this checkpoint? Signature, origin, size, root, then consistency."""
    cp, text, signatures = parse(signed, file)
    by_key = note.signed_by(text, signatures, key)
    if by_key is not True:
        names = ", ".join(sorted({s.name for s in signatures}))
        why = "does not verify" if by_key is False else f"is missing (signed by {names})"
        return Extension(cp, None, [Problem("SignatureInvalid", f"the signature of key {key.name!r} {why}")])
    expected = origin if origin is not None else key.name
    if cp.origin != expected:
        message = f"the checkpoint is for origin {cp.origin!r}, not {expected!r}"
        return Extension(cp, None, [Problem("WrongOrigin", message)])
    verdict = ledger.verify(sizes=frozenset({cp.size}))
    if not verdict.chain.ok:
        return Extension(cp, verdict)
    problems: list[Problem] = []
    if verdict.size < cp.size:
        problems.append(
            Problem(
                "SizeShrank",
                f"the checkpoint covers {cp.size} entries, the ledger now holds {verdict.size}:"
                f" entries {verdict.size + 1}..{cp.size} were removed from the end",
            )
        )
    elif verdict.roots_at[cp.size] != cp.root:
        problems.append(
            Problem(
                "RootDiffers",
                f"at size {cp.size} the entries hash to {_b64(verdict.roots_at[cp.size])}, the checkpoint"
                f" says {_b64(cp.root)}: entries among the first {cp.size} were rewritten, or the ledger forked",
            )
        )
    proof: list[bytes] = []
    if not problems and verdict.ok:
        proof = proofs.consistency(ledger, cp.size, verdict.size)
        if not merkle.verify_consistency(cp.size, verdict.size, cp.root, verdict.root, proof):
            problems.append(Problem("ProofInvalid", "the consistency proof from the stored tree does not verify"))
    return Extension(cp, verdict, problems, proof)


def _b64(digest: bytes) -> str:
    return base64.b64encode(digest).decode()
