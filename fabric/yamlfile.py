"""YAML files users write (clab topologies, NIC settings): strict, bounded, one-line errors.

PyYAML's ``safe_load`` keeps the last of two equal keys without a word, composes nesting by
recursion until Python's stack runs out, accepts integers that ``int()`` then refuses with a
bare ValueError, and lets a few lines of aliases stand for billions of values, which hang
whatever walks or prints them. This loader refuses each of those, and every problem is one
line: ``<file>: line N: <problem>``. Aliases themselves stay allowed: clab files use anchors
and ``<<`` merges.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml
import yaml.reader
from yaml.composer import ComposerError
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from .userinput import MAX_INT_DIGITS, brief

MAX_DEPTH = 50  # a clab file nests about 6 levels deep, a NIC file 3
MAX_VALUES = 100_000  # expanded: every use of an alias counts its whole anchor again
MERGE_TAG = "tag:yaml.org,2002:merge"


class YamlError(ValueError):
    """A file that is not the YAML users may write, phrased as ``file: line N: problem``."""


def read_text(path: str | os.PathLike[str]) -> str:
    """The file's text: UTF-8, as YAML 1.1 and containerlab require, or one line saying where
    it is not."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise YamlError(f"{path}: cannot read: {e.strerror or e}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise YamlError(f"{path}: line {line}: not UTF-8 text (byte 0x{data[e.start]:02x})") \
            from None


def parse(text: str, path: str | os.PathLike[str]) -> Any:
    """Parse one YAML document; *path* only names the source in error messages."""
    loader = None
    try:
        loader = _StrictLoader(text)
        return loader.get_single_data()
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f"line {mark.line + 1}: " if mark else ""
        problem = ", ".join(part for part in (e.context, e.problem) if part)
        raise YamlError(_one_line(f"{path}: {where}invalid YAML: {problem}")) from None
    except yaml.reader.ReaderError as e:
        line = text.count("\n", 0, e.position) + 1
        raise YamlError(f"{path}: line {line}: invalid YAML: control character "
                        f"#x{e.character:04x} is not allowed") from None
    except yaml.YAMLError as e:
        raise YamlError(_one_line(f"{path}: invalid YAML: {e}")) from None
    finally:
        if loader is not None:
            loader.dispose()


def load(path: str | os.PathLike[str]) -> Any:
    """read_text() then parse()."""
    return parse(read_text(path), path)


def _one_line(message: str) -> str:
    return message.replace("\n", "\\n")


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader with a depth bound, an expansion bound, no duplicate keys and no integers
    longer than ``MAX_INT_DIGITS``."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.depth = 0
        self.weights: dict[Node, int] = {}  # composed node -> values it stands for, expanded

    def compose_node(self, parent: Node | None, index: Any) -> Node:
        if self.check_event(yaml.AliasEvent):
            mark = self.peek_event().start_mark
            node = super().compose_node(parent, index)
            if node not in self.weights:  # its anchor is still open: the alias is inside it
                raise ComposerError(None, None, "an alias refers to a node that contains it",
                                    mark)
            return node
        if self.depth >= MAX_DEPTH:
            raise ComposerError(None, None, f"nested deeper than {MAX_DEPTH} levels",
                                self.peek_event().start_mark)
        self.depth += 1
        try:
            node = super().compose_node(parent, index)
        finally:
            self.depth -= 1
        weight = 1 + sum(self.weights[child] for child in _children(node))
        if weight > MAX_VALUES:
            raise ComposerError(None, None, f"this value expands to more than {MAX_VALUES} "
                                "values (each use of an alias counts its anchor again)",
                                node.start_mark)
        self.weights[node] = weight
        return node

    def compose_mapping_node(self, anchor: str | None) -> MappingNode:
        node = super().compose_mapping_node(anchor)
        seen: dict[tuple[str, str], int] = {}  # (tag, text) -> line of its first use
        for key, _ in node.value:
            if not isinstance(key, ScalarNode) or key.tag == MERGE_TAG:
                continue
            if (key.tag, key.value) in seen:
                raise ComposerError(None, None, f"duplicate key {brief(key.value)} (first at "
                                    f"line {seen[key.tag, key.value]}; YAML would keep only "
                                    "the last)", key.start_mark)
            seen[key.tag, key.value] = key.start_mark.line + 1
        return node

    def construct_yaml_int(self, node: ScalarNode) -> int:
        digits = sum(c.isalnum() for c in node.value)
        if digits > MAX_INT_DIGITS:
            raise ConstructorError(None, None, f"an integer of {digits} digits is out of "
                                   "range", node.start_mark)
        return super().construct_yaml_int(node)


_StrictLoader.add_constructor("tag:yaml.org,2002:int", _StrictLoader.construct_yaml_int)


def _children(node: Node) -> list[Node]:
    if isinstance(node, SequenceNode):
        return node.value
    if isinstance(node, MappingNode):
        return [n for pair in node.value for n in pair]
    return []
