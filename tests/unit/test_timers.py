"""Stage timers: host-timed stages added to a backend clock's table."""
from pathlib import Path

from dycore.backend.timers import StageTimers

SMALL = Path(__file__).resolve().parents[2] / "configs" / "mountainwave3d_small.yaml"


def test_add_records_stages_timed_elsewhere():
    t = StageTimers()
    t.add("mesh generation", 30.0)
    t.add("mesh generation", 10.0)
    with t("solve"):
        pass
    d = t.as_dict()
    assert d["mesh generation"] == {"calls": 2, "total_ms": 40.0, "mean_ms": 20.0}
    assert list(d) == ["mesh generation", "solve"]
    assert "mesh generation" in t.table()


def test_simulation_table_keeps_the_mesh_generation_stage():
    from dycore.config import load_config
    from dycore.timestepping.simulation import build_simulation

    cfg = load_config(SMALL, {"output": {"progress": False},
                              "mesh": {"nx": 2, "ny": 2, "nz": 2}})
    stages = build_simulation(cfg).timers.as_dict()
    assert stages["mesh generation"]["calls"] == 1
    assert stages["mesh generation"]["total_ms"] > 0.0
    assert list(stages)[0] == "mesh generation"
