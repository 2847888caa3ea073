"""Train the NeuROK CVAE (method.md) on a folder of 4D sequences.

    python -m training.train --data DATA/train --val DATA/val --out runs/default --minutes 60
    torchrun --standalone --nproc_per_node=N -m training.train --data ... --out ...   # DDP

One script for the CPU, one GPU (bf16 autocast) and many GPUs or nodes: it initialises
``torch.distributed`` only when launched by ``torchrun`` (``RANK``/``WORLD_SIZE`` set; gloo on the
CPU, NCCL on GPUs), gives each rank its own share of the pairs, all-reduces the losses it logs,
and logs and saves on rank 0 only.

Each step draws a batch of (M0, M_t) surface-point pairs (``training.dataset``) and minimises
``sum_p |y_p - x_p|^2 + rigidity + 0.01 KL(q(z | phi, M0) || p(z | M0))`` (``NeuROKModel.loss``)
with AdamW, a linear warm-up and a cosine decay to ``lr * min_lr_ratio``, and gradient clipping.
The decay runs over ``--steps`` or over the ``--minutes`` wall-clock budget, whichever comes
first (the learning rate follows the fraction of the budget spent).

Outputs in ``--out``:
- ``checkpoint/``: the model (``neurok_core.checkpoint``: safetensors + JSON config recording the
  data, steps, wall time, samples/s, final losses and validation metrics);
- ``train_state.pt``: what ``--resume`` needs to continue exactly (weights, AdamW moments, step,
  elapsed time, every rank's RNG). Plain tensors and dicts, read back with
  ``torch.load(weights_only=True)``, which never unpickles arbitrary objects;
- ``metrics.jsonl`` (one JSON object per log or validation event), ``tb/`` (TensorBoard) and
  ``training_curves.png``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from tqdm import tqdm

from neurok_core.checkpoint import load_checkpoint, save_checkpoint
from neurok_core.device import describe_device, select_device
from neurok_core.errors import CheckpointError
from neurok_core.model import ModelConfig, build_model

from .dataset import Augmentation, PairBatchSampler, PairDataset

STATE_FILE = "train_state.pt"
METRICS_FILE = "metrics.jsonl"
STATE_VERSION = 1


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m training.train", description=__doc__.split("\n")[0])
    p.add_argument("--data", required=True, help="folder of training sequences (.npz)")
    p.add_argument("--val", help="folder of validation sequences (mean rmse is logged)")
    p.add_argument("--out", required=True, help="run folder (checkpoint, logs, resume state)")
    p.add_argument("--preset", default="default", help="model preset (tiny, default, skinned)")
    p.add_argument(
        "--deformation",
        choices=("skinned", "dualquat", "displacement"),
        help="override the preset's deformation (dualquat = the per-point field, "
        "displacement = the ablation)",
    )
    p.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a ModelConfig field, e.g. --override width=128 (repeatable)",
    )
    budget = p.add_argument_group("budget (at least one; training stops at the first reached)")
    budget.add_argument("--steps", type=int, help="optimizer steps")
    budget.add_argument("--minutes", type=float, help="wall-clock minutes (resumes included)")
    opt = p.add_argument_group("optimisation")
    opt.add_argument("--batch-size", type=int, default=16, help="pairs per step and rank")
    opt.add_argument("--lr", type=float, default=5e-4)
    opt.add_argument("--min-lr-ratio", type=float, default=0.1, help="final lr / peak lr")
    opt.add_argument("--warmup-steps", type=int, default=100)
    opt.add_argument("--weight-decay", type=float, default=0.01)
    opt.add_argument("--grad-clip", type=float, default=1.0, help="max gradient norm (0: off)")
    data = p.add_argument_group("data")
    data.add_argument("--no-augment", action="store_true", help="no rotation/stretch (ablation)")
    data.add_argument("--max-tilt", type=float, default=10.0, help="tilt about X/Y, degrees")
    data.add_argument(
        "--scale-range",
        type=float,
        nargs=2,
        default=(0.8, 1.25),
        metavar=("LO", "HI"),
        help="per-axis stretch range of the augmentation",
    )
    data.add_argument(
        "--rest-probability",
        type=float,
        default=0.05,
        help="share of pairs whose M_t is M0 itself (no motion)",
    )
    data.add_argument("--families", help="comma-separated families to train on (default: all)")
    data.add_argument("--categories", help="comma-separated categories to train on")
    data.add_argument("--val-items", type=int, default=512, help="fixed validation pairs")
    data.add_argument(
        "--num-workers",
        type=int,
        default=-1,
        help="data loader processes per rank (-1: 1 on the CPU, up to 8 on a GPU)",
    )
    data.add_argument(
        "--cache-mb", type=float, default=3000.0, help="per-process cache of loaded sequences"
    )
    run = p.add_argument_group("run")
    run.add_argument("--resume", action="store_true", help="continue from --out/train_state.pt")
    run.add_argument(
        "--init",
        metavar="CKPT",
        help="start from a checkpoint's weights (fine-tuning; same architecture, the loss "
        "weights may differ; fresh optimiser and schedule)",
    )
    run.add_argument("--device", default="auto", help="auto, cpu, cuda")
    run.add_argument(
        "--precision",
        choices=("auto", "bf16", "fp32"),
        default="auto",
        help="auto: bf16 autocast on CUDA, fp32 elsewhere",
    )
    run.add_argument(
        "--threads", type=int, default=0, help="torch CPU threads per rank (0: cores / local ranks)"
    )
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--log-every", type=int, default=20, help="steps between log lines")
    run.add_argument("--val-every", type=int, default=500, help="steps between validations")
    run.add_argument("--save-every", type=int, default=1000, help="steps between saves")
    run.add_argument("--no-plot", action="store_true", help="skip training_curves.png")
    run.add_argument("--quiet", action="store_true", help="no progress bar")
    args = p.parse_args(argv)
    if args.steps is None and args.minutes is None:
        p.error("give a budget: --steps N and/or --minutes M")
    if args.steps is not None and args.steps < 1 or args.minutes is not None and args.minutes <= 0:
        p.error("--steps and --minutes must be positive")
    return args


# ---------------------------------------------------------------------------- set-up helpers
def model_config(args: argparse.Namespace) -> ModelConfig:
    """The preset with ``--deformation`` and ``--override KEY=VALUE`` applied."""
    overrides: dict = {}
    if args.deformation:
        overrides["deformation"] = args.deformation
    base = ModelConfig.preset(args.preset).to_dict()
    for item in args.override:
        key, sep, value = item.partition("=")
        if not sep or key not in base:
            raise SystemExit(f"--override {item!r}: use KEY=VALUE with KEY one of {sorted(base)}")
        overrides[key] = type(base[key])(value)
    return ModelConfig.preset(args.preset, **overrides)


def setup_distributed(args: argparse.Namespace) -> tuple[int, int, int, torch.device]:
    """(rank, world size, local rank, device); joins the process group under torchrun."""
    distributed = "RANK" in os.environ and "WORLD_SIZE" in os.environ
    rank = int(os.environ.get("RANK", 0))
    world = int(os.environ.get("WORLD_SIZE", 1))
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    device = select_device(args.device)
    if device.type == "cuda":
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    if distributed:
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    return rank, world, local_rank, device


def set_threads(args: argparse.Namespace, workers: int) -> int:
    """Torch CPU threads of this rank: ``--threads``, else the cores left per local rank after
    its loader workers (at least 1). OpenMP threads that outnumber the free cores spin against
    each other and slow a step down several times."""
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", 1))
    threads = args.threads or max(1, (os.cpu_count() or 1) // local_world - workers)
    torch.set_num_threads(threads)
    return threads


def names(text: str | None) -> list[str] | None:
    """``"a, b"`` -> ``["a", "b"]``; None or empty -> None."""
    return [x.strip() for x in text.split(",") if x.strip()] or None if text else None


def learning_rate(args: argparse.Namespace, step: int, progress: float) -> float:
    """Linear warm-up over ``warmup_steps``, then cosine from ``lr`` to ``lr * min_lr_ratio``
    as ``progress`` (the spent fraction of the step or time budget) goes from 0 to 1."""
    if step < args.warmup_steps:
        return args.lr * (step + 1) / args.warmup_steps
    low = args.lr * args.min_lr_ratio
    return low + 0.5 * (args.lr - low) * (1.0 + math.cos(math.pi * min(max(progress, 0.0), 1.0)))


def make_optimizer(model: torch.nn.Module, args: argparse.Namespace) -> torch.optim.AdamW:
    """AdamW; weight decay on matrices only (not on biases, norms or embeddings of rank 1)."""
    decay = [p for p in model.parameters() if p.requires_grad and p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.requires_grad and p.dim() < 2]
    groups = [
        {"params": decay, "weight_decay": args.weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=args.lr, betas=(0.9, 0.99))


def make_loader(dataset: PairDataset, sampler, workers: int, device: torch.device):
    return torch.utils.data.DataLoader(
        dataset,
        batch_sampler=sampler,
        num_workers=workers,
        pin_memory=device.type == "cuda",
        prefetch_factor=4 if workers else None,
        persistent_workers=False,
        generator=torch.Generator(),  # keeps the loader off the global RNG (exact resume)
    )


def rng_state(device: torch.device) -> torch.Tensor:
    """This rank's torch RNG state (CPU, then CUDA when used) as one uint8 vector."""
    parts = [torch.get_rng_state()]
    if device.type == "cuda":
        parts.append(torch.cuda.get_rng_state(device))
    return torch.cat(parts)


def set_rng_state(state: torch.Tensor, device: torch.device) -> None:
    cpu_size = torch.get_rng_state().numel()
    torch.set_rng_state(state[:cpu_size].clone())
    if device.type == "cuda":
        torch.cuda.set_rng_state(state[cpu_size:].clone(), device)


def gather_rng_states(device: torch.device, world: int) -> list[torch.Tensor]:
    """Every rank's RNG state (on rank 0; a collective, so every rank must call it)."""
    mine = rng_state(device)
    if world == 1:
        return [mine]
    comm = mine.to(device) if device.type == "cuda" else mine
    out = [torch.empty_like(comm) for _ in range(world)]
    dist.all_gather(out, comm)
    return [t.cpu() for t in out]


def all_reduce_sum(values: list[float], device: torch.device, world: int) -> list[float]:
    t = torch.tensor(values, dtype=torch.float64, device=device)
    if world > 1:
        dist.all_reduce(t)
    return t.tolist()


def broadcast_value(value: float, device: torch.device, world: int) -> float:
    """Rank 0's ``value`` on every rank (keeps schedule and stopping identical under DDP)."""
    if world == 1:
        return value
    t = torch.tensor([value], dtype=torch.float64, device=device)
    dist.broadcast(t, 0)
    return float(t.item())


# config fields that do not shape the weights (--init may change them)
LOSS_FIELDS = (
    "kl_weight",
    "rigidity_weight",
    "prior_rigidity_weight",
    "prior_rigidity_robust",
    "rigidity_neighbors",
    "num_points",
)


def init_from(model: torch.nn.Module, config: ModelConfig, checkpoint: str) -> dict:
    """Load a checkpoint's weights into ``model`` (``--init``); its architecture must be
    ``config``'s (the loss settings, ``LOSS_FIELDS``, may differ). Returns the record of where
    the run started (path, weights hash, steps), kept in the run's config."""
    source, info = load_checkpoint(checkpoint)
    theirs = {k: v for k, v in source.config.to_dict().items() if k not in LOSS_FIELDS}
    ours = {k: v for k, v in config.to_dict().items() if k not in LOSS_FIELDS}
    if theirs != ours:
        differ = sorted(k for k in ours if theirs.get(k) != ours[k])
        raise CheckpointError(
            f"--init {checkpoint}: its architecture differs from this command's in {differ}"
        )
    model.load_state_dict(source.state_dict())
    return {
        "checkpoint": str(checkpoint),
        "weights_sha256": info.get("weights_sha256"),
        "steps": (info.get("training") or {}).get("steps"),
    }


def trim_metrics(path: Path, last_step: int) -> None:
    """Drop log lines after ``last_step`` (written by a run that stopped before saving)."""
    if not path.is_file():
        return
    keep = [
        ln for ln in path.read_text().splitlines() if ln and json.loads(ln)["step"] <= last_step
    ]
    path.write_text("".join(ln + "\n" for ln in keep))


def atomic_torch_save(obj: dict, path: Path) -> None:
    tmp = path.with_name(path.name + ".tmp")
    torch.save(obj, tmp)
    os.replace(tmp, path)


# ---------------------------------------------------------------------------- validation
@torch.no_grad()
def validate(model, loader, device, world: int, autocast) -> dict[str, float]:
    """Mean over the fixed validation pairs (each rank takes a share, sums are all-reduced).

    rmse: sqrt(mean over pairs and points of |y_p - x_p|^2) with z the posterior mean;
    static_rmse: the same for "no motion" (y_p = rest point), the reference a model must beat;
    kl: mean KL(q || p) in nats.
    """
    model.eval()
    points = model.config.num_points
    err = kl = static = count = 0.0
    for batch in loader:
        rest = batch["rest"].to(device)  # (B, P, 3)
        deformed = batch["deformed"].to(device)  # (B, P, 3)
        neighbors = batch["neighbors"].to(device) if "neighbors" in batch else None
        islands = batch["islands"].to(device) if "islands" in batch else None
        with autocast():
            out = model.loss(rest, deformed, neighbors=neighbors, islands=islands, sample=False)
        b = rest.shape[0]
        err += float(out["recon"]) * b
        kl += float(out["kl"]) * b
        static += float(((deformed - rest) ** 2).sum())
        count += b
    model.train()
    err, kl, static, count = all_reduce_sum([err, kl, static, count], device, world)
    if count == 0:
        return {}
    return {
        "val_rmse": math.sqrt(err / (count * points)),
        "val_static_rmse": math.sqrt(static / (count * points)),
        "val_kl": kl / count,
    }


# ---------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> dict:
    """Train; returns the final record (steps, wall time, samples/s, losses, validation)."""
    args = parse_args(argv)
    rank, world, _local_rank, device = setup_distributed(args)
    master = rank == 0
    out_dir = Path(args.out)
    state_path = out_dir / STATE_FILE
    config = model_config(args)
    precision = (
        args.precision
        if args.precision != "auto"
        else ("bf16" if device.type == "cuda" else "fp32")
    )
    use_bf16 = precision == "bf16"

    def autocast():
        if not use_bf16:
            return contextlib.nullcontext()
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16)

    if args.num_workers >= 0:
        workers = args.num_workers
    elif device.type == "cuda":  # the GPU step is fast: let the loader use most of the cores
        local_world = int(os.environ.get("LOCAL_WORLD_SIZE", 1))
        workers = min(8, max(1, (os.cpu_count() or 1) // local_world - 1))
    else:
        workers = 1
    threads = set_threads(args, workers)
    if state_path.is_file() and not args.resume:
        raise SystemExit(
            f"{out_dir} holds a training run ({STATE_FILE}); continue it with --resume, or "
            "choose another --out (or delete the folder) to start afresh"
        )

    # --- data
    augmentation = (
        None
        if args.no_augment
        else Augmentation(max_tilt_deg=args.max_tilt, scale_range=tuple(args.scale_range))
    )
    # the rigidity term's neighbourhoods: built by the loader workers on the CPU, by the model
    # (cdist + topk, fast there) on a GPU
    use_neighbors = config.rigidity_neighbors if config.rigid_motions else 0
    use_neighbors = use_neighbors if device.type == "cpu" else 0
    train_set = PairDataset(
        args.data,
        num_points=config.num_points,
        augmentation=augmentation,
        rest_probability=args.rest_probability,
        neighbors=use_neighbors,
        seed=args.seed,
        families=names(args.families),
        categories=names(args.categories),
        cache_mb=args.cache_mb,
    )
    val_set = None
    if args.val:
        val_set = PairDataset(
            args.val,
            num_points=config.num_points,
            neighbors=use_neighbors,
            seed=args.seed + 1,
            cache_mb=args.cache_mb,
        )

    # --- model, optimiser, resume
    torch.manual_seed(args.seed)
    model = build_model(config).to(device)
    optimizer = make_optimizer(model, args)
    step, elapsed_before, samples_seen = 0, 0.0, 0
    init_record = None  # what a fine-tune started from (--init), kept in the resume state
    if args.resume and state_path.is_file():
        state = torch.load(state_path, map_location="cpu", weights_only=True)
        if state.get("version") != STATE_VERSION:
            raise CheckpointError(f"{state_path}: unknown training state version")
        # (through from_dict: a state saved before a config field existed has its default)
        if ModelConfig.from_dict(json.loads(state["model_config"])) != config:
            raise CheckpointError(
                f"{state_path}: the model config differs from this command's; "
                "resume with the same --preset/--override/--deformation"
            )
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        init_record = json.loads(state.get("init", "null"))
        step, elapsed_before = int(state["step"]), float(state["elapsed"])
        samples_seen = int(state["samples"])
        rngs = state["rng"]
        if len(rngs) != world and master:
            print(
                f"warning: resuming {len(rngs)} ranks' state on {world} ranks; the data "
                "order and noise differ from an uninterrupted run",
                file=sys.stderr,
            )
        set_rng_state(rngs[rank % len(rngs)], device)
    else:
        if args.resume and master:
            print(f"no {state_path}; starting from scratch", file=sys.stderr)
        if args.init:
            init_record = init_from(model, config, args.init)
        torch.manual_seed(args.seed * 7919 + rank)  # per-rank reparameterisation noise
    ddp_model = model
    if world > 1:
        ddp_model = DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None
        )

    sampler = PairBatchSampler(
        len(train_set),
        args.batch_size,
        rank=rank,
        world_size=world,
        seed=args.seed,
        start_batch=step,
    )
    batches = iter(make_loader(train_set, sampler, workers, device))
    val_loader = None
    if val_set is not None:
        keys = list(range(rank, args.val_items, world))
        val_loader = torch.utils.data.DataLoader(
            torch.utils.data.Subset(val_set, keys),
            batch_size=args.batch_size * 2,
            generator=torch.Generator(),
        )

    # --- logging
    writer = None
    metrics_path = out_dir / METRICS_FILE
    if master:
        out_dir.mkdir(parents=True, exist_ok=True)
        if step:
            trim_metrics(metrics_path, step)
        elif metrics_path.exists():
            metrics_path.unlink()
        from torch.utils.tensorboard import SummaryWriter

        writer = SummaryWriter(str(out_dir / "tb"), purge_step=step or None)
        print(
            f"NeuROK training: {config.deformation} model '{args.preset}' "
            f"({model.num_parameters():,} parameters) on {describe_device(device)} x {world}, "
            f"{len(train_set)} train sequences, batch {args.batch_size} x {world}, "
            f"{workers} loader workers, {threads} threads, {precision}, augmentation "
            f"{'off' if augmentation is None else 'on'}",
            file=sys.stderr,
        )

    def log(record: dict) -> None:
        with metrics_path.open("a") as f:
            f.write(json.dumps(record) + "\n")
        for key, value in record.items():
            if key not in ("step", "kind", "time"):
                writer.add_scalar(f"{record['kind']}/{key}", value, record["step"])

    budget_s = args.minutes * 60.0 if args.minutes else math.inf
    bar = tqdm(
        total=args.steps,
        initial=step,
        disable=not master or args.quiet,
        unit="step",
        dynamic_ncols=True,
    )
    logged = (
        "loss",
        "recon",
        "rigidity",
        "prior_rigidity",
        "kl",
        "skin_entropy",
        "skin_parts",
        "agree",
        "prior_agree",
        "rmse",
    )
    sums = [0.0] * (len(logged) + 2)  # the logged terms, grad norm, steps
    interval_start, interval_samples = time.perf_counter(), 0
    start = time.perf_counter()
    last: dict = {}
    recent: list[dict] = []  # the last log intervals, for a less noisy "final" record
    val_metrics: dict = {}
    skipped = 0

    def elapsed() -> float:
        return elapsed_before + time.perf_counter() - start

    def save() -> None:
        rngs = gather_rng_states(device, world)  # collective
        if not master:
            return
        atomic_torch_save(
            {
                "version": STATE_VERSION,
                "step": step,
                "elapsed": elapsed(),
                "samples": samples_seen,
                "model": model.state_dict(),
                "optimizer": optimizer.state_dict(),
                "rng": rngs,
                "model_config": json.dumps(config.to_dict()),
                "args": json.dumps(vars(args)),
                "init": json.dumps(init_record),
            },
            state_path,
        )
        save_checkpoint(
            model, out_dir / "checkpoint", training=training_record(), metrics=val_metrics
        )

    def training_record() -> dict:
        wall = elapsed()
        return {
            "data": train_set.summary(),
            "val_data": val_set.summary() if val_set is not None else None,
            "steps": step,
            "samples": samples_seen,
            "wall_time_s": round(wall, 1),
            "samples_per_s": round(samples_seen / wall, 2) if wall > 0 else None,
            "batch_size": args.batch_size,
            "world_size": world,
            "device": describe_device(device),
            "precision": precision,
            "augmentation": None if augmentation is None else asdict(augmentation),
            "rest_probability": args.rest_probability,
            "optimizer": {
                "name": "AdamW",
                "lr": args.lr,
                "min_lr_ratio": args.min_lr_ratio,
                "warmup_steps": args.warmup_steps,
                "weight_decay": args.weight_decay,
                "grad_clip": args.grad_clip,
            },
            "budget": {"steps": args.steps, "minutes": args.minutes},
            "init": init_record,
            "seed": args.seed,
            "final": final_losses(),
            "skipped_steps": skipped,
            "torch": torch.__version__,
            "command": "python -m training.train "
            + " ".join(sys.argv[1:] if argv is None else argv),
        }

    def final_losses() -> dict:
        """Step-weighted means over the last (up to 10) log intervals of this run."""
        steps = sum(r["steps"] for r in recent)
        if not steps:
            return {}
        keys = [k for k in recent[-1] if k != "steps"]
        means = {k: sum(r[k] * r["steps"] for r in recent) / steps for k in keys}
        return {**means, "over_steps": int(steps)}

    def every(interval: int) -> bool:
        return interval > 0 and step % interval == 0

    def log_interval() -> None:
        """All-reduce the sums since the last log line; log their means on rank 0."""
        nonlocal sums, interval_start, interval_samples, last
        totals = all_reduce_sum(sums, device, world)
        now = time.perf_counter()
        rate = interval_samples / (now - interval_start)
        names = (*logged, "grad_norm")
        last = {k: totals[i] / totals[-1] for i, k in enumerate(names)}
        recent[:] = [*recent[-9:], {**last, "steps": totals[-1] / world}]
        if master:
            log(
                {
                    "kind": "train",
                    "step": step,
                    "time": round(elapsed(), 2),
                    "lr": lr,
                    **last,
                    "samples_per_s": rate,
                }
            )
            bar.set_postfix(
                loss=f"{last['loss']:.3g}",
                kl=f"{last['kl']:.3g}",
                rmse=f"{last['rmse']:.3g}",
                sps=f"{rate:.0f}",
            )
        sums = [0.0] * len(sums)
        interval_start, interval_samples = now, 0

    # --- the loop
    lr = learning_rate(args, step, 0.0)
    model.train()
    try:
        while True:
            spent = broadcast_value(elapsed(), device, world)
            progress = max(step / args.steps if args.steps else 0.0, spent / budget_s)
            if progress >= 1.0:
                break
            batch = next(batches)
            rest = batch["rest"].to(device, non_blocking=True)  # (B, P, 3)
            deformed = batch["deformed"].to(device, non_blocking=True)  # (B, P, 3)
            neighbors = batch.get("neighbors")
            if neighbors is not None:
                neighbors = neighbors.to(device, non_blocking=True)  # (B, P, K)
            parts = batch.get("parts")
            if parts is not None:
                parts = parts.to(device, non_blocking=True)  # (B, P)
            islands = batch.get("islands")
            if islands is not None:
                islands = islands.to(device, non_blocking=True)  # (B, P)
            lr = learning_rate(args, step, progress)
            for group in optimizer.param_groups:
                group["lr"] = lr
            with autocast():
                out = ddp_model(rest, deformed, neighbors=neighbors, parts=parts, islands=islands)
            out["loss"].backward()
            grad_norm = torch.nn.utils.clip_grad_norm_(
                model.parameters(), args.grad_clip if args.grad_clip > 0 else math.inf
            )
            if torch.isfinite(grad_norm):  # identical on every rank (the grads are all-reduced)
                optimizer.step()
            else:
                skipped += 1
            optimizer.zero_grad(set_to_none=True)
            step += 1
            samples_seen += rest.shape[0] * world
            interval_samples += rest.shape[0] * world
            values = [out[k].detach().float() for k in logged]
            for i, v in enumerate([*values, grad_norm.detach().float()]):
                sums[i] += float(v)
            sums[-1] += 1
            bar.update(1)

            if every(args.log_every):
                log_interval()
            if val_loader is not None and every(args.val_every):
                val_metrics = validate(model, val_loader, device, world, autocast)
                if master:
                    log({"kind": "val", "step": step, "time": round(elapsed(), 2), **val_metrics})
            if every(args.save_every):
                save()
    except KeyboardInterrupt:
        if world > 1:
            raise
        print(f"\ninterrupted at step {step}; saving (continue with --resume)", file=sys.stderr)
    bar.close()

    # --- the end
    if sums[-1]:
        log_interval()
    if val_loader is not None and not (val_metrics and every(args.val_every)):
        val_metrics = validate(model, val_loader, device, world, autocast)
        if master:
            log({"kind": "val", "step": step, "time": round(elapsed(), 2), **val_metrics})
    save()
    record = training_record()
    if master:
        writer.close()
        if not args.no_plot:
            from .plots import plot_training

            plot_training(metrics_path, out_dir / "training_curves.png")
        summary = {k: record[k] for k in ("steps", "samples", "wall_time_s", "samples_per_s")}
        print(json.dumps({**summary, "final": final_losses(), **val_metrics}), file=sys.stderr)
    if world > 1:
        dist.barrier()
        dist.destroy_process_group()
    return {**record, "val": val_metrics}


if __name__ == "__main__":
    main()
