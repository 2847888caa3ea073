"""Command-line options shared by the training, evaluation and benchmark commands."""

from __future__ import annotations

import dataclasses


def parse_settings(items: list[str]) -> dict:
    """``NAME=VALUE`` strings as DynamicsSettings overrides (VALUE read as that field's type)."""
    from neurok_core.dynamics.settings import DynamicsSettings

    return parse_fields(DynamicsSettings, items, "--setting")


def _number_or_text(value: str):
    for kind in (int, float):
        try:
            return kind(value)
        except ValueError:
            pass
    return value


def parse_fields(cls, items: list[str], option: str) -> dict:
    """``NAME=VALUE`` strings as overrides of the dataclass ``cls``'s fields (VALUE read as the
    type of that field's default; for a field whose default is None, ``none``, an int, a float
    or else the text); an unknown name stops the command with a message naming ``option``."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or name not in fields:
            raise SystemExit(
                f"{option} {item!r}: expected NAME=VALUE, NAME one of {', '.join(fields)}"
            )
        default = getattr(cls(), name)
        if default is None:  # an optional field: none, a number or a word
            out[name] = None if value.lower() == "none" else _number_or_text(value)
        elif isinstance(default, bool):
            out[name] = value.lower() in ("1", "true", "yes")
        else:
            out[name] = type(default)(value)
    return out
