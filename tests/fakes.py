"""A stand-in for subprocess.run that records command lines and answers from rules: the
containerlab runtime, image build and SONiC-VS code run against it without docker,
containerlab or root."""
from __future__ import annotations

import subprocess
from collections.abc import Callable

Answer = tuple[int, str, str]


class FakeRun:
    """Stands in for subprocess.run: records every command line, answers from rules.

    ``on(prefix, *answers)``: commands starting with ``prefix`` (``None`` matches any word)
    get the answers in order, the last one repeating; an answer is ``(returncode, stdout,
    stderr)`` or a callable taking the argv and returning one. Anything else succeeds
    silently.
    """

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.kwargs: list[dict] = []
        self.rules: list[tuple[list[str | None], list]] = []

    def on(self, prefix: list[str | None],
           *answers: Answer | Callable[[list[str]], Answer]) -> FakeRun:
        self.rules.append((prefix, list(answers)))
        return self

    def __call__(self, argv: list[str], **kwargs) -> subprocess.CompletedProcess:
        self.calls.append(list(argv))
        self.kwargs.append(kwargs)
        for prefix, answers in self.rules:
            if len(argv) >= len(prefix) and all(
                    p is None or p == a for p, a in zip(prefix, argv)):
                answer = answers.pop(0) if len(answers) > 1 else answers[0]
                rc, out, err = answer(argv) if callable(answer) else answer
                return subprocess.CompletedProcess(argv, rc, out, err)
        return subprocess.CompletedProcess(argv, 0, "", "")

    def index(self, prefix: list[str]) -> int:
        """Position of the first call starting with prefix (ValueError when none)."""
        return next(i for i, c in enumerate(self.calls) if c[:len(prefix)] == prefix)

    def ran(self, prefix: list[str]) -> bool:
        return any(c[:len(prefix)] == prefix for c in self.calls)




def installed(name: str) -> str | None:
    """``shutil.which`` on a machine that has every tool."""
    return f"/usr/bin/{name}"
