"""The checking wing: runs that check the model (regression runs here; ``dycore validate`` in
:mod:`dycore.validate` with the GPU's bitwise checks of :mod:`dycore.checks.bitwise`, timing in
:mod:`dycore.bench`; every assembly operator with its inputs: :mod:`dycore.checks.operators`). It sits above the time loop and may
import it; the comparisons it uses (:mod:`dycore.diagnostics.regression`) do not."""
from dycore.checks.regression import REFERENCE_CONFIG, run_case

__all__ = ["REFERENCE_CONFIG", "run_case"]
