"""Training curves (PNG) from a run's ``metrics.jsonl``.

    python -m training.plots runs/default/metrics.jsonl [--out curves.png]

Four panels against the optimizer step: the total loss and the reconstruction term (sum over the
points of the squared error) on a log scale; the KL term in nats (a posterior that collapses
shows as KL near 0); the per-point RMS error of training batches beside the validation one, with
the "no motion" reference (the error of leaving the mesh unchanged) dashed.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path


def read_metrics(path: str | os.PathLike) -> tuple[list[dict], list[dict]]:
    """(train records, validation records) of a ``metrics.jsonl``."""
    train, val = [], []
    for line in Path(path).read_text().splitlines():
        if line.strip():
            record = json.loads(line)
            (val if record.get("kind") == "val" else train).append(record)
    return train, val


def plot_training(metrics: str | os.PathLike, out: str | os.PathLike) -> Path:
    """Draw the curves of ``metrics`` (a metrics.jsonl) into the PNG ``out``; returns its path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    train, val = read_metrics(metrics)
    fig, axes = plt.subplots(1, 4, figsize=(18, 4.2))
    steps = [r["step"] for r in train]

    def series(records: list[dict], key: str) -> tuple[list, list]:
        pairs = [(r["step"], r[key]) for r in records if key in r]
        return [p[0] for p in pairs], [p[1] for p in pairs]

    ax = axes[0]
    ax.plot(steps, [r["loss"] for r in train], label="loss")
    ax.plot(steps, [r["recon"] for r in train], label="recon (sum over points)")
    if any(r.get("rigidity", 0) > 0 for r in train):
        ax.plot(steps, [r["rigidity"] for r in train], "--", label="rigidity")
    if any(r.get("prior_rigidity", 0) > 0 for r in train):
        ax.plot(steps, [r["prior_rigidity"] for r in train], ":", label="prior rigidity")
    ax.set_yscale("log")
    ax.set_title("training loss")

    ax = axes[1]
    ax.plot(steps, [r["kl"] for r in train], color="tab:purple", label="train")
    ax.plot(*series(val, "val_kl"), "o-", color="tab:red", label="validation")
    ax.set_title("KL(q || p) [nats]")
    ax.set_ylim(bottom=0)

    ax = axes[2]
    ax.plot(steps, [r["rmse"] for r in train], label="train (z ~ posterior)")
    ax.plot(*series(val, "val_rmse"), "o-", color="tab:red", label="validation (posterior mean)")
    static_steps, static = series(val, "val_static_rmse")
    if static:
        ax.axhline(static[-1], color="gray", linestyle="--", label="validation, no motion")
    ax.set_yscale("log")
    ax.set_title("per-point RMS error (unit = rest box)")

    ax = axes[3]
    ax.plot(steps, [r["samples_per_s"] for r in train], color="tab:green", label="samples/s")
    ax.set_ylim(bottom=0)
    ax.set_title("throughput [pairs/s]")
    ax2 = ax.twinx()
    ax2.plot(steps, [r["lr"] for r in train], color="tab:orange", alpha=0.6, label="lr")
    ax2.set_ylabel("learning rate", color="tab:orange")

    for ax in axes:
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    fig.tight_layout()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m training.plots", description=__doc__.split("\n")[0])
    p.add_argument("metrics", help="a run's metrics.jsonl")
    p.add_argument("--out", help="PNG path (default: training_curves.png beside the metrics)")
    args = p.parse_args(argv)
    out = args.out or Path(args.metrics).with_name("training_curves.png")
    print(plot_training(args.metrics, out))


if __name__ == "__main__":
    main()
