"""The checking wing: runs that check the model (regression runs and ``dycore validate`` here,
in :mod:`dycore.checks.validate`, with the GPU's bitwise checks of :mod:`dycore.checks.bitwise`;
every assembly operator with its inputs: :mod:`dycore.checks.operators`; timing in
:mod:`dycore.bench`). It sits above the time loop and may
import it; the comparisons it uses (:mod:`dycore.diagnostics.regression`) do not."""
from dycore.checks.regression import REFERENCE_CONFIG, run_case

__all__ = ["REFERENCE_CONFIG", "run_case"]
