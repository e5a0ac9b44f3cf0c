"""``gpufleet audit keygen|checkpoint|prove|upgrade``: keys, signed checkpoints and inclusion proofs.

Parsing and printing only; the tree, the notes and the checks live in ``gpufleet.ledger``.
"""

from __future__ import annotations

import base64
import json
import socket
from pathlib import Path
from typing import Annotated, Any

import typer

from gpufleet.cli.audit_common import (
    DEFAULT_LEDGER,
    EXIT_FINDING,
    LEDGER_HELP,
    audited,
    open_read,
    print_verdict,
    workload_name,
)
from gpufleet.cli.common import console, guarded
from gpufleet.errors import InputError
from gpufleet.files import atomic_path, write_text
from gpufleet.ledger import note

DEFAULT_KEY = "gpufleet-ledger-key"
MAX_FILE = 1 << 20  # a key or a checkpoint is a few hundred bytes


def read_text(path: Path, option: str) -> str:
    """A small UTF-8 file, or an InputError naming it."""
    try:
        if not path.is_file():
            raise InputError.one(
                "no such file" if not path.exists() else "not a regular file", file=str(path), path=option
            )
        if path.stat().st_size > MAX_FILE:
            raise InputError.one("too large for a key or a checkpoint", file=str(path), path=option)
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise InputError.one("not UTF-8 text", file=str(path), path=option) from None
    except OSError as exc:
        raise InputError.one(f"cannot read it: {exc.strerror}", file=str(path), path=option) from None


def read_pubkey(path: Path) -> note.VerifierKey:
    return note.parse_verifier(read_text(path, "--pubkey"), str(path))


def _b64(digest: bytes) -> str:
    return base64.b64encode(digest).decode()


@guarded
def keygen(
    *,
    output: Annotated[
        Path, typer.Option("-o", "--output", help="Prefix: writes PREFIX (private, mode 0600) and PREFIX.pub.")
    ] = Path(DEFAULT_KEY),
    name: Annotated[
        str, typer.Option("--name", help="Key name, also the checkpoints' default origin.")
    ] = f"{socket.gethostname()}/gpufleet-ledger",
    force: Annotated[bool, typer.Option("--force", help="Replace existing key files.")] = False,
) -> None:
    """Make an Ed25519 key pair for signing checkpoints (C2SP signed-note key encodings)."""
    private, public = output, output.with_name(output.name + ".pub")
    for path in (private, public):
        if path.is_dir():
            raise InputError.one("is a folder; give a file prefix", file=str(path), path="--output")
        if path.exists() and not force:
            raise InputError.one("exists; keep it, or replace it with --force", file=str(path), path="--output")
    key = note.SignerKey.generate(name)
    with atomic_path(private, mode=0o600) as tmp:  # only its owner reads it, even over an older key
        tmp.write_text(key.encode() + "\n", encoding="utf-8")
    with atomic_path(public, mode=0o644) as tmp:
        tmp.write_text(key.verifier.encode() + "\n", encoding="utf-8")
    console.print(
        f"wrote {private} (private, 0600) and {public}; key {key.verifier.encode()}", highlight=False, soft_wrap=True
    )


@guarded
@audited
def checkpoint(
    *,
    key: Annotated[Path, typer.Option("--key", help="Private key file from `gpufleet audit keygen`.")],
    ledger: Annotated[str, typer.Option("--ledger", help=LEDGER_HELP)] = DEFAULT_LEDGER,
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Write here instead of stdout.")] = None,
    origin: Annotated[str | None, typer.Option("--origin", help="The log's name (default: the key's name).")] = None,
) -> None:
    """Sign a checkpoint (C2SP tlog-checkpoint) of the ledger's head, after verifying the ledger."""
    from gpufleet.ledger.checkpoint import Checkpoint

    signer = note.parse_signer(read_text(key, "--key"), str(key))
    if output is not None and output.is_dir():
        raise InputError.one("is a folder; give a file path", file=str(output), path="--output")
    with open_read(ledger) as opened:
        verdict = opened.verify()
    if not verdict.ok:
        print_verdict(verdict, quiet_ok=True)
        console.print("[bold red]not signed[/]: a checkpoint would vouch for a ledger that fails verify")
        raise typer.Exit(EXIT_FINDING)
    signed = Checkpoint(origin or signer.name, verdict.size, verdict.root).signed(signer)
    if output is None:
        typer.echo(signed, nl=False)
        return
    write_text(output, signed)
    console.print(f"wrote {output}: {verdict.size} entries, root {_b64(verdict.root)}", highlight=False, soft_wrap=True)


@guarded
@audited
def prove(
    *,
    workload: Annotated[str, typer.Argument(metavar="NAMESPACE/NAME", help="The workload whose records to prove.")],
    ledger: Annotated[str, typer.Option("--ledger", help=LEDGER_HELP)] = DEFAULT_LEDGER,
    checkpoint_file: Annotated[
        Path | None, typer.Option("--checkpoint", help="Prove against this checkpoint (default: the current head).")
    ] = None,
    pubkey: Annotated[Path | None, typer.Option("--pubkey", help="Check the checkpoint's signature too.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Inclusion proofs (RFC 9162) of every entry of a workload's records, for an auditor to check."""
    from gpufleet.ledger import checkpoint as checkpoints
    from gpufleet.ledger import merkle, proofs

    namespace, name = workload_name(workload)
    with open_read(ledger) as opened:
        if checkpoint_file is not None:
            cp, text, signatures = checkpoints.parse(read_text(checkpoint_file, "--checkpoint"), str(checkpoint_file))
            if pubkey is not None and note.signed_by(text, signatures, read_pubkey(pubkey)) is not True:
                console.print(
                    f"[bold red]INCONSISTENT[/]: SignatureInvalid — {checkpoint_file} is not signed by that key"
                )
                raise typer.Exit(EXIT_FINDING)
            size, root, origin = cp.size, cp.root, cp.origin
            current_size = opened.tree_head()[0]
            if current_size < size:
                console.print(
                    f"[bold red]INCONSISTENT[/]: SizeShrank — the checkpoint covers {size} entries,"
                    f" the ledger holds {current_size}",
                    highlight=False,
                )
                raise typer.Exit(EXIT_FINDING)
        else:
            (size, root), origin = opened.tree_head(), None
        keys = sorted({r.key for r in opened.current_records(namespace=namespace, name=name)})
        if not keys:
            raise InputError.one(f"the ledger has no workload {namespace}/{name}", path="WORKLOAD")
        seqs = sorted(s for found in opened.entry_seqs(keys).values() for s in found)
        covered = [s for s in seqs if s <= size]
        proven = proofs.inclusions(opened, covered, size)
    bad = [p for p in proven if not merkle.verify_inclusion(p.index, size, p.leaf, p.proof, root)]
    if as_json:
        typer.echo(
            json.dumps(_proof_json(workload, origin, size, root, proven=proven, newer=seqs[len(covered) :]), indent=2)
        )
    else:
        _print_proofs(workload, size, root, proven, len(seqs) - len(covered))
    if bad:
        console.print(
            f"[bold red]INCONSISTENT[/]: ProofInvalid — entries {', '.join(str(p.seq) for p in bad)}"
            " do not verify against that root",
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(EXIT_FINDING)


def _proof_json(
    workload: str, origin: str | None, size: int, root: bytes, *, proven: list[Any], newer: list[int]
) -> Any:
    return {
        "workload": workload,
        "origin": origin,
        "treeSize": size,
        "rootHash": _b64(root),
        "hashAlgorithm": "RFC 9162 SHA-256; leaf hash = SHA-256(0x00 || body as UTF-8)",
        "entries": [
            {
                "seq": p.seq,
                "leafIndex": p.index,
                "recordKey": p.record_key,
                "body": p.body,
                "leafHash": _b64(p.leaf),
                "inclusionProof": [_b64(h) for h in p.proof],
            }
            for p in proven
        ],
        "notYetCovered": newer,
    }


def _print_proofs(workload: str, size: int, root: bytes, proven: list[Any], newer: int) -> None:
    console.print(
        f"{workload}: {len(proven)} entries in the tree of {size} (root {_b64(root)})", highlight=False, soft_wrap=True
    )
    for p in proven:
        console.print(
            f"  entry {p.seq} ({p.record_key}), leaf {p.index}, leaf hash {_b64(p.leaf)}",
            highlight=False,
            soft_wrap=True,
        )
        for h in p.proof:
            console.print(f"    {_b64(h)}", highlight=False, soft_wrap=True)
    if newer:
        console.print(f"{newer} newer entries are not covered by that tree size yet.", highlight=False, soft_wrap=True)
    console.print(
        "Each proof verifies per RFC 9162 §2.1.3.2 (use --json for the bodies).", highlight=False, soft_wrap=True
    )


@guarded
def upgrade(*, ledger: Annotated[str, typer.Option("--ledger", help=LEDGER_HELP)] = DEFAULT_LEDGER) -> None:
    """Bring an existing ledger's schema to this gpufleet's revision (builds the Merkle tree if new)."""
    from gpufleet.ledger import connect
    from gpufleet.ledger.schema import SCHEMA_REVISION
    from gpufleet.ledger.store import Ledger

    target = connect.parse(ledger)
    if target.path is not None and not target.path.exists():
        raise InputError.one("no such ledger file (upgrade never creates one)", file=target.shown, path="--ledger")
    with Ledger.open(ledger):
        pass
    console.print(f"{target.shown}: schema at revision {SCHEMA_REVISION}", highlight=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    app.command()(keygen)
    app.command()(checkpoint)
    app.command()(prove)
    app.command()(upgrade)
