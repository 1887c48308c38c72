"""Reading a configuration: the YAML file (duplicate keys refused, merge keys, a bound on what
aliases expand to), the command line's overrides merged in, and validation by the schema with
every problem reported at once (:mod:`dycore.config.messages`).
"""
from __future__ import annotations

import logging
import typing
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from dycore.config.messages import format_errors
from dycore.config.schema import Config, MeshConfig, TimeConfig
from dycore.errors import ConfigError

__all__ = ["load_config", "default_config", "MAX_YAML_VALUES"]

log = logging.getLogger("dycore")


class _UniqueKeyLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that rejects a key given twice in one mapping."""


#: tag of the YAML 1.1 merge key ``<<`` (``tracer: {<<: *m, preconditioner: jacobi}``)
_MERGE_TAG = "tag:yaml.org,2002:merge"

#: most values a configuration may expand to through aliases (a full one has about 100): a
#: "billion laughs" file of a few hundred bytes is refused here instead of costing minutes and
#: gigabytes in validation (issue 25)
MAX_YAML_VALUES = 100_000


def _construct_unique_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode, deep=False):
    """A mapping whose own keys are unique; merge keys (``<<``) merged as YAML 1.1 says
    (the mapping's own keys win over merged ones)."""
    seen: dict[Any, yaml.Node] = {}
    for key_node, _ in node.value:
        if key_node.tag == _MERGE_TAG:
            continue
        key = loader.construct_object(key_node, deep=deep)
        if isinstance(key, typing.Hashable) and key in seen:
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping", node.start_mark,
                f"found duplicate key {key!r}", key_node.start_mark)
        seen[key] = key_node
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
                                 _construct_unique_mapping)


def _expanded_size(node: yaml.Node, limit: int) -> int:
    """Values (scalars, sequences, mappings) the YAML node graph ``node`` holds once every
    alias is expanded, counted up to just past ``limit``; ValueError for a recursive alias."""
    sizes: dict[int, int] = {}
    active: set[int] = set()

    def size(n: yaml.Node) -> int:
        if id(n) in sizes:
            return sizes[id(n)]
        if id(n) in active:
            raise ValueError(f"line {n.start_mark.line + 1}, column {n.start_mark.column + 1}: "
                             "an alias refers to a collection that contains it (recursive)")
        total = 1
        if isinstance(n, (yaml.SequenceNode, yaml.MappingNode)):
            active.add(id(n))
            children = (n.value if isinstance(n, yaml.SequenceNode)
                        else [c for pair in n.value for c in pair])
            for child in children:
                total += size(child)
                if total > limit:
                    break
            active.discard(id(n))
        sizes[id(n)] = min(total, limit + 1)
        return sizes[id(n)]

    return size(node)


def _load_yaml(text: str, path: Path):
    """The YAML document of ``text`` through :class:`_UniqueKeyLoader`, its size bounded by
    :data:`MAX_YAML_VALUES` before anything is constructed (ConfigError naming ``path``)."""
    loader = _UniqueKeyLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        try:
            n = _expanded_size(node, MAX_YAML_VALUES)
        except ValueError as exc:
            raise ConfigError(f"{path}: {exc}; a configuration is a tree of sections") from None
        if n > MAX_YAML_VALUES:
            raise ConfigError(f"{path}: the YAML expands to more than {MAX_YAML_VALUES:,} values "
                              "through its aliases (*name); a complete configuration has about "
                              "100: refused before reading it")
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _deep_merge(base: dict, overrides: dict) -> dict:
    """``base`` with ``overrides`` applied recursively (dicts merged, other values replaced)."""
    merged = dict(base)
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def load_config(path: str | Path, overrides: dict | None = None) -> Config:
    """Read, merge and validate a YAML configuration file.

    Parameters
    ----------
    path : str or Path
        The YAML file. An empty file means all defaults.
    overrides : dict, optional
        Nested dict (same shape as the file, e.g. ``{"time": {"t_end": 600.0}}``) merged into the
        file's content before validation; used by the command line.

    Returns
    -------
    Config
        The validated configuration; ``config.source_path`` is ``path``.

    Raises
    ------
    ConfigError
        The file is missing or unreadable; its YAML is malformed (message gives file and line);
        its top level is not a mapping; or some values are invalid (one line per problem:
        ``<file>: <dotted.key>: <what was expected> (got <value>)``).
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: configuration file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read configuration file ({exc})") from None
    try:
        data = _load_yaml(text, path)                    # a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"{path}: {where}invalid YAML: {problem}") from None
    if data is None:
        log.warning("notice: %s is empty: every key takes its default (a %d x %d x %d mesh, "
                    "t_end = %g s; `dycore config` prints them all)", path,
                    MeshConfig.model_fields["nx"].default, MeshConfig.model_fields["ny"].default,
                    MeshConfig.model_fields["nz"].default,
                    TimeConfig.model_fields["t_end"].default)
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of sections (case, mesh, physics, time, "
                          f"solvers, backend, output, stability) at the top level, got "
                          f"{type(data).__name__}")
    if overrides:
        data = _deep_merge(data, overrides)
    try:
        config = Config.model_validate(data)
    except ValidationError as exc:
        raise ConfigError("\n".join(format_errors(exc, str(path)))) from None
    config._source_path = path
    return config


def default_config() -> Config:
    """The configuration with every default (what an empty file gives).

    Raises
    ------
    ConfigError
        The default case cannot be loaded (one line per problem, source ``(defaults)``).
    """
    try:
        return Config()
    except ValidationError as exc:
        raise ConfigError("\n".join(format_errors(exc, "(defaults)"))) from None
