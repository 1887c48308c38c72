"""Error messages of the configuration: pydantic's validation errors as one
``<file>: <dotted.key>: <what was expected> (got <value>)`` line per problem, in config-file
words (unknown keys list the allowed ones; a case's own parameter errors are named under
``case.parameters``).
"""
from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ValidationError

from dycore.config.schema import _CASE_PARAMETERS_ERROR, _CONFIG_ERROR, Config

__all__ = ["format_errors"]


def _short_repr(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _allowed_keys(loc: tuple) -> list[str] | None:
    """Field names of the model at ``loc`` (a key path into :class:`Config`), if it is a model."""
    model: Any = Config
    for part in loc:
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            return None
        field = model.model_fields.get(part)
        if field is None:
            return None
        model = field.annotation
    if isinstance(model, type) and issubclass(model, BaseModel):
        return list(model.model_fields)
    return None


def _expected(error: dict) -> str:
    """The 'what was expected' part of one pydantic error, in config-file words."""
    msg = error["msg"]
    for prefix in ("Input should be ", "Value error, ", "Assertion failed, "):
        if msg.startswith(prefix):
            msg = msg[len(prefix):]
            break
    else:
        return msg
    return msg if prefix == "Value error, " and msg.startswith("expected") else "expected " + msg


def format_errors(exc: ValidationError, source: str) -> list[str]:
    """One ``<file>: <dotted.key>: <expected> (got <value>)`` line per validation error."""
    lines = []
    for error in exc.errors(include_url=False):
        loc = tuple(str(part) for part in error["loc"])
        ctx = error.get("ctx") or {}
        if error["type"] == _CASE_PARAMETERS_ERROR:
            for sub in ctx["errors"]:
                key = ".".join(loc + ("parameters",) + tuple(str(p) for p in sub["loc"]))
                if sub["type"] == "extra_forbidden":
                    what = (f"unknown parameter of case {ctx['case']}; expected one of "
                            f"{', '.join(ctx['allowed'])}")
                else:
                    what = _expected(sub)
                lines.append(f"{source}: {key}: {what} (got {_short_repr(sub['input'])})")
            continue
        if error["type"] == _CONFIG_ERROR:
            for sub_key, message, value in ctx["problems"]:
                key = ".".join(loc + (sub_key,))
                lines.append(f"{source}: {key}: {message} (got {_short_repr(value)})")
            continue
        key = ".".join(loc) if loc else "(top level)"
        if error["type"] in ("model_type", "model_attributes_type", "dict_type"):
            what = "expected a mapping of keys"
        elif error["type"] == "extra_forbidden":
            allowed = _allowed_keys(loc[:-1])
            what = "unknown key" + (f"; expected one of {', '.join(allowed)}" if allowed else "")
        else:
            what = _expected(error)
        lines.append(f"{source}: {key}: {what} (got {_short_repr(error['input'])})")
    return lines
