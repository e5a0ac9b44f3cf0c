"""Errors a user can cause, and how they are located.

Every user mistake (a bad policy file, a malformed manifest) is raised as an ``InputError`` that
carries one ``Problem`` per mistake, so the CLI can print all of them at once and exit with 2
instead of a traceback.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Problem:
    """One mistake in one input: where it is, what is wrong, and what was expected."""

    message: str
    file: str = ""
    path: str = ""  # a dotted field path such as ``teams[0].quota.h100-train.gpus``
    line: int | None = None  # 1-based
    column: int | None = None  # 1-based

    def __str__(self) -> str:
        # a flag's mistake has no file: it is located by the flag alone ("--ledger: ...")
        parts = [self.file] if self.file else []
        if self.line is not None:
            at = f"{self.line}" + (f":{self.column}" if self.column is not None else "")
            parts = [f"{self.file}:{at}"] if self.file else [f"line {at}"]
        if self.path:
            parts.append(self.path)
        return ": ".join([*parts, self.message])


@dataclass
class InputError(Exception):
    """Raised with every problem found in an input; the CLI prints them and exits 2."""

    problems: list[Problem] = field(default_factory=list)

    def __post_init__(self) -> None:
        super().__init__(self.summary())

    def summary(self) -> str:
        return "\n".join(str(p) for p in self.problems)

    @classmethod
    def one(cls, message: str, *, file: str = "", path: str = "") -> InputError:
        return cls([Problem(message=message, file=file, path=path)])
