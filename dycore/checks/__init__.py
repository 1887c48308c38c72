"""The checking wing: runs that check the model (regression runs and ``dycore validate`` here,
in :mod:`dycore.checks.validate`; timing in :mod:`dycore.bench`). It sits above the time loop and may
import it; the comparisons it uses (:mod:`dycore.diagnostics.regression`) do not."""
from dycore.checks.regression import REFERENCE_CONFIG, run_case

__all__ = ["REFERENCE_CONFIG", "run_case"]
