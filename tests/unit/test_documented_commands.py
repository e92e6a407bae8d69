"""Every ``invoke <task>`` and ``rocelab <task>`` a user can read in README.md, docs/*.md,
docs/ci/, scripts/*.sh and .ci/run names a task that exists, with options it has: the
tasks moved into the installed package (rocelab.cli.tasks) and must keep every documented name.

Markdown is read only in code (fenced blocks and inline spans), where a command is a
command and not prose ("rocelab runs ..."); shell files whole. A usage line's alternatives
(``show.pfc-counters\\|queue-counters``) are each checked; a family (``show.*``,
``clear.<view>``) must name an existing collection."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

import tasks
from rocelab.cli.program import dotted, program

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
SPAN = re.compile(r"`([^`\n]+)`")
# the program's name where a command starts: line start, after a shell separator, a
# path (.venv/bin/invoke) or $( ... )
COMMAND = re.compile(r"(?:^|[\s;&|($/])(invoke|rocelab)[ \t]+([^\s`]+)(.*)")
OPTION = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)")
SEPARATOR = re.compile(r"&&|;|\|\||(?<!\\)\|(?!\|)|\s#")


def code_of(path: Path) -> list[str]:
    """The lines of ``path`` a reader would run: code in Markdown, everything elsewhere."""
    text = path.read_text()
    if path.suffix != ".md":
        return text.replace("\\\n", " ").splitlines()
    blocks = [m.group(1) for m in FENCE.finditer(text)]
    blocks += SPAN.findall(FENCE.sub("", text))
    return [line for block in blocks for line in block.replace("\\\n", " ").splitlines()]


def documented() -> list[tuple[str, str, str, list[str]]]:
    """(file, program, task name as written, its --options) for every command found."""
    files = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
             *sorted((ROOT / "docs" / "ci").iterdir()), *sorted((ROOT / "scripts").glob("*.sh")),
             ROOT / ".ci" / "run"]
    found = []
    for path in files:
        for line in code_of(path):
            line = line.split(" # ")[0] if path.suffix == ".md" else re.sub(r"(^|\s)#.*", "",
                                                                             line)
            # a message rocelab printed: the invoke commands it suggests, names only
            output = line.lstrip().startswith("rocelab: ")
            for m in COMMAND.finditer(line):
                prog, name, rest = m.groups()
                if not re.match(r"[a-z]", name) or (output and prog == "rocelab"):
                    continue  # --list, --help, a version pin ("@"), words of a message
                words = rest.split()
                if prog == "rocelab" and words and re.fullmatch(r"[a-z][a-z-]*", words[0]):
                    spaced = dotted(["rocelab", name, words[0]])
                    if spaced[1] != name:  # the spaced form: rocelab lab up
                        name, rest = spaced[1], rest.split(words[0], 1)[1]
                own = SEPARATOR.split(rest, 1)[0]
                found.append((str(path.relative_to(ROOT)), prog, name.rstrip(").,:"),
                              [] if output else OPTION.findall(own)))
    return found


def names(written: str) -> list[str]:
    """``show.a\\|b`` -> show.a, show.b."""
    first, *others = written.split("\\|")
    prefix = first.rsplit(".", 1)[0] + "." if "." in first else ""
    return [first, *(o if "." in o else prefix + o for o in others)]


def test_the_docs_mention_commands_at_all():
    progs = {(p, n) for _, p, n, _ in documented()}
    assert ("invoke", "check") in progs and ("rocelab", "lint") in progs
    assert ("invoke", "lab.up") in progs and ("invoke", "show.pfc-counters") in progs


@pytest.mark.parametrize("where, prog, written, options", documented(),
                         ids=lambda v: v if isinstance(v, str) else None)
def test_every_documented_command_exists_with_its_options(where, prog, written, options):
    namespace = tasks.ns if prog == "invoke" else program.namespace
    for name in names(written):
        if "*" in name or "<" in name:  # a family of tasks: its collection exists
            collection = name.split(".", 1)[0]
            assert collection in namespace.collections, (where, prog, written)
            continue
        assert name in namespace.task_names or any(
            name in aliases for aliases in namespace.task_names.values()), \
            f"{where}: {prog} {name}: no such task"
        task = namespace[name]
        known = {f"--{n}" for arg in task.get_arguments() for n in arg.names if len(n) > 1}
        known |= {"--help", "--list"}
        assert set(options) <= known, f"{where}: {prog} {name}: {set(options) - known}"
