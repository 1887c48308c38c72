"""Which configuration differences a restart accepts (dycore/timestepping/continuity.py)."""
from dycore.config import load_config
from dycore.timestepping.continuity import _result_keys

BASE = "configs/mountainwave3d_small.yaml"


def _differ(a: dict, b: dict) -> list[str]:
    ka, kb = _result_keys(load_config(BASE, a)), _result_keys(load_config(BASE, b))
    return [k for k in sorted(set(ka) | set(kb)) if ka.get(k) != kb.get(k)]


def test_the_pressure_method_may_switch_between_cg_direct_and_auto():
    for a, b in (("cg", "auto"), ("cg", "direct"), ("auto", "direct")):
        assert _differ({"solvers": {"pressure": {"method": a}}},
                       {"solvers": {"pressure": {"method": b}}}) == []


def test_what_changes_the_fields_still_differs():
    assert _differ({"solvers": {"pressure": {"rtol": 1e-10}}},
                   {"solvers": {"pressure": {"rtol": 1e-8}}}) == ["solvers.pressure.rtol"]
    assert _differ({}, {"time": {"dt": 5.0}}) == ["time.dt"]
    assert _differ({}, {"time": {"t_end": 999.0}, "output": {"output_interval": 7.0}}) == []
