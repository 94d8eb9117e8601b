"""The training engine of chapter 10: one loop for a CPU, a GPU, or several GPUs.

`fit(model, get_batch, loss_fn, config, count=...)` trains any model with the chapter's own
pieces (``parts.lr_at``, ``parts.train_step``, ``parts.evaluate``, from `course.parts`: the
course's reference answers by default, or a learner's), and returns a `History`:

* AdamW; weight decay on matrices only (every parameter with two or more axes: the linear
  layers' weights and the tied embedding), none on vectors (biases, LayerNorm gains and biases),
  as nanoGPT does. Each step's learning rate comes from ``parts.lr_at``.
* the device: ``"auto"`` picks CUDA, then MPS, then the CPU; bf16 autocast on CUDA;
  ``torch.compile`` on request.
* throughput: tokens per second and, on a known GPU, the model FLOPs utilisation (MFU): the
  FLOPs the model needs (`estimate_flops_per_token`) over the GPU's peak bf16 FLOPs.
* checkpoints (model, optimizer, step, RNG states, history) every ``checkpoint_every`` steps and
  at the end; ``fit(..., resume=True)`` continues from one and gives exactly the loss curve of an
  unbroken run.
* several processes: under ``torchrun --nproc_per_node=N`` (see `course.char_lm`), the model is
  wrapped in DistributedDataParallel and each rank trains on its slice of the global batch
  (``config.batch_size`` rows in all); the gradients are averaged across ranks.
* a text progress bar (terminal or notebook) and `live_plot()`, a callback that redraws the loss
  curves in a notebook.

``get_batch(split, generator)`` returns a *global* batch (a tensor, or a tuple, list or dict of
tensors, batch-first) for split ``"train"`` or ``"val"``, drawing its randomness from
`generator`; `fit` moves it to the device and, with several ranks, keeps this rank's rows.
``loss_fn(model, batch)`` returns the batch's mean loss (a 0-dim tensor) and must call the
model itself (``model(...)``: DistributedDataParallel synchronises gradients through forward).
``count(batch)`` is how many tokens the batch trains on (for tokens per second).
"""

from __future__ import annotations

import itertools
import os
import platform
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from course.parts import Parts, reference_parts


@dataclass
class TrainConfig:
    """How to train. `batch_size` is the global batch (split across ranks under torchrun)."""

    steps: int
    batch_size: int
    max_lr: float
    warmup_steps: int
    min_lr: float = 0.0
    weight_decay: float = 0.1
    betas: tuple[float, float] = (0.9, 0.95)
    eps: float = 1e-8                   # AdamW's epsilon (PyTorch's default)
    max_grad_norm: float = 1.0
    eval_every: int = 0                 # 0: evaluate only at the end
    eval_batches: int = 10              # the same held-out batches at every evaluation
    device: str = "auto"                # "auto": cuda if available, else mps, else cpu
    autocast: bool | str = True         # True: bf16 on a bf16-capable CUDA GPU; "always": also on the CPU
    compile: bool = False               # torch.compile the model
    seed: int = 0
    threads: int | None = None          # torch.set_num_threads while training (CPU)
    time_limit: float | None = None     # seconds of training; stop early (after an evaluation)
    schedule: str = "steps"             # "time": the lr schedule runs on the clock, over time_limit seconds
    checkpoint: str | None = None       # path of the checkpoint file
    checkpoint_every: int = 0           # 0: only at the end (when `checkpoint` is set)
    progress: bool = True               # the progress bar


@dataclass
class History:
    """What a run recorded. train_loss[i], lr[i], grad_norm[i]: optimizer step i; val: (steps done,
    held-out loss) at each evaluation, val_seconds: the training seconds at each evaluation."""

    steps: int = 0
    train_loss: list[float] = field(default_factory=list)
    lr: list[float] = field(default_factory=list)
    grad_norm: list[float] = field(default_factory=list)
    val: list[tuple[int, float]] = field(default_factory=list)
    val_seconds: list[float] = field(default_factory=list)
    seconds: float = 0.0                # training time: evaluations, checkpoints, compilation left out
    compile_seconds: float = 0.0        # with config.compile: the first step, which compiles the model
    tokens: int = 0
    tokens_per_second: float = 0.0
    mfu: float | None = None            # model FLOPs utilisation (GPU only)
    device: str = ""
    hardware: str = ""
    world_size: int = 1

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> History:
        return cls(**{**d, "val": [tuple(v) for v in d["val"]]})


# ---------------------------------------------------------------- hardware ---

# peak dense bf16 tensor-core FLOP/s, by a substring of torch.cuda.get_device_name() (first match);
# GPUs without bf16 tensor cores (V100, T4), where fit stays in fp32, have none: no MFU is given there
PEAK_FLOPS: list[tuple[str, float]] = [
    ("H100 PCIe", 756e12), ("H100", 989e12), ("H200", 989e12), ("GH200", 989e12), ("B200", 2250e12),
    ("A100", 312e12), ("A10G", 70e12), ("A10", 125e12), ("L40S", 362e12), ("L4", 121e12),
    ("RTX 4090", 165e12), ("RTX 3090", 71e12),
]


def pick_device(name: str = "auto") -> torch.device:
    """"auto" -> cuda (this rank's GPU under torchrun), else mps, else cpu; any other name as given
    ("cuda" without an index: the current GPU)."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu"
    device = torch.device(name)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", torch.cuda.current_device())))
    return device


@contextmanager
def cpu_threads(n: int | None) -> Iterator[None]:
    """torch's CPU threads set to `n` inside the block and restored after it, whatever happens there
    (left alone when n is None)."""
    before = torch.get_num_threads()
    if n:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def load_average() -> str:
    """The machine's load averages (1, 5, 15 minutes), as `uptime` shows them."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def omp_wait_policy() -> str:
    """How OpenMP's threads wait for work in this process (OMP_WAIT_POLICY), for a run's record."""
    return os.environ.get("OMP_WAIT_POLICY", "unset (libgomp default)")


def hardware(device: torch.device, world_size: int = 1) -> str:
    """A line naming what `device` is: the GPU model, or the CPU and its threads."""
    if device.type == "cuda":
        return f"{world_size} x {torch.cuda.get_device_name(device)}"
    return f"{device.type}: {cpu_name()}, {torch.get_num_threads()} threads, torch {torch.__version__}"


def peak_flops(device: torch.device) -> float | None:
    """The peak bf16 FLOP/s of a known CUDA GPU; None on the CPU, MPS or an unknown GPU."""
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((flops for key, flops in PEAK_FLOPS if key in name), None)


def estimate_flops_per_token(model: nn.Module, context: int) -> float:
    """Training FLOPs per token: 6 N (N parameters: forward 2 N, backward 4 N) plus attention,
    6 * 2 * d_model * context per attention module (q k^T and weights @ v, forward and backward),
    as in PaLM's appendix B and nanoGPT. Attention modules: those with `num_heads` and `d_model`."""
    n = sum(p.numel() for p in model.parameters())
    attention = sum(12 * m.d_model * context for m in model.modules()
                    if hasattr(m, "num_heads") and hasattr(m, "d_model"))
    return 6 * n + attention


# ---------------------------------------------------------------- progress ---

def in_notebook() -> bool:
    """True inside a Jupyter kernel."""
    shell = sys.modules.get("IPython") and sys.modules["IPython"].get_ipython()
    return shell is not None and hasattr(shell, "kernel")


class ProgressBar:
    """A one-line text bar, redrawn in place: through a display handle in a notebook, with a
    carriage return in a terminal, as a new line every tenth of the way elsewhere (logs)."""

    def __init__(self, total: int, width: int = 24, stream=None) -> None:
        self.total, self.width = total, width
        self.stream = stream or sys.stderr
        self.start = self.shown = time.perf_counter()
        self.tenth = -1
        self.handle = None
        if in_notebook():
            from IPython.display import Pretty, display
            self.handle = display(Pretty(""), display_id=True)

    def line(self, done: int, text: str) -> str:
        filled = round(self.width * done / self.total)
        seconds = time.perf_counter() - self.start
        eta = seconds / max(done, 1) * (self.total - done)
        return (f"{done:>{len(str(self.total))}}/{self.total} [{'#' * filled}{'.' * (self.width - filled)}] "
                f"{seconds:.0f}s<{eta:.0f}s {text}")

    def update(self, done: int, text: str = "", force: bool = False) -> None:
        now = time.perf_counter()
        if self.handle is not None:
            if force or now - self.shown > 0.5:
                from IPython.display import Pretty
                self.handle.update(Pretty(self.line(done, text)))
                self.shown = now
        elif self.stream.isatty():
            if force or now - self.shown > 0.1:
                self.stream.write("\r" + self.line(done, text))
                self.stream.flush()
                self.shown = now
        elif force or 10 * done // self.total > self.tenth:
            self.tenth = 10 * done // self.total
            self.stream.write(self.line(done, text) + "\n")

    def close(self) -> None:
        if self.handle is None and self.stream.isatty():
            self.stream.write("\n")


def live_plot(every: int = 50, figsize: tuple[float, float] = (7, 3)) -> Callable[[int, History], None]:
    """A `fit` callback that redraws the training and validation loss in a notebook every `every`
    steps and after each evaluation. Outside a notebook it does nothing."""
    if not in_notebook():
        return lambda step, history: None
    import matplotlib.pyplot as plt
    from IPython.display import Pretty, display

    handle = display(Pretty(""), display_id=True)
    seen = [0]   # evaluations drawn so far

    def draw(step: int, history: History) -> None:
        if step % every and len(history.val) == seen[0]:
            return
        seen[0] = len(history.val)
        fig, ax = plt.subplots(figsize=figsize)
        ax.plot(range(1, len(history.train_loss) + 1), history.train_loss, lw=0.8, label="train")
        if history.val:
            ax.plot(*zip(*history.val), "o-", label="validation")
        ax.set(xlabel="step", ylabel="loss", title=f"step {step}: {history.tokens_per_second:,.0f} tokens/s")
        ax.legend()
        handle.update(fig)
        plt.close(fig)

    return draw


# ------------------------------------------------------------ distributed ---

def world() -> tuple[int, int]:
    """(rank, world size): (0, 1) unless torch.distributed is initialised."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def setup_distributed() -> tuple[int, int]:
    """Under torchrun (RANK in the environment): join the process group, nccl on CUDA, gloo on
    the CPU. Returns (rank, world size)."""
    if "RANK" in os.environ and not dist.is_initialized():
        backend = "nccl" if torch.cuda.is_available() else "gloo"
        if backend == "nccl":
            torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
        dist.init_process_group(backend)
    return world()


def shard(batch: Any, device: torch.device, rank: int = 0, world_size: int = 1) -> Any:
    """This rank's rows of every tensor in `batch` (a tensor, tuple, list or dict), on `device`."""
    if isinstance(batch, torch.Tensor):
        rows = batch.shape[0] // world_size
        return batch[rank * rows:(rank + 1) * rows].to(device, non_blocking=True)
    if isinstance(batch, dict):
        return {k: shard(v, device, rank, world_size) for k, v in batch.items()}
    if isinstance(batch, (tuple, list)):
        return type(batch)(shard(v, device, rank, world_size) for v in batch)
    return batch


# ------------------------------------------------------------ checkpoints ---

def make_optimizer(model: nn.Module, config: TrainConfig, device: torch.device) -> torch.optim.AdamW:
    """AdamW (PyTorch's fused kernel on CUDA and the CPU) with weight decay on the matrices
    (parameters with >= 2 axes) only."""
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": config.weight_decay},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=config.max_lr, betas=config.betas, eps=config.eps,
                             fused=device.type in ("cuda", "cpu"))


def save_checkpoint(path: str, model: nn.Module, optimizer: torch.optim.Optimizer,
                    data: torch.Generator, history: History) -> None:
    """Model, optimizer, the data generator's and torch's RNG states, and the history, written
    atomically (a crash mid-write leaves the previous checkpoint)."""
    state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
             "data_rng": data.get_state(), "torch_rng": torch.get_rng_state(),
             "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
             "history": history.to_dict()}
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    torch.save(state, path + ".tmp")
    os.replace(path + ".tmp", path)


def load_checkpoint(path: str, model: nn.Module, optimizer: torch.optim.Optimizer,
                    data: torch.Generator) -> History:
    """Restore what `save_checkpoint` wrote; returns the history so far."""
    state = torch.load(path, map_location="cpu")
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    data.set_state(state["data_rng"])
    torch.set_rng_state(state["torch_rng"])
    if state["cuda_rng"]:
        torch.cuda.set_rng_state_all(state["cuda_rng"])
    return History.from_dict(state["history"])


# --------------------------------------------------------------------- fit ---

def use_autocast(config: TrainConfig, device: torch.device) -> bool:
    """bf16 autocast: on a CUDA GPU with bf16 tensor cores (not one that only emulates bf16, such as a
    T4 or V100) when config.autocast is True; also on the CPU when it is "always"."""
    if device.type == "cuda":
        return bool(config.autocast) and torch.cuda.is_bf16_supported(including_emulation=False)
    return config.autocast == "always" and device.type == "cpu"


def fit(model: nn.Module, get_batch: Callable[[str, torch.Generator], Any],
        loss_fn: Callable[[nn.Module, Any], torch.Tensor], config: TrainConfig, *,
        count: Callable[[Any], int], parts: Parts | None = None,
        callback: Callable[[int, History], None] | None = None, resume: bool = False,
        flops_per_token: float | None = None) -> History:
    """Train `model` in place for config.steps optimizer steps; returns the History.

    Each step: the learning rate from parts.lr_at (with config.schedule "time", lr_at's step is
    config.steps * elapsed / config.time_limit: the schedule then ends when the time does, however
    fast the machine, and config.steps is only its resolution), a global batch get_batch("train", generator)
    (this rank's slice of it), parts.train_step. Every config.eval_every steps and at the end,
    parts.evaluate on config.eval_batches held-out batches (the same ones each time).
    The training batches draw from a generator seeded with config.seed; torch's global RNG (dropout)
    is seeded with config.seed + rank. callback(steps done, history) runs after each step (an
    exception there stops training: the last checkpoint stays). flops_per_token: for the MFU (default
    6 N; `estimate_flops_per_token` adds attention). With resume=True and an existing
    config.checkpoint, training continues from it.
    """
    parts = parts or reference_parts()
    rank, world_size = world()
    clock = config.schedule == "time"
    if clock and not config.time_limit:
        raise ValueError('schedule "time" needs a time_limit')
    if config.batch_size % world_size:
        raise ValueError(f"batch_size {config.batch_size} is not divisible by {world_size} ranks")
    device = pick_device(config.device)
    with cpu_threads(config.threads):
        model.to(device)
        optimizer = make_optimizer(model, config, device)
        data = torch.Generator().manual_seed(config.seed)            # the training batches
        torch.manual_seed(config.seed + rank)                          # dropout
        history = History(device=str(device), hardware=hardware(device, world_size), world_size=world_size)
        if resume and config.checkpoint and os.path.exists(config.checkpoint):
            history = load_checkpoint(config.checkpoint, model, optimizer, data)
        net = torch.compile(model) if config.compile else model
        if world_size > 1:
            net = nn.parallel.DistributedDataParallel(net, device_ids=[device.index] if device.type == "cuda" else None)
        amp = use_autocast(config, device)

        def loss(m: nn.Module, batch: Any) -> torch.Tensor:
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=amp):
                return loss_fn(m, batch).float()

        def validate() -> float:
            generator = torch.Generator().manual_seed(config.seed + 1_000_003)
            batches = [shard(get_batch("val", generator), device, rank, world_size) for _ in range(config.eval_batches)]
            mean = parts.evaluate(model, batches, lambda m, b: (loss(m, b), count(b)))
            if world_size == 1:
                return mean
            total = torch.tensor([mean * sum(map(count, batches)), sum(map(count, batches))],
                                 dtype=torch.float64, device=device)
            dist.all_reduce(total)
            return (total[0] / total[1]).item()

        flops = flops_per_token or 6 * sum(p.numel() for p in model.parameters())
        peak = peak_flops(device)
        bar = ProgressBar(config.steps) if config.progress and rank == 0 else None
        first = history.steps
        try:
            for step in itertools.count(history.steps) if clock else range(history.steps, config.steps):
                started = time.perf_counter()
                at = min(config.steps, int(config.steps * history.seconds / config.time_limit)) if clock else step
                lr = parts.lr_at(at, config.max_lr, config.warmup_steps, config.steps, config.min_lr)
                for group in optimizer.param_groups:
                    group["lr"] = lr
                batch = get_batch("train", data)
                value, norm = parts.train_step(net, optimizer, loss, shard(batch, device, rank, world_size),
                                               config.max_grad_norm)
                elapsed = time.perf_counter() - started
                if world_size > 1:  # the mean loss, and one clock for every rank (rank 0's): with the
                    # "time" schedule each rank's own clock would give it another lr and another last step
                    shared = torch.tensor([value, elapsed if rank == 0 else 0.0], dtype=torch.float64, device=device)
                    dist.all_reduce(shared)
                    value, elapsed = shared[0].item() / world_size, shared[1].item()
                if config.compile and step == first:
                    history.compile_seconds += elapsed
                else:
                    history.seconds += elapsed
                history.steps = step + 1
                history.train_loss.append(value)
                history.lr.append(lr)
                history.grad_norm.append(norm)
                history.tokens += count(batch)
                history.tokens_per_second = history.tokens / max(history.seconds, 1e-9)
                history.mfu = peak and flops * history.tokens_per_second / (peak * world_size)
                done = step + 1
                stop = config.time_limit is not None and history.seconds >= config.time_limit
                last = stop or (not clock and done == config.steps)
                if last or (config.eval_every and done % config.eval_every == 0):
                    history.val.append((done, validate()))
                    history.val_seconds.append(history.seconds)
                if config.checkpoint and rank == 0 and (
                        last or (config.checkpoint_every and done % config.checkpoint_every == 0)):
                    save_checkpoint(config.checkpoint, model, optimizer, data, history)
                if bar:
                    val = f" val {history.val[-1][1]:.4f}" if history.val else ""
                    bar.update(min(at + 1, config.steps),
                               f"loss {value:.4f}{val} lr {lr:.2e} {history.tokens_per_second:,.0f} tok/s", force=last)
                if callback:
                    callback(done, history)
                if stop:
                    break
        finally:
            if bar:
                bar.close()
    return history
