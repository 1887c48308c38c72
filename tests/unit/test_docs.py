"""The key reference in docs/ is generated from the pydantic models: it must not drift."""
from pathlib import Path

from dycore.config import config_reference_markdown


def test_config_reference_is_up_to_date():
    doc = Path(__file__).resolve().parents[2] / "docs" / "config-reference.md"
    assert doc.read_text().rstrip("\n") == config_reference_markdown().rstrip("\n"), \
        "docs/config-reference.md is stale: run `make docs`"


def _markdown_files():
    root = Path(__file__).resolve().parents[2]
    files = [root / "README.md", *sorted((root / "docs").rglob("*.md")),
             *sorted((root / "dycore").rglob("*.md")), *sorted((root / "cases").rglob("*.md"))]
    return root, files


def test_relative_links_resolve():
    """Every relative link of README.md, docs/ and the case READMEs names an existing file
    (the mountainwave3d README pointed at dycore/docs/equations.md, which does not exist)."""
    import re

    root, files = _markdown_files()
    assert root / "cases" / "mountainwave3d" / "README.md" in files
    broken, seen = [], 0
    for md in files:
        for target in re.findall(r"\]\(([^)\s]+)\)", md.read_text(encoding="utf-8")):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            seen += 1
            path = target.split("#", 1)[0]
            if not (md.parent / path).exists():
                broken.append(f"{md.relative_to(root)}: {target}")
    assert seen >= 10 and broken == []
