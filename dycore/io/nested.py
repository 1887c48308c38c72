"""Nested containers of arrays as a flat ``{name: ndarray}`` dictionary, and back.

The set-up cache (:mod:`dycore.io.setup_cache`) stores ``.npz`` files read with
``allow_pickle=False``: only plain arrays. What an MPI rank keeps of the set-up (its piece:
:func:`dycore.parallel.piece.rank_piece`) is a tree of dicts (string or integer keys), tuples,
lists, ``SimpleNamespace``s and dataclasses (``RankPartition``, ``Coefficients``, ``State``)
with arrays and numbers at the leaves. :func:`pack` turns such a tree into arrays named
``a0, a1, ...`` plus one ``tree`` array holding the structure as JSON; :func:`unpack` rebuilds
it, every array with its dtype, shape and bits, every number with its value (JSON writes a
float so that it reads back to the same double).

A dataclass is rebuilt from its module and name, and only when that class is one of
``dycore``'s own dataclasses: a cache file cannot make the reader import anything else.
"""
from __future__ import annotations

import dataclasses
import importlib
import json
from types import SimpleNamespace

import numpy as np

__all__ = ["pack", "unpack"]

_TREE = "tree"


def pack(obj) -> dict:
    """Flatten ``obj`` into ``{name: ndarray}`` (see the module docstring).

    Parameters
    ----------
    obj : a tree of dict / tuple / list / SimpleNamespace / dataclass instances with ndarray,
        numpy scalar, int, float, bool, str or None leaves

    Returns
    -------
    dict: ``"a<i>"`` -> the i-th array met (depth first, not copied), ``"tree"`` -> uint8 JSON

    Raises
    ------
    TypeError naming the path of a leaf of another type (an object array included).
    """
    arrays: dict = {}

    def walk(x, path):
        if isinstance(x, np.ndarray):
            if x.dtype == object:
                raise TypeError(f"pack: {path} is an object array")
            name = f"a{len(arrays)}"
            arrays[name] = x
            return {"a": name}
        if isinstance(x, np.generic):
            x = x.item()
        if x is None or isinstance(x, (bool, int, float, str)):
            return {"v": x}
        if isinstance(x, dict):
            return {"d": [[walk(k, f"{path} key"), walk(v, f"{path}[{k!r}]")]
                          for k, v in x.items()]}
        if isinstance(x, (tuple, list)):
            return {"t" if isinstance(x, tuple) else "l":
                    [walk(v, f"{path}[{i}]") for i, v in enumerate(x)]}
        if isinstance(x, SimpleNamespace):
            return {"ns": {k: walk(v, f"{path}.{k}") for k, v in vars(x).items()}}
        if dataclasses.is_dataclass(x) and not isinstance(x, type):
            cls = type(x)
            return {"dc": f"{cls.__module__}:{cls.__qualname__}",
                    "f": {f.name: walk(getattr(x, f.name), f"{path}.{f.name}")
                          for f in dataclasses.fields(x)}}
        raise TypeError(f"pack: {path} is a {type(x).__name__}, not an array, number or "
                        "container")

    tree = walk(obj, "obj")
    arrays[_TREE] = np.frombuffer(json.dumps(tree).encode(), np.uint8)
    return arrays


def _dataclass(name: str):
    module, _, qual = name.partition(":")
    if not (module == "dycore" or module.startswith("dycore.")):
        raise ValueError(f"unpack: class {name} is not one of dycore's")
    cls = importlib.import_module(module)
    for part in qual.split("."):
        cls = getattr(cls, part)
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        raise ValueError(f"unpack: {name} is not a dataclass")
    return cls


def unpack(arrays: dict):
    """The tree :func:`pack` flattened into ``arrays`` (the arrays themselves, not copies).

    Raises
    ------
    ValueError if ``arrays`` has no ``tree`` entry, its tree holds a node of no known kind,
    names an array it lacks, or names a class that is not a dataclass of ``dycore``.
    """
    if _TREE not in arrays:
        raise ValueError("unpack: no 'tree' entry (not written by dycore.io.nested.pack)")
    tree = json.loads(np.asarray(arrays[_TREE], np.uint8).tobytes().decode())

    def build(node):
        if "a" in node:
            if node["a"] not in arrays:
                raise ValueError(f"unpack: array {node['a']} is missing")
            return arrays[node["a"]]
        if "v" in node:
            return node["v"]
        if "d" in node:
            return {build(k): build(v) for k, v in node["d"]}
        if "t" in node:
            return tuple(build(v) for v in node["t"])
        if "l" in node:
            return [build(v) for v in node["l"]]
        if "ns" in node:
            return SimpleNamespace(**{k: build(v) for k, v in node["ns"].items()})
        if "dc" not in node:
            raise ValueError(f"unpack: unknown node {sorted(node)}")
        cls = _dataclass(node["dc"])
        return cls(**{k: build(v) for k, v in node["f"].items()})

    return build(tree)
