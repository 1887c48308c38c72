"""The bell mountain's steady 3-D linear theory (Smith 1980), kept importable here.

The solution belongs to its case: :mod:`dycore.cases.mountainwave3d.linear_theory` (each case
carries its own reference, docs/architecture.md "Adding a case"); this module re-exports it.
"""
from dycore.cases.mountainwave3d.linear_theory import BellMountainWaves, bell_dhdx, bell_height

__all__ = ["BellMountainWaves", "bell_height", "bell_dhdx"]
