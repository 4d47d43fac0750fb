"""A starter PyTorch program, written by `trainc init`: distributed data
parallel (DDP) training of a small classifier. Replace the data and the model
with yours.

``torchrun`` in the cluster, and ``trainc run --local`` on this machine, start
one process per rank with RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR and
MASTER_PORT set; the processes meet at rank 0 (``init_process_group``). Each
trains on its shard of every epoch and DDP averages the gradients, so every
copy of the model stays the same. Rank 0 writes ``metrics.json`` and
``model.pt`` into ``--model_dir``, and TensorBoard summaries into
``--log_dir`` when the tensorboard package is installed. Without WORLD_SIZE it trains alone:
``python train.py``.

The data is generated (ten classes of noisy 8x8 images around fixed
prototypes), so nothing is downloaded.
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

try:  # TensorBoard's charts need the tensorboard package (requirements.txt)
    from torch.utils.tensorboard import SummaryWriter
except ImportError:
    SummaryWriter = None

SEED = 7
CLASSES, PIXELS, SAMPLES, NOISE = 10, 64, 2000, 0.6


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--batch_size", type=int, default=32)
    p.add_argument("--learning_rate", type=float, default=0.05)
    p.add_argument("--log_dir", default="logs")
    p.add_argument("--model_dir", default="model")
    args, unknown = p.parse_known_args()
    if unknown:
        print(f"ignoring unknown arguments: {' '.join(unknown)}", flush=True)
    return args


def data():
    """The same train and test sets in every process: a generator of its own,
    not the global one the model's initialisation draws from."""
    g = torch.Generator().manual_seed(SEED)
    prototypes = torch.rand(CLASSES, PIXELS, generator=g)
    y = torch.randint(0, CLASSES, (SAMPLES,), generator=g)
    x = prototypes[y] + NOISE * torch.randn(SAMPLES, PIXELS, generator=g)
    cut = SAMPLES * 4 // 5
    return TensorDataset(x[:cut], y[:cut]), TensorDataset(x[cut:], y[cut:])


def main():
    args = parse_args()
    # Stopped by the supervisor (the kubelet, trainc): leave at once rather
    # than block in a collective operation.
    signal.signal(signal.SIGTERM, lambda *_: os._exit(143))
    distributed = "WORLD_SIZE" in os.environ
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if torch.cuda.is_available():
        device, backend = torch.device("cuda", local_rank), "nccl"
        torch.cuda.set_device(device)
    else:
        device, backend = torch.device("cpu"), "gloo"
    if distributed:
        dist.init_process_group(backend)
    print(f"rank {rank} of {world}: {backend if distributed else 'alone'} on {device}",
          flush=True)

    torch.manual_seed(SEED)  # the same initial weights in every process
    train, test = data()
    sampler = DistributedSampler(train, num_replicas=world, rank=rank, seed=SEED) \
        if distributed else None
    loader = DataLoader(train, batch_size=args.batch_size, sampler=sampler,
                        shuffle=sampler is None)
    model = nn.Sequential(nn.Linear(PIXELS, 32), nn.ReLU(), nn.Linear(32, CLASSES)).to(device)
    if distributed:
        model = DistributedDataParallel(model, device_ids=[local_rank] if backend == "nccl" else None)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.learning_rate, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    writer = SummaryWriter(args.log_dir) if rank == 0 and SummaryWriter else None

    for epoch in range(1, args.epochs + 1):
        if sampler is not None:
            sampler.set_epoch(epoch)
        model.train()
        total = 0.0
        for x, y in loader:
            optimizer.zero_grad()
            loss = loss_fn(model(x.to(device)), y.to(device))
            loss.backward()
            optimizer.step()
            total += loss.item()
        loss = total / len(loader)
        print(f"rank {rank}: epoch {epoch}/{args.epochs}: loss {loss:.4f}", flush=True)
        if writer:
            writer.add_scalar("loss", loss, epoch)

    model.eval()
    with torch.no_grad():
        x, y = test.tensors
        accuracy = (model(x.to(device)).argmax(dim=1) == y.to(device)).float().mean().item()
    if writer:
        writer.add_scalar("accuracy", accuracy, args.epochs)
        writer.close()
    if rank == 0:
        os.makedirs(args.model_dir, exist_ok=True)
        plain = model.module if distributed else model
        torch.save(plain.state_dict(), os.path.join(args.model_dir, "model.pt"))
        with open(os.path.join(args.model_dir, "metrics.json"), "w") as f:
            json.dump({"test_accuracy": round(accuracy, 4), "epochs": args.epochs,
                       "world_size": world}, f)
    if distributed:
        dist.barrier()  # nobody leaves before rank 0 has saved
        dist.destroy_process_group()
    print(f"rank {rank} of {world} finished: test accuracy {accuracy:.4f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
