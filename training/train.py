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
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from tqdm import tqdm

from neurok_core.checkpoint import load_checkpoint, save_checkpoint
from neurok_core.device import describe_device, select_device
from neurok_core.errors import CheckpointError
from neurok_core.model import LossConfig, ModelConfig, build_model

from .dataset import Augmentation, PairBatchSampler, PairDataset

if TYPE_CHECKING:
    from torch.utils.tensorboard import SummaryWriter

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
def model_config(args: argparse.Namespace) -> tuple[ModelConfig, LossConfig]:
    """The preset's architecture and loss with ``--deformation`` and ``--override KEY=VALUE``
    applied (a key of either config)."""
    model_over: dict = {}
    loss_over: dict = {}
    if args.deformation:
        model_over["deformation"] = args.deformation
    model_base = ModelConfig.preset(args.preset).to_dict()
    loss_base = LossConfig.preset(args.preset).to_dict()
    for item in args.override:
        key, sep, value = item.partition("=")
        if not sep or key not in {**model_base, **loss_base}:
            known = sorted({**model_base, **loss_base})
            raise SystemExit(f"--override {item!r}: use KEY=VALUE with KEY one of {known}")
        if key in model_base:
            model_over[key] = type(model_base[key])(value)
        else:
            loss_over[key] = type(loss_base[key])(value)
    config = ModelConfig.preset(args.preset, **model_over)
    loss = LossConfig.preset(args.preset, **loss_over)
    try:
        loss.check(config)
    except ValueError as exc:
        raise SystemExit(f"--preset/--override: {exc}") from None
    return config, loss


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


# model config fields that do not shape the weights (--init may change them; the loss's
# settings are not the model's at all)
FREE_FIELDS = ("num_points",)


def init_from(model: torch.nn.Module, config: ModelConfig, checkpoint: str) -> dict:
    """Load a checkpoint's weights into ``model`` (``--init``); its architecture must be
    ``config``'s (``FREE_FIELDS`` and the loss may differ). Returns the record of where
    the run started (path, weights hash, steps), kept in the run's config."""
    source, info = load_checkpoint(checkpoint)
    theirs = {k: v for k, v in source.config.to_dict().items() if k not in FREE_FIELDS}
    ours = {k: v for k, v in config.to_dict().items() if k not in FREE_FIELDS}
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
def validate(model, loader, device, world: int, autocast, loss: LossConfig) -> dict[str, float]:
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
            out = model.loss(
                rest,
                deformed,
                neighbors=neighbors,
                islands=islands,
                sample=False,
                loss_config=loss,
            )
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


# ---------------------------------------------------------------------------- set-up
@dataclass
class Run:
    """What the step loop and the end of a run need (made by :func:`setup`). ``step``,
    ``samples``, ``skipped``, ``val_metrics`` and ``recent`` advance as it trains."""

    args: argparse.Namespace
    rank: int
    world: int
    device: torch.device
    precision: str  # "bf16" (autocast) or "fp32"
    config: ModelConfig
    loss: LossConfig
    model: torch.nn.Module
    ddp_model: torch.nn.Module  # ``model``, wrapped in DistributedDataParallel when world > 1
    optimizer: torch.optim.AdamW
    train_set: PairDataset
    val_set: PairDataset | None
    batches: Iterator[dict[str, torch.Tensor]]  # this rank's training batches from ``step`` on
    val_loader: torch.utils.data.DataLoader | None  # this rank's share of the validation pairs
    writer: SummaryWriter | None  # TensorBoard, rank 0 only
    init_record: dict | None  # what a fine-tune started from (--init), kept in the resume state
    command: str  # the command line, recorded in the checkpoint
    step: int = 0  # optimizer steps, resumes included
    samples: int = 0  # pairs seen by all ranks, resumes included
    elapsed_before: float = 0.0  # seconds trained by the runs this one continues
    start: float = 0.0  # time.perf_counter() when this process started to train
    skipped: int = 0  # steps of this process skipped for a non-finite gradient
    val_metrics: dict = field(default_factory=dict)  # the latest validation
    recent: list[dict] = field(default_factory=list)  # the last (up to 10) log intervals

    @property
    def master(self) -> bool:
        return self.rank == 0

    @property
    def out(self) -> Path:
        return Path(self.args.out)

    def elapsed(self) -> float:
        """Seconds trained, resumes included."""
        return self.elapsed_before + time.perf_counter() - self.start

    def autocast(self):
        """bf16 autocast, or nothing under fp32."""
        if self.precision != "bf16":
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=torch.bfloat16)


def loader_workers(args: argparse.Namespace, device: torch.device) -> int:
    """Data loader processes per rank: ``--num-workers``, else 1 on the CPU and on a GPU (whose
    step is fast) most of the cores left per local rank, up to 8."""
    if args.num_workers >= 0:
        return args.num_workers
    if device.type == "cuda":
        local_world = int(os.environ.get("LOCAL_WORLD_SIZE", 1))
        return min(8, max(1, (os.cpu_count() or 1) // local_world - 1))
    return 1


def make_datasets(
    args: argparse.Namespace, config: ModelConfig, loss: LossConfig, device: torch.device
) -> tuple[PairDataset, PairDataset | None]:
    """The training pairs (augmented unless ``--no-augment``) and the validation pairs (none
    without ``--val``)."""
    augmentation = (
        None
        if args.no_augment
        else Augmentation(max_tilt_deg=args.max_tilt, scale_range=tuple(args.scale_range))
    )
    # the rigidity term's neighbourhoods: built by the loader workers on the CPU, by the model
    # (cdist + topk, fast there) on a GPU
    use_neighbors = loss.rigidity_neighbors if config.rigid_motions else 0
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
    return train_set, val_set


def restore(
    model: torch.nn.Module,
    optimizer: torch.optim.AdamW,
    args: argparse.Namespace,
    config: ModelConfig,
    loss: LossConfig,
    *,
    rank: int,
    world: int,
    device: torch.device,
) -> tuple[int, float, int, dict | None]:
    """Where training starts: (step, seconds trained, samples seen, the ``--init`` record).

    With ``--resume`` and a saved state: its weights, AdamW moments, counters and this rank's
    RNG (the config must be this command's). Otherwise step 0, the ``--init`` weights if given,
    and a per-rank seed for the reparameterisation noise."""
    state_path = Path(args.out) / STATE_FILE
    if args.resume and state_path.is_file():
        state = torch.load(state_path, map_location="cpu", weights_only=True)
        if state.get("version") != STATE_VERSION:
            raise CheckpointError(f"{state_path}: unknown training state version")
        # (through from_dict: a state saved before a config field existed has its default;
        # one saved when the loss's settings were kept in the model config has them there)
        saved = json.loads(state["model_config"])
        saved_loss = json.loads(state.get("loss_config", "null")) or saved
        if ModelConfig.from_dict(saved) != config or LossConfig.from_dict(saved_loss) != loss:
            raise CheckpointError(
                f"{state_path}: the model or loss config differs from this command's; "
                "resume with the same --preset/--override/--deformation"
            )
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        init_record = json.loads(state.get("init", "null"))
        step, elapsed_before = int(state["step"]), float(state["elapsed"])
        samples = int(state["samples"])
        rngs = state["rng"]
        if len(rngs) != world and rank == 0:
            print(
                f"warning: resuming {len(rngs)} ranks' state on {world} ranks; the data "
                "order and noise differ from an uninterrupted run",
                file=sys.stderr,
            )
        set_rng_state(rngs[rank % len(rngs)], device)
        return step, elapsed_before, samples, init_record
    if args.resume and rank == 0:
        print(f"no {state_path}; starting from scratch", file=sys.stderr)
    init_record = init_from(model, config, args.init) if args.init else None
    torch.manual_seed(args.seed * 7919 + rank)  # per-rank reparameterisation noise
    return 0, 0.0, 0, init_record


def open_logs(out_dir: Path, step: int) -> SummaryWriter:
    """Make the run folder and open its logs: a resumed run's metrics.jsonl and TensorBoard
    events continue from its saved ``step`` (later ones are dropped), a new run's start empty."""
    out_dir.mkdir(parents=True, exist_ok=True)
    metrics_path = out_dir / METRICS_FILE
    if step:
        trim_metrics(metrics_path, step)
    elif metrics_path.exists():
        metrics_path.unlink()
    from torch.utils.tensorboard import SummaryWriter

    return SummaryWriter(str(out_dir / "tb"), purge_step=step or None)


def setup(argv: list[str] | None = None) -> Run:
    """Everything before the first step: checks the arguments, joins the process group under
    torchrun, builds the data and loaders, the model and optimiser, restores the ``--resume``
    state (or the ``--init`` weights), and on rank 0 prepares the run folder and the logs."""
    args = parse_args(argv)
    rank, world, _local_rank, device = setup_distributed(args)
    out_dir = Path(args.out)
    config, loss = model_config(args)
    precision = (
        args.precision
        if args.precision != "auto"
        else ("bf16" if device.type == "cuda" else "fp32")
    )
    workers = loader_workers(args, device)
    threads = set_threads(args, workers)
    if (out_dir / STATE_FILE).is_file() and not args.resume:
        raise SystemExit(
            f"{out_dir} holds a training run ({STATE_FILE}); continue it with --resume, or "
            "choose another --out (or delete the folder) to start afresh"
        )

    # --- data, model, optimiser, resume
    train_set, val_set = make_datasets(args, config, loss, device)
    torch.manual_seed(args.seed)
    model = build_model(config).to(device)
    optimizer = make_optimizer(model, args)
    step, elapsed_before, samples, init_record = restore(
        model, optimizer, args, config, loss, rank=rank, world=world, device=device
    )
    ddp_model = model
    if world > 1:
        ddp_model = DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None
        )

    # --- loaders
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

    # --- logging (rank 0)
    writer = None
    if rank == 0:
        writer = open_logs(out_dir, step)
        print(
            f"NeuROK training: {config.deformation} model '{args.preset}' "
            f"({model.num_parameters():,} parameters) on {describe_device(device)} x {world}, "
            f"{len(train_set)} train sequences, batch {args.batch_size} x {world}, "
            f"{workers} loader workers, {threads} threads, {precision}, augmentation "
            f"{'off' if train_set.augmentation is None else 'on'}",
            file=sys.stderr,
        )

    return Run(
        args=args,
        rank=rank,
        world=world,
        device=device,
        precision=precision,
        config=config,
        loss=loss,
        model=model,
        ddp_model=ddp_model,
        optimizer=optimizer,
        train_set=train_set,
        val_set=val_set,
        batches=batches,
        val_loader=val_loader,
        writer=writer,
        init_record=init_record,
        command="python -m training.train " + " ".join(sys.argv[1:] if argv is None else argv),
        step=step,
        samples=samples,
        elapsed_before=elapsed_before,
        start=time.perf_counter(),
    )


# ---------------------------------------------------------------------------- records, saving
def log_metrics(run: Run, record: dict) -> None:
    """Append ``record`` to metrics.jsonl and its values to TensorBoard (rank 0 only)."""
    with (run.out / METRICS_FILE).open("a") as f:
        f.write(json.dumps(record) + "\n")
    for key, value in record.items():
        if key not in ("step", "kind", "time"):
            run.writer.add_scalar(f"{record['kind']}/{key}", value, record["step"])


def validate_and_log(run: Run) -> None:
    """Validate (a collective: every rank calls it) and log the metrics on rank 0."""
    run.val_metrics = validate(
        run.model, run.val_loader, run.device, run.world, run.autocast, run.loss
    )
    if run.master:
        log_metrics(
            run,
            {"kind": "val", "step": run.step, "time": round(run.elapsed(), 2), **run.val_metrics},
        )


def final_losses(recent: list[dict]) -> dict:
    """Step-weighted means over the last (up to 10) log intervals of this run."""
    steps = sum(r["steps"] for r in recent)
    if not steps:
        return {}
    keys = [k for k in recent[-1] if k != "steps"]
    means = {k: sum(r[k] * r["steps"] for r in recent) / steps for k in keys}
    return {**means, "over_steps": int(steps)}


def training_record(run: Run) -> dict:
    """How the model was trained, as the checkpoint's config records it."""
    args, wall = run.args, run.elapsed()
    augmentation = run.train_set.augmentation
    return {
        "data": run.train_set.summary(),
        "val_data": run.val_set.summary() if run.val_set is not None else None,
        "steps": run.step,
        "samples": run.samples,
        "wall_time_s": round(wall, 1),
        "samples_per_s": round(run.samples / wall, 2) if wall > 0 else None,
        "batch_size": args.batch_size,
        "world_size": run.world,
        "device": describe_device(run.device),
        "precision": run.precision,
        "augmentation": None if augmentation is None else asdict(augmentation),
        "rest_probability": args.rest_probability,
        "loss": run.loss.to_dict(),
        "optimizer": {
            "name": "AdamW",
            "lr": args.lr,
            "min_lr_ratio": args.min_lr_ratio,
            "warmup_steps": args.warmup_steps,
            "weight_decay": args.weight_decay,
            "grad_clip": args.grad_clip,
        },
        "budget": {"steps": args.steps, "minutes": args.minutes},
        "init": run.init_record,
        "seed": args.seed,
        "final": final_losses(run.recent),
        "skipped_steps": run.skipped,
        "torch": torch.__version__,
        "command": run.command,
    }


def save(run: Run) -> None:
    """Write ``train_state.pt`` (what ``--resume`` needs) and the checkpoint. A collective
    (every rank's RNG state is gathered); rank 0 writes."""
    rngs = gather_rng_states(run.device, run.world)  # collective
    if not run.master:
        return
    atomic_torch_save(
        {
            "version": STATE_VERSION,
            "step": run.step,
            "elapsed": run.elapsed(),
            "samples": run.samples,
            "model": run.model.state_dict(),
            "optimizer": run.optimizer.state_dict(),
            "rng": rngs,
            "model_config": json.dumps(run.config.to_dict()),
            "loss_config": json.dumps(run.loss.to_dict()),
            "args": json.dumps(vars(run.args)),
            "init": json.dumps(run.init_record),
        },
        run.out / STATE_FILE,
    )
    save_checkpoint(
        run.model,
        run.out / "checkpoint",
        training=training_record(run),
        metrics=run.val_metrics,
    )


# ---------------------------------------------------------------------------- the loop
# the loss terms logged (step-weighted means over each log interval, all-reduced over the ranks)
LOGGED = (
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


def every(interval: int, step: int) -> bool:
    """Whether ``step`` ends an interval of ``interval`` steps (never when it is 0)."""
    return interval > 0 and step % interval == 0


def train_step(run: Run, batch: dict[str, torch.Tensor], lr: float) -> tuple[dict, torch.Tensor]:
    """One optimizer step on ``batch`` at learning rate ``lr``: the loss under autocast,
    backward (DDP all-reduces the gradients), clipping, and AdamW's step unless the gradient
    norm is not finite (then counted in ``run.skipped``). Advances ``run.step`` and
    ``run.samples``; returns the loss terms and the gradient norm."""
    device = run.device
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
    for group in run.optimizer.param_groups:
        group["lr"] = lr
    with run.autocast():
        out = run.ddp_model(
            rest,
            deformed,
            neighbors=neighbors,
            parts=parts,
            islands=islands,
            loss_config=run.loss,
        )
    out["loss"].backward()
    grad_norm = torch.nn.utils.clip_grad_norm_(
        run.model.parameters(), run.args.grad_clip if run.args.grad_clip > 0 else math.inf
    )
    if torch.isfinite(grad_norm):  # identical on every rank (the grads are all-reduced)
        run.optimizer.step()
    else:
        run.skipped += 1
    run.optimizer.zero_grad(set_to_none=True)
    run.step += 1
    run.samples += rest.shape[0] * run.world
    return out, grad_norm


def train_loop(run: Run) -> None:
    """Step until the step or time budget is spent (the learning rate follows the spent
    fraction; every rank follows rank 0's clock). Logs the all-reduced means every
    ``--log-every`` steps, validates every ``--val-every``, saves every ``--save-every``; a
    Ctrl-C in a single process ends the loop (``finish`` then saves). Logs the last partial
    interval."""
    args, world = run.args, run.world
    budget_s = args.minutes * 60.0 if args.minutes else math.inf
    bar = tqdm(
        total=args.steps,
        initial=run.step,
        disable=not run.master or args.quiet,
        unit="step",
        dynamic_ncols=True,
    )
    sums = [0.0] * (len(LOGGED) + 2)  # the logged terms, grad norm, steps
    interval_start, interval_samples = time.perf_counter(), run.samples

    def log_interval() -> None:
        """All-reduce the sums since the last log line; log their means on rank 0."""
        nonlocal sums, interval_start, interval_samples
        totals = all_reduce_sum(sums, run.device, world)
        now = time.perf_counter()
        rate = (run.samples - interval_samples) / (now - interval_start)
        last = {k: totals[i] / totals[-1] for i, k in enumerate((*LOGGED, "grad_norm"))}
        run.recent[:] = [*run.recent[-9:], {**last, "steps": totals[-1] / world}]
        if run.master:
            log_metrics(
                run,
                {
                    "kind": "train",
                    "step": run.step,
                    "time": round(run.elapsed(), 2),
                    "lr": lr,
                    **last,
                    "samples_per_s": rate,
                },
            )
            bar.set_postfix(
                loss=f"{last['loss']:.3g}",
                kl=f"{last['kl']:.3g}",
                rmse=f"{last['rmse']:.3g}",
                sps=f"{rate:.0f}",
            )
        sums = [0.0] * len(sums)
        interval_start, interval_samples = now, run.samples

    lr = learning_rate(args, run.step, 0.0)
    run.model.train()
    try:
        while True:
            spent = broadcast_value(run.elapsed(), run.device, world)
            progress = max(run.step / args.steps if args.steps else 0.0, spent / budget_s)
            if progress >= 1.0:
                break
            batch = next(run.batches)
            lr = learning_rate(args, run.step, progress)
            out, grad_norm = train_step(run, batch, lr)
            values = [out[k].detach().float() for k in LOGGED]
            for i, v in enumerate([*values, grad_norm.detach().float()]):
                sums[i] += float(v)
            sums[-1] += 1
            bar.update(1)

            if every(args.log_every, run.step):
                log_interval()
            if run.val_loader is not None and every(args.val_every, run.step):
                validate_and_log(run)
            if every(args.save_every, run.step):
                save(run)
    except KeyboardInterrupt:
        if world > 1:
            raise
        print(f"\ninterrupted at step {run.step}; saving (continue with --resume)", file=sys.stderr)
    bar.close()
    if sums[-1]:
        log_interval()


# ---------------------------------------------------------------------------- the end, main
def finish(run: Run) -> dict:
    """Validate (unless the last step just did), save, and on rank 0 close the logs, plot
    training_curves.png and print the summary; leave the process group. Returns the training
    record with the validation metrics under ``val``."""
    if run.val_loader is not None and not (run.val_metrics and every(run.args.val_every, run.step)):
        validate_and_log(run)
    save(run)
    record = training_record(run)
    if run.master:
        run.writer.close()
        if not run.args.no_plot:
            from .plots import plot_training

            plot_training(run.out / METRICS_FILE, run.out / "training_curves.png")
        summary = {k: record[k] for k in ("steps", "samples", "wall_time_s", "samples_per_s")}
        final = {**summary, "final": final_losses(run.recent), **run.val_metrics}
        print(json.dumps(final), file=sys.stderr)
    if run.world > 1:
        dist.barrier()
        dist.destroy_process_group()
    return {**record, "val": run.val_metrics}


def main(argv: list[str] | None = None) -> dict:
    """Train; returns the final record (steps, wall time, samples/s, losses, validation)."""
    run = setup(argv)
    train_loop(run)
    return finish(run)


if __name__ == "__main__":
    main()
