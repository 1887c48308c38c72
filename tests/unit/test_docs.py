"""The key reference in docs/ is generated from the pydantic models: it must not drift."""
from pathlib import Path

from dycore.config import config_reference_markdown


def test_config_reference_is_up_to_date():
    doc = Path(__file__).resolve().parents[2] / "docs" / "config-reference.md"
    assert doc.read_text().rstrip("\n") == config_reference_markdown().rstrip("\n"), \
        "docs/config-reference.md is stale: run `make docs`"
