"""PyTorch distributed data-parallel (DDP) training of a small digit classifier.

Started by ``torchrun`` (or by ``trainc run --local``, which sets the same
variables): every process reads RANK, WORLD_SIZE and LOCAL_RANK, and meets
the others at MASTER_ADDR:MASTER_PORT through ``init_process_group``'s
``env://`` method. Without WORLD_SIZE it trains alone (for development).

Data: generated, never downloaded. Ten classes of 8x8 "digit" images, each a
fixed random prototype (from a seeded generator, so every process builds the
same data) plus noise; 20% held out. Each process trains on its shard of
every epoch (DistributedSampler); DDP averages the gradients, so the copies
of the model stay equal, and every process evaluates the same model on the
test set.

Outputs (rank 0): ``<model_dir>/model.pt`` and ``<model_dir>/metrics.json``,
written atomically; TensorBoard summaries in ``<log_dir>`` when
``torch.utils.tensorboard`` imports, else ``<log_dir>/metrics.jsonl``. Every
rank ends with one line ``rank R of W finished: test accuracy A``.

Works with PyTorch 1.13 (Debian's) and 2.x: only stable APIs.
"""

import argparse
import json
import os
import signal
import sys

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

CLASSES = 10
PIXELS = 64
SAMPLES = 3000
NOISE = 0.6
SEED = 1234


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument("--batch_size", type=int, default=32)
    p.add_argument("--learning_rate", type=float, default=0.05)
    p.add_argument("--log_dir", default="logs")
    p.add_argument("--model_dir", default="model")
    return p.parse_args()


def digits():
    """The same train and test sets in every process: a seeded generator, not
    the global one, which the model's initialisation also draws from."""
    g = torch.Generator().manual_seed(SEED)
    prototypes = torch.rand(CLASSES, PIXELS, generator=g)
    labels = torch.randint(0, CLASSES, (SAMPLES,), generator=g)
    images = prototypes[labels] + NOISE * torch.randn(SAMPLES, PIXELS, generator=g)
    cut = SAMPLES * 4 // 5
    return (
        TensorDataset(images[:cut], labels[:cut]),
        TensorDataset(images[cut:], labels[cut:]),
    )


def atomic_write(path, write):
    """Readers (TensorBoard, a later run, the user) never see half a file."""
    tmp = f"{path}.tmp"
    write(tmp)
    os.replace(tmp, path)


class Summaries:
    """Scalars for TensorBoard when it is installed, else JSON lines."""

    def __init__(self, log_dir):
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            SummaryWriter = None
        self.writer = SummaryWriter(log_dir) if SummaryWriter else None
        self.path = os.path.join(log_dir, "metrics.jsonl")

    def scalar(self, name, value, step):
        if self.writer:
            self.writer.add_scalar(name, value, step)
        else:
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(json.dumps({"name": name, "value": value, "step": step}) + "\n")

    def close(self):
        if self.writer:
            self.writer.close()


def accuracy(model, data, device):
    model.eval()
    with torch.no_grad():
        images, labels = data.tensors
        predicted = model(images.to(device)).argmax(dim=1)
        return (predicted == labels.to(device)).float().mean().item()


def main():
    args = parse_args()
    # A supervisor (the kubelet, trainc run --local) stops with SIGTERM: exit
    # at once, non-zero, rather than block in a collective operation.
    signal.signal(signal.SIGTERM, lambda *_: os._exit(143))

    distributed = "WORLD_SIZE" in os.environ
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if torch.cuda.is_available():
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
        backend = "nccl"
    else:
        device = torch.device("cpu")
        backend = "gloo"
    if distributed:
        dist.init_process_group(backend)
    print(f"rank {rank} of {world}: {backend if distributed else 'alone'} on {device}",
          flush=True)

    # Equal initial weights everywhere (DDP would broadcast rank 0's anyway).
    torch.manual_seed(SEED)
    train, test = digits()
    sampler = DistributedSampler(train, num_replicas=world, rank=rank, seed=SEED) \
        if distributed else None
    loader = DataLoader(train, batch_size=args.batch_size, sampler=sampler,
                        shuffle=sampler is None)
    model = nn.Sequential(nn.Linear(PIXELS, 64), nn.ReLU(), nn.Linear(64, CLASSES)).to(device)
    if distributed:
        model = DistributedDataParallel(model, device_ids=[local_rank] if backend == "nccl" else None)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.learning_rate, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()

    summaries = None
    if rank == 0:
        os.makedirs(args.log_dir, exist_ok=True)
        os.makedirs(args.model_dir, exist_ok=True)
        summaries = Summaries(args.log_dir)

    for epoch in range(args.epochs):
        if sampler is not None:
            sampler.set_epoch(epoch)
        model.train()
        total = 0.0
        for images, labels in loader:
            optimizer.zero_grad()
            loss = loss_fn(model(images.to(device)), labels.to(device))
            loss.backward()
            optimizer.step()
            total += loss.item()
        loss = total / max(1, len(loader))
        print(f"rank {rank}: epoch {epoch + 1}/{args.epochs} loss {loss:.4f}", flush=True)
        if summaries:
            summaries.scalar("loss", loss, epoch + 1)

    result = accuracy(model, test, device)
    if rank == 0:
        summaries.scalar("accuracy", result, args.epochs)
        summaries.close()
        plain = model.module if distributed else model
        atomic_write(os.path.join(args.model_dir, "model.pt"),
                     lambda p: torch.save(plain.state_dict(), p))
        metrics = {"accuracy": round(result, 4), "world_size": world, "epochs": args.epochs}
        atomic_write(os.path.join(args.model_dir, "metrics.json"),
                     lambda p: open(p, "w", encoding="utf-8").write(json.dumps(metrics) + "\n"))
    if distributed:
        # Nobody leaves before rank 0 has written the model.
        dist.barrier()
        dist.destroy_process_group()
    print(f"rank {rank} of {world} finished: test accuracy {result:.4f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
