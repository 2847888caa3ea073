"""What ``neurok`` says about its own arguments: refusals are one line, and docs/cli.md (the
README's reference) names every option ``neurok simulate --help``, ``neurok ik --help`` and
``neurok structure --help`` list."""

import argparse
from pathlib import Path

import numpy as np
import pytest

from neurok_core.cli import build_conditions, main, make_parser

REFERENCE = Path(__file__).resolve().parents[1] / "docs" / "cli.md"  # the README points there


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["simulate", "m.obj", "--out", "a.npz", "--frames", "abc"], "--frames: expected a whole"),
        (["simulate", "m.obj", "--out", "a.npz", "--fps", "x"], "--fps: expected a number"),
        (
            ["simulate", "m.obj", "--out", "a.npz", "--dynamics", "fem"],
            "--dynamics: invalid choice",
        ),
        (["simulate", "m.obj"], "required: --out"),
        (["simulate", "m.obj", "--out", "a.npz", "--frames"], "--frames: expected one argument"),
        (["simulate", "m.obj", "--out", "a.npz", "--no-such-option"], "--no-such-option"),
        ([], "required: command"),
    ],
)
def test_argument_errors_are_one_line(argv, says, capsys):
    """As the command's own refusals (``neurok: error: ...``, exit 2), not the usage block."""
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("neurok: error: ") and says in lines[0], lines[0]
    assert captured.out == ""


@pytest.mark.parametrize("command, least", [("simulate", 20), ("ik", 10), ("structure", 2)])
def test_the_readme_names_every_option(command, least):
    sub = next(a for a in make_parser()._actions if isinstance(a, argparse._SubParsersAction))
    options = {
        option
        for action in sub.choices[command]._actions
        for option in action.option_strings
        if option.startswith("--") and option != "--help"
    }
    assert len(options) > least
    text = REFERENCE.read_text()
    missing = sorted(option for option in options if f"`{option}" not in text)
    assert not missing, f"docs/cli.md does not name {missing}"


TETRAHEDRON = np.array([[0, 1, 2], [0, 1, 3], [0, 2, 3], [1, 2, 3]])  # four vertices' faces


def test_a_conditions_file_keeps_its_frames_unless_a_flag_says_otherwise(tmp_path):
    (tmp_path / "c.json").write_text('{"frames": 7, "fps": 30.0, "mass": 2.0}')
    vertices = np.zeros((4, 3))
    common = ["simulate", "m.obj", "--out", "a.npz", "--conditions", str(tmp_path / "c.json")]
    parser = make_parser()
    from_file = build_conditions(parser.parse_args(common), vertices, TETRAHEDRON)
    assert (from_file.frames, from_file.fps, from_file.mass) == (7, 30.0, 2.0)
    flagged = build_conditions(parser.parse_args([*common, "--frames", "9"]), vertices, TETRAHEDRON)
    assert (flagged.frames, flagged.fps) == (9, 30.0)
    bare = build_conditions(
        parser.parse_args(["simulate", "m.obj", "--out", "a.npz"]), vertices, TETRAHEDRON
    )
    assert (bare.frames, bare.fps, bare.mass, bare.friction, bare.bounciness) == (
        120,
        24.0,
        1.0,
        0.5,
        0.1,
    )  # the defaults docs/cli.md gives


def test_the_contact_flags_reach_the_conditions():
    args = ["simulate", "m.obj", "--out", "a.npz", "--bounciness", "0.7", "--friction", "0.2"]
    made = build_conditions(make_parser().parse_args(args), np.zeros((4, 3)), TETRAHEDRON)
    assert (made.bounciness, made.friction) == (0.7, 0.2)
