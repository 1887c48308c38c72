"""Reference generation: the key reference (Markdown, ``dycore config --reference``,
docs/config-reference.md) and the JSON Schema (``dycore config --schema``,
docs/config-schema.json), both generated from the models of :mod:`dycore.config.schema`.
"""
from __future__ import annotations

import re
import typing
from typing import Any, Literal

import annotated_types
from pydantic import BaseModel

from dycore.config.schema import CaseConfig, Config
from dycore.errors import ConfigError

__all__ = ["config_reference_markdown", "config_json_schema"]


def _type_text(field) -> str:
    annotation = field.annotation
    if typing.get_origin(annotation) is Literal:
        text = " \\| ".join(f'"{arg}"' for arg in typing.get_args(annotation))
    elif typing.get_origin(annotation) is dict:
        text = "mapping"
    elif typing.get_origin(annotation) is list:
        (item,) = typing.get_args(annotation)
        choices = typing.get_args(item) if typing.get_origin(item) is Literal else ()
        text = ("list of " + " \\| ".join(f'"{arg}"' for arg in choices) if choices
                else "list")
    else:  # a union such as "float | None": escape its bar for the Markdown table
        text = getattr(annotation, "__name__", str(annotation)).replace(" | ", " \\| ")
    bounds = []
    for item in field.metadata:
        for attr, symbol in (("gt", ">"), ("ge", "≥"), ("lt", "<"), ("le", "≤")):
            if isinstance(item, getattr(annotated_types, attr.capitalize())):
                bounds.append(f"{symbol} {getattr(item, attr):g}")
    return text + (" (" + ", ".join(bounds) + ")" if bounds else "")


def _default_text(value: Any) -> str:
    if isinstance(value, str):
        return f'`"{value}"`'
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, dict):
        return "`{}`" if not value else f"`{value}`"
    if isinstance(value, list):
        return "`[" + ", ".join(str(item) for item in value) + "]`"
    return f"`{value!r}`"


def _section_rows(model: type[BaseModel], prefix: str, defaults: BaseModel | None) -> list[str]:
    rows = []
    for name, field in model.model_fields.items():
        key = f"{prefix}.{name}"
        if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel):
            sub_default = field.get_default(call_default_factory=True)
            rows += _section_rows(field.annotation, key, sub_default)
            continue
        default = (getattr(defaults, name) if defaults is not None
                   else field.get_default(call_default_factory=True))
        description = " ".join((field.description or "").split())
        unit = (field.json_schema_extra or {}).get("unit") if isinstance(
            field.json_schema_extra, dict) else None
        if unit is None:  # a model outside this file (a case's Parameters): "... [unit] ..."
            match = re.search(r"\[([^\]]+)\]", description)
            unit = match.group(1) if match else "-"
            description = re.split(r"(?<=\.)\s", description, maxsplit=1)[0]
        unit = "–" if unit == "-" else unit
        description = description.replace("|", "\\|")
        rows.append(f"| `{key}` | {_type_text(field)} | {_default_text(default)} | {unit} | "
                    f"{description} |")
    return rows


def _case_parameter_rows(case_name: str) -> list[str]:
    """Rows for the default case's own Parameters model (empty if the case cannot be loaded)."""
    try:
        from dycore.cases import load_case

        params_cls = getattr(load_case(case_name), "Parameters", None)
    except (ImportError, ConfigError):
        return []
    if params_cls is None or not params_cls.model_fields:
        return []
    return _section_rows(params_cls, "case.parameters", None)


def config_reference_markdown(*, include_case_parameters: bool = True) -> str:
    """The key reference: one Markdown table per section, generated from the models.

    Columns: key (dotted path), type (with range), default, unit, description. This is the one
    place defaults are documented; the README embeds this output (``dycore config --reference``).
    With ``include_case_parameters`` a last table lists the default case's own parameters (the
    keys allowed under ``case.parameters``), when the case package can be imported.
    """
    parts = ["Every key is optional; unknown keys and non-finite numbers (`.inf`, `.nan`) are "
             "errors. Units: SI; `–` = not a physical quantity.\n"]
    for name, field in Config.model_fields.items():
        model = field.annotation
        title = (model.__doc__ or "").strip().splitlines()[0]
        parts.append(f"### `{name}` — {title}\n")
        parts.append("| key | type | default | unit | description |")
        parts.append("|---|---|---|---|---|")
        # Sections are described from their class defaults, without instantiating them (the
        # case section would import the case package); nested models use their own factories.
        parts.extend(_section_rows(model, name, None))
        parts.append("")
    default_case = CaseConfig.model_fields["name"].default
    rows = _case_parameter_rows(default_case) if include_case_parameters else []
    if rows:
        parts.append(f"### `case.parameters` — parameters of the case {default_case}\n")
        parts.append("| key | type | default | unit | description |")
        parts.append("|---|---|---|---|---|")
        parts.extend(rows)
        parts.append("")
    return "\n".join(parts)


def config_json_schema() -> dict:
    """JSON Schema (draft 2020-12) of a configuration file, from the pydantic models.

    Editors check a YAML file against it (e.g. the YAML language server with a first line
    ``# yaml-language-server: $schema=<path or URL of the schema>``): unknown keys
    (``additionalProperties: false``), types, enumerations and bounds. Checks across keys
    (``mesh.file`` with generator keys, the mesh fitting the domain, ...) and
    ``case.parameters`` (a mapping whose keys depend on the case) are left to
    :func:`load_config`. Each property carries the unit of the key reference as ``unit``
    (a keyword validators ignore).

    Returns
    -------
    dict
        The schema; ``json.dumps`` it (``dycore config --schema``).
    """
    schema = Config.model_json_schema()
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            **schema, "title": "dycore configuration",
            "description": "A dycore YAML configuration file (docs/config-reference.md lists "
                           "every key, default and unit)"}
