"""Train the joint typer (``neurok_core.structure_learned``) on the data generator's joints.

    python -m training.train_joint_typer [--per-family 40] [--seed 7] [--epochs 400]
        [--hidden 64] [--robots NAMES] [--cross-robots]
        [--out neurok_core/weights/structure/joint_typer.npz]

Objects of every articulated family from the generator's training stream of ``--seed``
(``generate.sequence_rng(seed, "train", i)``: none is an evaluation object, whose streams are
"val"), at rest, and the pybullet robots of ``--robots`` (all by default: they are also the
evaluation's robots, so ``--cross-robots`` measures them leave-one-out). For each,
:func:`~neurok_core.structure.find_structure` by geometry alone;
each joint it finds between two parts is labelled from the truth: "fixed" where both parts
lie on one true link (most of their vertices), the true joint's type ("hinge", "slider") where
a true joint joins the two links, else "contact". A network of two hidden ReLU layers is fit
to the features (``structure_learned.joint_features``) by full-batch Adam on the cross-entropy,
each class weighted by its rarity, and saved with the features' means and spreads and its
training joints' standardised features (the reference of what it knows:
``JointTyper.familiar``). A second network, the axis chooser
(``neurok_core.structure_axes``), is fit on each hinge's and slider's candidate directions
against the true axis, and saved with it. About 7 minutes on one CPU core, most of it finding
the structures (10 more with ``--cross-robots``). Evaluate with
``python -m training.eval.structure_eval``.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

NOVELTY = 0.99  # the share of training joints a typer finds familiar (``familiar_set``)
AXIS_NEAR = 20.0  # degrees: an axis example whose nearest candidate is farther is left out


def labelled_joints(case):
    """(features (J, FEATURES), labels (J,) indices into JOINT_TYPES, axis examples) of the
    joints geometry finds between two parts of a :class:`~training.eval.structure_eval.Case`
    (module docstring); an axis example, one for each joint labelled a hinge or a slider: its
    candidates' features (C, F) and their angles (C,) degrees to the true axis."""
    from neurok_core.structure import find_structure
    from neurok_core.structure_axes import candidate_features
    from neurok_core.structure_learned import JOINT_TYPES, structure_features
    from training.eval.structure_eval import _part_links, line_angle

    structure = find_structure(case.vertices, case.faces, learned=False)
    link_of = _part_links(structure, case.links)
    truth = {frozenset((j.parent, j.child)): j for j in case.joints}
    index, features, views = structure_features(case.vertices, structure)
    labels, examples = [], []
    for k, row, view in zip(index, features, views, strict=True):
        j = structure.joints[k]
        a, b = int(link_of[j.part_a]), int(link_of[j.part_b])
        true = truth.get(frozenset((a, b))) if a != b else None
        label = "fixed" if a == b else (true.type if true else "contact")
        labels.append(JOINT_TYPES.index(label))
        if true is not None:
            dirs, x = candidate_features(view, row, true.type)
            examples.append((x, np.array([line_angle(d, true.axis) for d in dirs])))
    return features, np.asarray(labels, dtype=np.int64), examples


def cross_robots(cases, rows, hidden: int, epochs: int, seed: int) -> dict:
    """Leave one robot out: for each robot, a typer fit to every other case, evaluated on
    that robot (``structure_eval``'s figures); the totals over the robots."""
    from training.eval.structure_eval import evaluate_case, summarise

    records = []
    for k, case in enumerate(cases):
        if case.family != "robot":
            continue
        typer = fit_all([r for i, r in enumerate(rows) if i != k], hidden, epochs, seed)
        records.append(evaluate_case(case, typing="learned", typer=typer))
        geometry = evaluate_case(case, typing="geometry")
        got = np.mean([j["truth"] == j["predicted"] for j in records[-1]["joints"]])
        was = np.mean([j["truth"] == j["predicted"] for j in geometry["joints"]])
        print(f"{case.name}: learned {got:.2f}, geometry {was:.2f}", file=sys.stderr)
    return summarise(records)


def fit_all(rows, hidden: int, epochs: int, seed: int):
    """The typer, with its axis chooser, fit to ``labelled_joints``' ``rows``."""
    x = np.concatenate([r[0] for r in rows])
    y = np.concatenate([r[1] for r in rows])
    typer, loss, accuracy = fit(x, y, hidden, epochs, seed)
    typer.axes = fit_axes([e for r in rows for e in r[2]], hidden, epochs, seed)
    return typer


def fit_axes(examples, hidden: int, epochs: int, seed: int):
    """An :class:`~neurok_core.structure_axes.AxisChooser` fit to axis ``examples`` (each
    (candidate features (C, F), angles (C,))): full-batch Adam on the cross-entropy of the
    softmax over each joint's candidates, its target the candidate nearest the true axis, where
    one lies within ``AXIS_NEAR`` degrees of it (a generated hinge across a rod's end turns
    about a random direction no candidate holds)."""
    import torch

    from neurok_core.structure_axes import AxisChooser

    torch.manual_seed(seed)
    examples = [(x, a) for x, a in examples if a.min() <= AXIS_NEAR]
    stacked = np.concatenate([x for x, _ in examples])
    mean, scale = stacked.mean(0), stacked.std(0) + 1e-9
    most = max(len(x) for x, _ in examples)
    x = np.zeros((len(examples), most, stacked.shape[1]), dtype=np.float32)
    mask = np.zeros((len(examples), most), dtype=bool)
    for i, (xi, _) in enumerate(examples):
        x[i, : len(xi)], mask[i, : len(xi)] = (xi - mean) / scale, True
    x, mask = torch.tensor(x), torch.tensor(mask)
    target = torch.tensor([int(np.argmin(a)) for _, a in examples])
    net = torch.nn.Sequential(
        torch.nn.Linear(x.shape[2], hidden),
        torch.nn.ReLU(),
        torch.nn.Linear(hidden, hidden),
        torch.nn.ReLU(),
        torch.nn.Linear(hidden, 1),
    )
    opt = torch.optim.Adam(net.parameters(), lr=3e-3, weight_decay=1e-4)
    for _ in range(epochs):
        opt.zero_grad()
        scores = net(x)[..., 0].masked_fill(~mask, -1e9)  # (J, C)
        torch.nn.functional.cross_entropy(scores, target).backward()
        opt.step()
    layers = [
        (m.weight.detach().numpy().T.astype(np.float64), m.bias.detach().numpy())
        for m in net
        if isinstance(m, torch.nn.Linear)
    ]
    return AxisChooser(layers, mean, scale)


def fit(features: np.ndarray, labels: np.ndarray, hidden: int, epochs: int, seed: int):
    """A :class:`~neurok_core.structure_learned.JointTyper` fit to ``features`` / ``labels``."""
    import torch

    from neurok_core.structure_learned import JOINT_TYPES, JointTyper

    torch.manual_seed(seed)
    mean, scale = features.mean(0), features.std(0) + 1e-9
    x = torch.tensor((features - mean) / scale, dtype=torch.float32)
    y = torch.tensor(labels)
    count = np.bincount(labels, minlength=len(JOINT_TYPES)).astype(np.float64)
    weight = np.where(count > 0, count.sum() / np.maximum(count, 1.0) / len(count), 0.0)
    net = torch.nn.Sequential(
        torch.nn.Linear(x.shape[1], hidden),
        torch.nn.ReLU(),
        torch.nn.Linear(hidden, hidden),
        torch.nn.ReLU(),
        torch.nn.Linear(hidden, len(JOINT_TYPES)),
    )
    opt = torch.optim.Adam(net.parameters(), lr=3e-3, weight_decay=1e-4)
    loss_of = torch.nn.CrossEntropyLoss(weight=torch.tensor(weight, dtype=torch.float32))
    for _ in range(epochs):
        opt.zero_grad()
        loss = loss_of(net(x), y)
        loss.backward()
        opt.step()
    with torch.no_grad():
        accuracy = float((net(x).argmax(1) == y).float().mean())
    layers = [
        (m.weight.detach().numpy().T.astype(np.float64), m.bias.detach().numpy())
        for m in net
        if isinstance(m, torch.nn.Linear)
    ]
    reference, novelty = familiar_set(features, mean, scale)
    return JointTyper(layers, mean, scale, reference, novelty), float(loss.detach()), accuracy


def familiar_set(features: np.ndarray, mean: np.ndarray, scale: np.ndarray):
    """(reference (R, FEATURES) float32, novelty): the training joints' distinct standardised
    features, and the ``NOVELTY`` quantile of each one's distance to its ``NEIGHBOURS``-th
    nearest other (:meth:`~neurok_core.structure_learned.JointTyper.familiar`)."""
    from scipy.spatial import cKDTree

    from neurok_core.structure_learned import NEIGHBOURS

    reference = np.unique(((features - mean) / scale).astype(np.float32), axis=0)
    k = min(NEIGHBOURS + 1, len(reference))  # the nearest is the joint itself
    d = cKDTree(reference).query(reference, k=k)[0].reshape(len(reference), k)[:, -1]
    return reference, float(np.quantile(d, NOVELTY))


def main(argv=None) -> int:
    from neurok_core.structure_learned import DEFAULT_TYPER
    from training.data.robots import ROBOTS
    from training.eval.structure_eval import articulated_cases, robot_cases

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-family", type=int, default=40)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--epochs", type=int, default=400)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument(
        "--robots",
        default=",".join(r.name for r in ROBOTS),
        help="pybullet robots whose URDF joints join the training set ('' for none)",
    )
    parser.add_argument(
        "--cross-robots",
        action="store_true",
        help="also report leave-one-robot-out figures (a typer fit without each robot)",
    )
    parser.add_argument("--out", default=str(DEFAULT_TYPER))
    args = parser.parse_args(argv)
    cases = list(articulated_cases([], args.per_family, args.seed, stream="train"))
    names = [r for r in args.robots.split(",") if r]
    cases += list(robot_cases(names)) if names else []
    rows = []
    for case in cases:
        started = time.perf_counter()
        rows.append(labelled_joints(case))
        print(f"{case.name}: {time.perf_counter() - started:.2f} s", file=sys.stderr, flush=True)
    if args.cross_robots:
        totals = cross_robots(cases, rows, args.hidden, args.epochs, args.seed)
        print(
            f"leave one robot out: type accuracy {totals['type_accuracy']:.3f} over "
            f"{totals['joints']} joints; confusion {totals['confusion']}"
        )
    features = np.concatenate([r[0] for r in rows])
    labels = np.concatenate([r[1] for r in rows])
    typer, loss, accuracy = fit(features, labels, args.hidden, args.epochs, args.seed)
    typer.axes = fit_axes([e for r in rows for e in r[2]], args.hidden, args.epochs, args.seed)
    typer.save(args.out)
    print(
        f"{len(labels)} joints (per type {np.bincount(labels, minlength=5).tolist()}); "
        f"loss {loss:.3f}, training accuracy {accuracy:.3f}; wrote {args.out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
