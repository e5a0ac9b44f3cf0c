"""Signed checkpoints end to end through the CLI: keygen, checkpoint, verify --checkpoint, prove.

The attacker here has write access to the database and gpufleet's own code: they rebuild the
ledger from its bodies with one record changed (every hash, the tree and the head recomputed), or
without its last entries, or with other entries after a cut. Only the checkpoint catches them.
"""

from __future__ import annotations

import base64
import json
import os
import stat
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpufleet.cli import app
from gpufleet.ledger import merkle, note
from gpufleet.ledger.records import Record, from_canonical
from gpufleet.ledger.store import Ledger
from tests.ledger.ledger_backends import BACKENDS
from tests.ledger.ledger_factories import allocation
from tests.ledger.ledger_scenario import history

runner = CliRunner()

# golang.org/x/mod/sumdb/note's published example: our encodings and signatures must match it.
GO_SIGNER = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"
GO_VERIFIER = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
GO_TEXT = "If you think cryptography is the answer to your problem,\nthen you don't know what your problem is.\n"
GO_NOTE = (
    GO_TEXT
    + "\n— PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n"
)


def test_signed_notes_match_the_go_reference_vector() -> None:
    signer = note.parse_signer(GO_SIGNER)
    assert signer.verifier.encode() == GO_VERIFIER
    assert note.sign(GO_TEXT, signer) == GO_NOTE  # Ed25519 is deterministic
    text, signatures = note.split(GO_NOTE)
    verifier = note.parse_verifier(GO_VERIFIER)
    assert text == GO_TEXT and note.signed_by(text, signatures, verifier) is True
    assert note.signed_by(text.replace("cryptography", "cryptographY"), signatures, verifier) is False


def _records(url: str) -> list[Record]:
    with Ledger.open(url) as ledger:
        return [from_canonical(e.body) for e in ledger.entries()]


def _rebuild(url: str, records: list[Record]) -> None:
    """What an attacker with database access can do: throw the tables away and rewrite them all."""
    with Ledger.open(url) as ledger, ledger.engine.begin() as conn:
        for table in ("ledger_entries", "ledger_current", "ledger_head", "ledger_positions", "ledger_tree"):
            conn.exec_driver_sql(f"DELETE FROM {table}")
    with Ledger.open(url) as ledger:
        for record in records:
            ledger.append([record])


def rewrite_first(records: list[Record]) -> list[Record]:
    return [replace(records[0], team="vision"), *records[1:]]


def truncate(records: list[Record]) -> list[Record]:
    return records[:-2]


def fork(records: list[Record]) -> list[Record]:
    return [*records[:-2], allocation(workload_uid="uid-other", name="other"), *records[-2:]]


def extend(records: list[Record]) -> list[Record]:
    return [*records, *(allocation(workload_uid=f"uid-new-{i}", name=f"new-{i}") for i in range(40))]


CASES = [
    (rewrite_first, 1, "RootDiffers — at size 6 the entries hash to"),
    (truncate, 1, "SizeShrank — the checkpoint covers 6 entries, the ledger now holds 4"),
    (fork, 1, "RootDiffers"),
    (extend, 0, "OK: the ledger (46 entries) extends checkpoint 'test.example/ledger' at size 6"),
]


@pytest.fixture
def keys(tmp_path: Path) -> tuple[Path, Path]:
    prefix = tmp_path / "keys" / "ledger-key"
    result = runner.invoke(app, ["audit", "keygen", "-o", str(prefix), "--name", "test.example/ledger"])
    assert result.exit_code == 0, result.output
    return prefix, prefix.with_name("ledger-key.pub")


@pytest.mark.parametrize("ledger_url", BACKENDS, indirect=True)
@pytest.mark.parametrize(("change", "code", "said"), CASES, ids=[c[0].__name__ for c in CASES])
def test_verify_checkpoint_catches_rewrite_truncation_and_fork(
    ledger_url: str, keys: tuple[Path, Path], tmp_path: Path, change: object, code: int, said: str
) -> None:
    private, public = keys
    with Ledger.open(ledger_url) as ledger:
        ledger.append(history())
    signed = tmp_path / "checkpoint"
    made = runner.invoke(app, ["audit", "checkpoint", "--ledger", ledger_url, "--key", str(private), "-o", str(signed)])
    assert made.exit_code == 0, made.output
    _rebuild(ledger_url, change(_records(ledger_url)))  # type: ignore[operator]
    assert runner.invoke(app, ["audit", "verify", "--ledger", ledger_url]).exit_code == 0  # the chain alone is fooled
    args = ["audit", "verify", "--ledger", ledger_url, "--checkpoint", str(signed), "--pubkey", str(public)]
    result = runner.invoke(app, args)
    assert result.exit_code == code and said in result.stdout, result.output


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        (
            lambda t: t.replace("\n6\n", "\n7\n", 1),
            "SignatureInvalid — the signature of key 'test.example/ledger' does not verify",
        ),
        (
            lambda t: t.replace("— test.example/ledger", "— someone.else"),
            "SignatureInvalid — the signature of key 'test.example/ledger' is missing",
        ),
        (lambda t: t.replace("test.example/ledger\n", "other.example/log\n", 1), "SignatureInvalid"),
    ],
    ids=["size-edited", "other-signer", "origin-edited"],
)
def test_an_edited_checkpoint_fails_its_signature(
    keys: tuple[Path, Path], tmp_path: Path, edit: object, said: str
) -> None:
    private, public = keys
    db = str(tmp_path / "ledger.db")
    with Ledger.open(db) as ledger:
        ledger.append(history())
    signed = tmp_path / "checkpoint"
    assert (
        runner.invoke(app, ["audit", "checkpoint", "--ledger", db, "--key", str(private), "-o", str(signed)]).exit_code
        == 0
    )
    signed.write_text(edit(signed.read_text()))  # type: ignore[operator]
    result = runner.invoke(
        app, ["audit", "verify", "--ledger", db, "--checkpoint", str(signed), "--pubkey", str(public)]
    )
    assert result.exit_code == 1 and said in result.stdout, result.output


def test_a_checkpoint_for_another_origin_is_named(keys: tuple[Path, Path], tmp_path: Path) -> None:
    private, public = keys
    db = str(tmp_path / "ledger.db")
    with Ledger.open(db) as ledger:
        ledger.append(history())
    signed = tmp_path / "checkpoint"
    args = [
        "audit",
        "checkpoint",
        "--ledger",
        db,
        "--key",
        str(private),
        "--origin",
        "staging/ledger",
        "-o",
        str(signed),
    ]
    assert runner.invoke(app, args).exit_code == 0
    result = runner.invoke(
        app, ["audit", "verify", "--ledger", db, "--checkpoint", str(signed), "--pubkey", str(public)]
    )
    assert (
        result.exit_code == 1
        and "WrongOrigin — the checkpoint is for origin 'staging/ledger', not 'test.example/ledger'" in result.stdout
    )
    ok = runner.invoke(
        app,
        [
            "audit",
            "verify",
            "--ledger",
            db,
            "--checkpoint",
            str(signed),
            "--pubkey",
            str(public),
            "--origin",
            "staging/ledger",
        ],
    )
    assert ok.exit_code == 0, ok.output


def test_keygen_writes_a_private_key_only_its_owner_reads_and_never_overwrites(keys: tuple[Path, Path]) -> None:
    private, public = keys
    assert stat.S_IMODE(os.stat(private).st_mode) == 0o600
    assert note.parse_signer(private.read_text()).verifier == note.parse_verifier(public.read_text())
    before = private.read_text()
    again = runner.invoke(app, ["audit", "keygen", "-o", str(private)])
    assert again.exit_code == 2 and "exists" in again.stderr and private.read_text() == before
    os.chmod(private, 0o644)  # an older key someone left readable: the new one is private all the same
    forced = runner.invoke(app, ["audit", "keygen", "-o", str(private), "--force", "--name", "x.example/l"])
    assert forced.exit_code == 0 and private.read_text() != before
    assert stat.S_IMODE(os.stat(private).st_mode) == 0o600


@pytest.mark.parametrize("ledger_url", BACKENDS, indirect=True)
def test_prove_gives_inclusion_proofs_an_auditor_can_check_alone(
    ledger_url: str, keys: tuple[Path, Path], tmp_path: Path
) -> None:
    private, public = keys
    with Ledger.open(ledger_url) as ledger:
        ledger.append(history())
        ledger.append([allocation(workload_uid=f"uid-{i}", name=f"n-{i}") for i in range(50)])
    signed = tmp_path / "checkpoint"
    assert (
        runner.invoke(
            app, ["audit", "checkpoint", "--ledger", ledger_url, "--key", str(private), "-o", str(signed)]
        ).exit_code
        == 0
    )
    with Ledger.open(ledger_url) as ledger:
        ledger.append(
            [replace(allocation(), finished=allocation().created.replace(hour=23))]
        )  # newer than the checkpoint
    args = [
        "audit",
        "prove",
        "research/train-a",
        "--ledger",
        ledger_url,
        "--checkpoint",
        str(signed),
        "--pubkey",
        str(public),
        "--json",
    ]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    proof = json.loads(result.stdout)
    root = base64.b64decode(proof["rootHash"])
    assert proof["treeSize"] == 56 and len(proof["entries"]) == 4 and len(proof["notYetCovered"]) == 1
    for entry in proof["entries"]:  # what an auditor does with nothing but the output and the checkpoint
        leaf = merkle.leaf_hash(entry["body"].encode())
        path = [base64.b64decode(h) for h in entry["inclusionProof"]]
        assert merkle.verify_inclusion(entry["leafIndex"], proof["treeSize"], leaf, path, root)
        assert not merkle.verify_inclusion(entry["leafIndex"], proof["treeSize"], merkle.leaf_hash(b"x"), path, root)
    assert root == base64.b64decode(signed.read_text().split("\n")[2])
