"""The project's dtypes and fixed element sizes, in one place.

Every array that crosses a module boundary uses these: ``REAL`` for field values,
coordinates and matrix entries, ``INDEX`` for node/element/nonzero indices.
"""
import numpy as np

__all__ = ["REAL", "INDEX", "NLOC", "DIM", "NFACE_LOC"]

REAL = np.float64   #: floating-point type of every field, coordinate and matrix value
INDEX = np.int32    #: integer type of connectivity, CSR indptr/indices and lookup tables
NLOC = 4            #: nodes per P1 tetrahedron
DIM = 3             #: space dimension
NFACE_LOC = 3       #: nodes per triangular face
