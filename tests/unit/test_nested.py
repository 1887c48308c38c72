"""dycore.io.nested: a tree of containers with array leaves through an .npz file read with
allow_pickle=False comes back with every array's dtype, shape and bits, every number's value
(doubles that do not print short included), and its containers' types; it refuses leaves it
cannot store and classes that are not dycore's dataclasses."""
from types import SimpleNamespace

import numpy as np
import pytest

from dycore.io.nested import pack, unpack
from dycore.parallel.partition import RankPartition
from dycore.physics.state import State


def _tree():
    rng = np.random.default_rng(3)
    rp = RankPartition(rank=1, nparts=3, owned=np.arange(4, dtype=np.int64),
                       ghosts=np.array([7, 9], np.int64),
                       ghost_owner=np.array([0, 2], np.int32),
                       ghost_layer=np.array([1, 2], np.int8),
                       elements=np.array([2, 5], np.int64),
                       element_owned=np.array([True, False]),
                       local_tets=np.array([[0, 1, 2, 4], [1, 2, 3, 5]], np.int32),
                       send_nodes={0: np.array([1, 2], np.int64), 2: np.array([3], np.int64)},
                       send_layer={0: np.array([1, 2], np.int8), 2: np.array([1], np.int8)})
    state = State(u=rng.standard_normal((6, 3)), p=rng.standard_normal(6),
                  theta_prime=rng.standard_normal(6),
                  q={"q_v": np.zeros(6), "q_c": np.ones(6)}, t=0.1 + 0.2)
    return {"rp": rp, "state": state, "nnodes": 10, "detj_min": np.float64(1 / 3),
            "C": (np.array([0, 2, 3], np.int32), rng.integers(0, 6, 3), rng.random(3),
                  (2, 18), 1),
            "nnf": SimpleNamespace(nodes=np.array([4]), frames=np.eye(3)[None],
                                   fixed=np.array([[True, False, False]])),
            "none": None, "flag": True, "name": "x", "list": [1.5, -0.0, float("inf")],
            "empty": np.zeros((0, 3), np.float32)}


def _same(a, b):
    assert type(a) is type(b) or (isinstance(a, float) and isinstance(b, float)), (a, b)
    if isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            _same(a[k], b[k])
    elif isinstance(a, (tuple, list)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
    elif isinstance(a, SimpleNamespace):
        _same(vars(a), vars(b))
    elif isinstance(a, (RankPartition, State)):
        _same(vars(a), vars(b))
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert a.tobytes() == b.tobytes()
    elif isinstance(a, float):
        assert np.float64(a).tobytes() == np.float64(b).tobytes()
    else:
        assert a == b


def test_a_tree_round_trips_through_an_npz_file(tmp_path):
    tree = _tree()
    path = tmp_path / "t.npz"
    np.savez(path, **pack(tree))
    with np.load(path, allow_pickle=False) as z:
        back = unpack({k: z[k] for k in z.files})
    want = dict(tree, detj_min=float(tree["detj_min"]))     # numpy scalars come back as Python's
    _same(want, back)
    assert back["state"].t == 0.1 + 0.2 and back["list"][1] == 0.0
    assert np.signbit(back["list"][1]) and back["rp"].l2g.tolist() == [0, 1, 2, 3, 7, 9]
    assert sorted(back["rp"].send_nodes) == [0, 2]             # integer keys stay integers


def test_leaves_it_cannot_store_are_named():
    with pytest.raises(TypeError, match=r"obj\['bad'\]\[1\] is a set"):
        pack({"bad": (1, {2})})
    with pytest.raises(TypeError, match=r"obj\['o'\] is an object array"):
        pack({"o": np.array([None, 1], dtype=object)})


def test_only_dycore_dataclasses_are_rebuilt():
    arrays = pack({"s": _tree()["state"]})
    tree = bytes(arrays["tree"]).decode().replace("dycore.physics.state:State",
                                                  "collections:OrderedDict")
    with pytest.raises(ValueError, match="collections:OrderedDict is not one of dycore's"):
        unpack(dict(arrays, tree=np.frombuffer(tree.encode(), np.uint8)))
    tree = bytes(arrays["tree"]).decode().replace("dycore.physics.state:State",
                                                  "dycore.physics.state:TRACERS")
    with pytest.raises(ValueError, match="TRACERS is not a dataclass"):
        unpack(dict(arrays, tree=np.frombuffer(tree.encode(), np.uint8)))
    with pytest.raises(ValueError, match="no 'tree' entry"):
        unpack({"a0": np.zeros(1)})
    with pytest.raises(ValueError, match=r"unknown node \['x'\]"):
        unpack({"tree": np.frombuffer(b'{"x": 1}', np.uint8)})
    with pytest.raises(ValueError, match="array a0 is missing"):
        unpack({"tree": arrays["tree"]})
