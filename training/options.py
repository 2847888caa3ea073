"""Command-line options shared by the training, evaluation and benchmark commands."""

from __future__ import annotations

import dataclasses


def add_setting_option(parser) -> None:
    """The ``--setting NAME=VALUE`` option (repeatable) of the commands that simulate."""
    parser.add_argument(
        "--setting",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="override a dynamics setting by its option name, e.g. metric_floor=0.03"
        " (repeatable; neurok_core.dynamics.settings.OPTION_NAMES)",
    )


def parse_settings(items: list[str]) -> dict:
    """``NAME=VALUE`` strings as DynamicsSettings overrides by option name (``OPTION_NAMES``;
    VALUE read as that option's type), for ``DynamicsSettings.with_overrides``; an unknown name
    stops the command with a message."""
    from neurok_core.dynamics.settings import DEFAULT_SETTINGS

    return parse_values(DEFAULT_SETTINGS.option_values(), items, "--setting")


def _number_or_text(value: str):
    for kind in (int, float):
        try:
            return kind(value)
        except ValueError:
            pass
    return value


def parse_fields(cls, items: list[str], option: str) -> dict:
    """``NAME=VALUE`` strings as overrides of the dataclass ``cls``'s fields (see
    :func:`parse_values`)."""
    defaults = {f.name: getattr(cls(), f.name) for f in dataclasses.fields(cls)}
    return parse_values(defaults, items, option)


def parse_values(defaults: dict, items: list[str], option: str) -> dict:
    """``NAME=VALUE`` strings with NAME one of ``defaults`` (VALUE read as the type of that
    default; for a default of None, ``none``, an int, a float or else the text); an unknown
    name stops the command with a message naming ``option``."""
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or name not in defaults:
            raise SystemExit(
                f"{option} {item!r}: expected NAME=VALUE, NAME one of {', '.join(defaults)}"
            )
        default = defaults[name]
        if default is None:  # an optional field: none, a number or a word
            out[name] = None if value.lower() == "none" else _number_or_text(value)
        elif isinstance(default, bool):
            out[name] = value.lower() in ("1", "true", "yes")
        else:
            out[name] = type(default)(value)
    return out


def add_cloth_step_option(parser) -> None:
    """``--cloth-step``: which step a cloth is simulated with (``RigSettings.cloth_step``)."""
    from neurok_core.rigspace.cloth_simulate import CLOTH_STEPS
    from neurok_core.rigspace.space import RigSettings

    parser.add_argument(
        "--cloth-step",
        choices=sorted(CLOTH_STEPS),
        default=RigSettings.cloth_step,
        help="a cloth's step (default: %(default)s)",
    )
