"""The element-loop contract: one description of a loop over elements, from which
:mod:`dycore.assembly.codegen` writes the CPU ``prange`` driver and the ``@cuda.jit`` kernel.

A loop is its element function and that function's arguments, in the function's order, each
declared as one of

=============  ===================================================================================
``Gather``     per element through the connectivity: ``local[i, ...] = source[tets[e, i], ...]``
``Row``        per element, one row of an element array: ``local[...] = source[e, ...]``
``Table``      the same array for every element: a module global or a kernel parameter
``Scalar``     a scalar kernel parameter passed through
``Literal``    a constant expression of the generated module (e.g. ``EIG_JACOBI``)
``Diagonal``   a (3,3) tensor with three scalar kernel parameters on its diagonal
``Scratch``    per-thread work storage (``cuda.local.array`` / ``np.empty`` of a literal shape)
``Output``     the function's output, with its scatter rules (below)
=============  ===================================================================================

plus an optional ``Result`` (the function's return value, stored per element).

Scatter rules of an :class:`Output` (the GPU kernel takes a ``mode`` parameter when a loop has
more than one):

- :data:`ELEMENTS` write per element into an element array (``(nele, *shape)``); the deterministic
  assembly then sums the element arrays by nonzero / node in element order
  (``gather_blocks``: the CPU's order, so the same bits on every backend);
- :data:`ATOMIC` increment CSR/BCSR ``values`` through the element→nonzero lookup table (matrix
  outputs) and nodal vectors through the connectivity, with atomic adds;
- :data:`SEARCH` as ATOMIC, the nonzero found by binary search (:func:`csr_find`) in the row.

An output may declare its block sparsity (``Output.nonzeros``: the entries of one block that the
element function can make nonzero; default every entry). ATOMIC and SEARCH add only those
entries; the others must be exactly 0.0 in every element array (a test of each declared pattern
checks the element function on random elements), so that skipping them changes no value: the
target is zero-filled before an atomic assembly, and a skipped entry stays 0.0, as the sum of
exact zeros would be. ELEMENTS and the gather still write and sum every entry.

The CPU driver always uses ELEMENTS (it has no atomics); the gather is the assembler's.
Array shapes in a spec are literal integers, so the generated source has literal local-array
shapes (``cuda.local.array((11, 4), float64)``), as numba-cuda requires.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from itertools import product
from math import prod

__all__ = ["ATOMIC", "ELEMENTS", "SEARCH", "MODE_NAMES", "Gather", "Row", "Table", "Scalar",
           "Literal", "Diagonal", "Scratch", "Output", "Result", "ElementLoop", "LoopTable"]

ATOMIC = 0    #: increment through the element→nonzero lookup (atomic adds)
ELEMENTS = 1  #: write per element (then the deterministic fixed-order gather)
SEARCH = 2    #: increment at the position found by binary search (atomic adds)
MODE_NAMES = {ATOMIC: "ATOMIC", ELEMENTS: "ELEMENTS", SEARCH: "SEARCH"}


@dataclass(frozen=True)
class Gather:
    """Nodal array ``source`` (nnodes, *shape[1:]) gathered per element; ``shape[0] == 4``."""
    name: str
    shape: tuple
    source: str


@dataclass(frozen=True)
class Row:
    """Row ``e`` of the element array ``source`` (nele, *shape)."""
    name: str
    shape: tuple
    source: str


@dataclass(frozen=True)
class Table:
    """The same array of ``shape`` for every element: the module global ``source`` when
    ``module_global`` (e.g. ``QUAD_N``) or else the kernel parameter ``source``."""
    name: str
    shape: tuple
    source: str
    module_global: bool = True


@dataclass(frozen=True)
class Scalar:
    """A scalar kernel parameter ``source`` (default: the argument's name)."""
    name: str
    source: str = ""

    @property
    def param(self) -> str:
        return self.source or self.name


@dataclass(frozen=True)
class Literal:
    """A constant expression ``expr`` of the generated module passed as the argument."""
    name: str
    expr: str


@dataclass(frozen=True)
class Diagonal:
    """A (3,3) tensor, zero but for the diagonal, which holds the kernel parameters ``params``."""
    name: str
    params: tuple


@dataclass(frozen=True)
class Scratch:
    """Work storage of ``shape`` (float64), one per thread."""
    name: str
    shape: tuple


@dataclass(frozen=True)
class Output:
    """An output of ``shape`` = (4, *block) (``kind="vector"``: node i), (4, 4, *block)
    (``kind="matrix"``: row i, column j) or any shape (``kind="element"``: stored only).

    ``elements`` names the element-array parameter (nele, *shape) of the ELEMENTS rule,
    ``target`` the CSR/BCSR ``values`` or nodal-vector parameter of ATOMIC/SEARCH;
    ``optional`` outputs of ATOMIC/SEARCH are added only when the kernel's ``want_<name>``
    flag is true.

    ``nonzeros`` declares the block sparsity: the index tuples into :attr:`block` of the entries
    the element function can make nonzero, in row-major order (``None``: every entry). ATOMIC
    and SEARCH add only these; every other entry of every element's block must be exactly 0.0
    (tests/unit/test_block_sparsity.py checks each declared pattern against its element
    function). ELEMENTS still stores the whole block.

    Raises
    ------
    ValueError
        Naming the output: ``nonzeros`` on an output without a block (``kind="element"`` or a
        scalar block), an entry of the wrong length or outside the block, a repeated entry or
        entries not in row-major order, or an empty pattern.
    """
    name: str
    shape: tuple
    kind: str
    elements: str
    target: str = ""
    optional: bool = False
    nonzeros: tuple | None = None

    def __post_init__(self):
        if self.nonzeros is None:
            return
        blk = self.block
        if not blk:
            raise ValueError(f"output {self.name}: nonzeros needs a matrix or vector output "
                             f"with a block (kind={self.kind!r}, shape={self.shape})")
        entries = [tuple(t) for t in self.nonzeros]
        if not entries:
            raise ValueError(f"output {self.name}: nonzeros is empty (an output that is always "
                             "zero is not an output)")
        for t in entries:
            if len(t) != len(blk) or not all(isinstance(i, int) and 0 <= i < n
                                               for i, n in zip(t, blk)):
                raise ValueError(f"output {self.name}: nonzeros entry {t} is not an index of "
                                 f"the block {blk}")
        if entries != sorted(set(entries)):
            raise ValueError(f"output {self.name}: nonzeros {entries} must be distinct and in "
                             "row-major order")

    @property
    def block(self) -> tuple:
        """Shape of one block: what one nonzero (matrix) or one node (vector) receives."""
        return {"vector": self.shape[1:], "matrix": self.shape[2:]}.get(self.kind, ())

    @cached_property
    def block_size(self) -> int:
        """Number of values in one block (1 for a scalar matrix or vector)."""
        return prod(self.block)

    @cached_property
    def scattered(self) -> tuple:
        """The block entries ATOMIC and SEARCH add: :attr:`nonzeros`, or every index tuple of
        :attr:`block` in row-major order (``((),)`` for a scalar block)."""
        if self.nonzeros is not None:
            return tuple(tuple(t) for t in self.nonzeros)
        return tuple(product(*(range(n) for n in self.block)))

    @property
    def dense(self) -> bool:
        """Whether ATOMIC and SEARCH add every entry of the block (no declared sparsity)."""
        return self.nonzeros is None or len(self.nonzeros) == self.block_size


@dataclass(frozen=True)
class Result:
    """The element function's return value stored as ``target[e]`` (``dtype`` of ``target``)."""
    target: str


@dataclass(frozen=True)
class ElementLoop:
    """One loop over elements.

    Attributes
    ----------
    name : str — the loop's name (the kernel's, and ``<name>_elements`` for the CPU driver)
    function : str — the element function's name in ``LoopTable.module``; ``""``: no function
        (the loop only gathers: its one Gather is written to its one Output)
    args : tuple — the element function's arguments in its order (names = its parameter names)
    result : Result or None
    modes : tuple of ATOMIC/ELEMENTS/SEARCH — the GPU kernel's scatter rules
    flat : bool — the GPU kernel takes output arrays flattened to 1-D (one index expression for
        any block layout; the CPU driver takes them shaped (nele, *shape))
    cpu_views : bool — the CPU driver passes ``Row`` sources and ``ELEMENTS`` outputs as views
        ``a[e]`` and ``Table`` parameters as they are, instead of copying into local storage
    doc : str — one line for the generated docstrings
    """
    name: str
    function: str
    args: tuple
    result: Result | None = None
    modes: tuple = (ELEMENTS,)
    flat: bool = True
    cpu_views: bool = False
    doc: str = ""

    def __post_init__(self):
        names = [a.name for a in self.args]
        if len(set(names)) != len(names):
            raise ValueError(f"loop {self.name}: argument names repeat: {names}")
        if not set(self.modes) <= {ATOMIC, ELEMENTS, SEARCH} or ELEMENTS not in self.modes:
            raise ValueError(f"loop {self.name}: modes {self.modes} must include ELEMENTS and "
                             "use only ATOMIC, ELEMENTS, SEARCH")
        if len(self.modes) > 1 and any(o.kind == "element" for o in self.outputs):
            raise ValueError(f"loop {self.name}: kind='element' outputs can only be stored")
        for a in self.args:
            if isinstance(a, Gather) and a.shape[0] != 4:
                raise ValueError(f"loop {self.name}: Gather {a.name} shape must start with 4")
        if not self.function and (len(self.of(Gather)) != 1 or len(self.outputs) != 1):
            raise ValueError(f"loop {self.name}: a loop without a function has one Gather "
                             "and one Output")

    def of(self, kind) -> list:
        """The arguments of one kind, in order."""
        return [a for a in self.args if isinstance(a, kind)]

    @cached_property
    def outputs(self) -> tuple:
        return tuple(self.of(Output))

    @cached_property
    def uses_tets(self) -> bool:
        return bool(self.of(Gather)) or len(self.modes) > 1

    @cached_property
    def count_source(self) -> str:
        """The parameter whose first dimension is the number of elements."""
        return "tets" if self.uses_tets else self.of(Row)[0].source

    def inputs(self) -> list[str]:
        """Kernel parameters that carry inputs, in order (connectivity first)."""
        out = ["tets"] if self.uses_tets else []
        for a in self.args:
            if isinstance(a, (Gather, Row)) or (isinstance(a, Table) and not a.module_global):
                if a.source not in out:
                    out.append(a.source)
            elif isinstance(a, Scalar):
                out.append(a.param)
            elif isinstance(a, Diagonal):
                out.extend(a.params)
        return out

    def check_inputs(self, args: dict, nele: int, nnodes: int, partial: bool = False) -> None:
        """Check input arrays against this loop's spec before a launch.

        Parameters
        ----------
        args : dict
            Parameter name -> array (or scalar) as given to the driver / kernel.
        nele, nnodes : int
            The mesh's element and node counts.
        partial : bool
            Check only the inputs present in ``args`` (a builder checking its fixed arrays);
            otherwise every input of :meth:`inputs` must be there.

        Raises
        ------
        ValueError
            Naming the loop and the parameter: a missing input, or an array whose shape is not
            the spec's: ``tets`` (nele, 4); a ``Gather`` source (nnodes, *shape[1:]); a ``Row``
            source (nele, *shape); a ``Table`` parameter ``shape``.
        """
        want = {"tets": (nele, 4)} if self.uses_tets else {}
        for a in self.args:
            if isinstance(a, Gather):
                want[a.source] = (nnodes, *a.shape[1:])
            elif isinstance(a, Row):
                want[a.source] = (nele, *a.shape)
            elif isinstance(a, Table) and not a.module_global:
                want[a.source] = tuple(a.shape)
        for p in self.inputs():
            if p not in args:
                if partial:
                    continue
                raise ValueError(f"loop {self.name}: input {p!r} missing")
            shape = getattr(args[p], "shape", None)
            if p in want and (shape is None or tuple(shape) != want[p]):
                raise ValueError(f"loop {self.name}: input {p!r} has shape {shape}, the spec "
                                 f"wants {want[p]}")

    def cpu_params(self) -> list[str]:
        """Parameters of the CPU driver: inputs, element arrays, result."""
        return (self.inputs() + [o.elements for o in self.outputs]
                + ([self.result.target] if self.result else []))

    @cached_property
    def gpu_param_kinds(self) -> tuple:
        """``(parameter, kind)`` for every GPU kernel parameter: kind ``"scalar"`` (Scalar and
        Diagonal parameters, ``mode``, ``want_*`` flags), ``"flat"`` (an output array passed
        flattened: ``flat`` loops) or ``"array"``."""
        scalars = {"mode"} | {f"want_{o.name}" for o in self.outputs}
        for a in self.args:
            if isinstance(a, Scalar):
                scalars.add(a.param)
            elif isinstance(a, Diagonal):
                scalars.update(a.params)
        flat = ({o.elements for o in self.outputs} | {o.target for o in self.outputs}
                if self.flat else set())
        return tuple((p, "scalar" if p in scalars else "flat" if p in flat else "array")
                     for p in self.gpu_params())

    def gpu_params(self) -> list[str]:
        """Parameters of the GPU kernel: inputs, scatter tables and flags, targets, element
        arrays, result."""
        p = self.inputs()
        if ATOMIC in self.modes:
            p.append("lookup")
        if SEARCH in self.modes:
            p += ["indptr", "indices"]
        if len(self.modes) > 1:
            p.append("mode")
            p += [f"want_{o.name}" for o in self.outputs if o.optional]
            p += [o.target for o in self.outputs]
        p += [o.elements for o in self.outputs]
        if self.result:
            p.append(self.result.target)
        return p


@dataclass(frozen=True)
class LoopTable:
    """A table of loops and where its generated source lives.

    Attributes
    ----------
    name : str — the table's name (``dycore.assembly.loops.ASSEMBLY`` ...)
    module : str — the module holding the element functions (imported by the generated code)
    imports : tuple of str — extra import lines of the generated modules (module globals that
        Table/Literal arguments name)
    loops : tuple of ElementLoop
    cpu_path, gpu_path : str — the generated files, relative to the repository root (``""``:
        none of that kind, e.g. for kernels checked against direct CPU calls)
    """
    name: str
    module: str
    loops: tuple
    cpu_path: str
    gpu_path: str
    imports: tuple = field(default=())

    def __getitem__(self, name: str) -> ElementLoop:
        for loop in self.loops:
            if loop.name == name:
                return loop
        raise KeyError(f"{self.name}: no loop {name!r} (have {[x.name for x in self.loops]})")
