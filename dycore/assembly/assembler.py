"""The one Assembler: element loops of :data:`dycore.assembly.loops.ASSEMBLY` run on a backend
and assembled into CSR/BCSR ``values`` and nodal vectors.

It is written against the members ``xp``, ``to_device``, ``to_host``, ``zeros``, ``assembly``
(``"deterministic"``: element arrays + gather by nonzero in element order, the CPU's order and
the same bits everywhere; ``"atomic"``: atomic adds, GPU only), ``launch_loop``, ``gather`` and
``fill`` of :class:`dycore.backend.protocol.Backend` (shapes and contracts there).

Every method returns arrays owned by the assembler (overwritten by the next call of the same
method, or fresh for the mesh-only operators). Stage names in ``timers``: ``integrate <op>`` and
``assemble <op>`` (deterministic) or ``integrate+assemble <op> (atomic)``.
"""
from __future__ import annotations

import numpy as np

from dycore.assembly.loop_spec import ATOMIC, ELEMENTS, SEARCH
from dycore.assembly.loops import ASSEMBLY

__all__ = ["Assembler"]


class Assembler:
    """Element integration and assembly on one backend (see the module docstring).

    Parameters
    ----------
    backend : CPUBackend or GPUBackend (the protocol above)
    mesh : Mesh; sparsity : Sparsity of ``mesh``; timers : StageTimers

    Raises
    ------
    ValueError
        Naming the loop and the parameter, when the mesh's arrays (when built) or an
        operator's inputs (when run) do not have the shapes the loop's spec declares
        (:meth:`~dycore.assembly.loop_spec.ElementLoop.check_inputs`).
    """

    def __init__(self, backend, mesh, sparsity, timers):
        b = self.b = backend
        self.timers = timers
        self.nele, self.n, self.nnz = mesh.nele, mesh.nnodes, sparsity.nnz
        dev = b.to_device
        self.common = {
            "tets": dev(mesh.tets.astype(np.int32)),
            "coords": dev(mesh.coords.astype(np.float64)),
        }
        self.deterministic = b.assembly == "deterministic"
        # the scatter tables of the ATOMIC and SEARCH rules (GPU kernels take them in any mode)
        self.common.update(lookup=dev(sparsity.lookup.astype(np.int32)),
                           indptr=dev(sparsity.indptr.astype(np.int32)),
                           indices=dev(sparsity.indices.astype(np.int32)))
        #: contribution maps of the deterministic gather: matrix outputs by nonzero, vectors
        #: by node
        self.maps = {"matrix": (dev(sparsity.contrib_ptr), dev(sparsity.contrib)),
                     "vector": (dev(sparsity.node_contrib_ptr), dev(sparsity.node_contrib))}
        self._results: dict = {}    # det J of every element, one array per loop
        self._loops = {loop.name: loop for loop in ASSEMBLY.loops}
        for loop in ASSEMBLY.loops:     # the mesh's arrays against every loop's spec
            loop.check_inputs(self.common, self.nele, self.n, partial=True)
        self._ele: dict = {}     # element arrays, shared by shape (written before every read)
        self._out: dict = {}     # assembled arrays of the per-step operators, by key

    # -- buffers ------------------------------------------------------------------------------
    def element_array(self, loop: str, output: str):
        """The element array (nele, *shape) the last ELEMENTS run of ``loop`` wrote
        ``output`` to."""
        shape = next(o.shape for o in ASSEMBLY[loop].outputs if o.name == output)
        return self._ele[(self.nele, *shape)]

    def _elements(self, o):
        key = (self.nele, *o.shape)
        if key not in self._ele:
            self._ele[key] = self.b.zeros(key)
        return self._ele[key]

    def _target(self, key, o, fresh):
        size = (self.nnz if o.kind == "matrix" else self.n) * o.block_size
        if fresh:
            return self.b.zeros(size)
        if key not in self._out:
            self._out[key] = self.b.zeros(size)
        return self._out[key]

    # -- the one loop runner ----------------------------------------------------------------------
    def _run(self, name, stage, inputs, keys=None, want=None, search=False, result=None):
        """Run loop ``name`` and assemble its outputs.

        keys : dict output name -> buffer key of the assembled array (None: fresh arrays);
        want : dict output name -> bool (default all); result : the array of the loop's Result
        (default: the loop's own det J array). Returns dict output name -> flat assembled
        array (or None)."""
        loop = self._loops[name]
        args = dict(self.common, **inputs)
        loop.check_inputs(args, self.nele, self.n)
        outs = {}
        for o in loop.outputs:
            w = want.get(o.name, True) if want else True
            key = keys.get(o.name) if keys else None
            outs[o.name] = self._target(key, o, key is None) if w else None
            args[o.elements] = self._elements(o)
            if o.target:
                args[o.target] = outs[o.name] if w else args[o.elements]
                args[f"want_{o.name}"] = w
        if loop.result:
            if result is None:          # each loop its own (loops may run on two streams)
                if name not in self._results:
                    self._results[name] = self.b.zeros(self.nele)
                result = self._results[name]
            args[loop.result.target] = result
        if self.deterministic or len(loop.modes) == 1:
            with self.timers(f"integrate {stage}"):
                self.b.launch_loop(loop, ELEMENTS, args)
            with self.timers(f"assemble {stage}"):
                for o in loop.outputs:
                    if outs[o.name] is not None:
                        ptr, contrib = self.maps[o.kind]
                        self.b.gather(ptr, contrib, args[o.elements], outs[o.name], o.block_size)
        else:
            with self.timers(f"integrate+assemble {stage} (atomic)"):
                # zero-filled before every atomic assembly: the block entries an output does
                # not scatter (Output.nonzeros) stay 0.0 even in a buffer reused and rewritten
                # since (the no-normal-flow rotation writes full 3x3 blocks)
                for o in loop.outputs:
                    if outs[o.name] is not None:
                        self.b.fill(outs[o.name], 0.0)
                self.b.launch_loop(loop, SEARCH if search else ATOMIC, args)
        return outs

    # -- the operators ------------------------------------------------------------------------
    def tracer(self, name, u_nl, c_old, src, sigma, c_ref, kdiag, dt_theta, want_matrix=True,
               search=False):
        """Tracer matrix values (nnz,) and rhs (n,) (:func:`tracer_element`); values is None
        when ``want_matrix`` is false. ``search=True`` (atomic mode only) finds each nonzero by
        binary search in the CSR row instead of the lookup table (for benchmarks).

        Inputs: u_nl (n,3) [m/s]; c_old, src, sigma, c_ref (n,); kdiag: diffusivity diagonal
        [m²/s]; dt_theta = Δt·θ [s]."""
        o = self._run("tracer", f"tracer {name}",
                      dict(u_nl=u_nl, c_old=c_old, src=src, sigma=sigma, c_ref=c_ref,
                           kxx=kdiag[0], kyy=kdiag[1], kzz=kdiag[2], dt_theta=dt_theta),
                      keys={"mat": f"tracer_matrix_{name}", "rhs": f"tracer_rhs_{name}"},
                      want={"mat": want_matrix}, search=search)
        return o["mat"], o["rhs"]

    def momentum(self, u_nl, u_old, buoy, p, sigma, u_ref, nudiag, f_cor, dt_theta):
        """Momentum BCSR values (nnz,3,3) and rhs (n,3) (:func:`momentum_element`)."""
        o = self._run("momentum", "momentum",
                      dict(u_nl=u_nl, u_old=u_old, buoy=buoy, p=p, sigma=sigma,
                           u_ref0=u_ref[0], u_ref1=u_ref[1], u_ref2=u_ref[2], nuxx=nudiag[0],
                           nuyy=nudiag[1], nuzz=nudiag[2], f_cor=f_cor, dt_theta=dt_theta),
                      keys={"mat": "big_m", "rhs": "mom_rhs"})
        return o["mat"].reshape(self.nnz, 3, 3), o["rhs"].reshape(self.n, 3)

    def divergence(self):
        """C volume-term values (nnz,3) [m²] and det J of every element (nele,)."""
        o = self._run("divergence", "divergence C", {})
        return o["mat"].reshape(self.nnz, 3), self._results["divergence"].copy()

    def stabilisation(self):
        """K_p values (nnz,) and the per-element status (nele,) int64 (0 ok)."""
        status = self.b.zeros(self.nele, np.int64)
        o = self._run("stabilisation", "stabilisation K_p", {}, result=status)
        return o["mat"], status

    def lumped_mass(self):
        """Lumped mass ∫Nᵢ per node, (n,) [m³]."""
        return self._run("lumped_mass", "lumped mass", {})["vec"]
