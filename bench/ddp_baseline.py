#!/usr/bin/env python3
"""The baseline of the data-parallel benchmark: PyTorch DDP (the project
venv's torch, the same as hydrozoa links; the gloo backend), N processes on
this machine, the same CNN as hydrozoa's zoo model `cnn`, Fashion-MNIST from
Debian's package held in memory, the same global batch, SGD with momentum,
one compute thread per process. Prints {"samples_per_s": ...} over the steps
after the warm-up.

  .venv/bin/python bench/ddp_baseline.py [--procs 2] [--batch 128] [--steps 300] [--warmup 20]
                                         [--pin ranks|compute]

--pin ranks puts the whole of rank r (every thread, Gloo's included) on core
r, before the process group starts. --pin compute pins only the thread that
computes, once Gloo's threads exist and keep every core, as hydrozoa pins
its workers' compute threads and leaves its helper threads free (NOTE [Cores
for compute threads]). glibc's allocator thresholds come from the
environment (MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_), which bench/
train_bench.sh sets to hydrozoa's own for the pinned variants.
"""
import argparse, gzip, json, os, socket, struct, time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn


def fashion_mnist(root="/usr/share/datasets/fashion-mnist"):
    with gzip.open(os.path.join(root, "train-images-idx3-ubyte.gz")) as f:
        _, n, h, w = struct.unpack(">IIII", f.read(16))
        images = np.frombuffer(f.read(), dtype=np.uint8).reshape(n, 1, h, w)
    with gzip.open(os.path.join(root, "train-labels-idx1-ubyte.gz")) as f:
        f.read(8)
        labels = np.frombuffer(f.read(), dtype=np.uint8)
    return torch.from_numpy(images.copy()), torch.from_numpy(labels.astype(np.int64))


def cnn():  # hydrozoa's zoo model "cnn"
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))


def worker(rank, procs, port, batch, steps, warmup, out, pin):
    core = sorted(os.sched_getaffinity(0))[rank % len(os.sched_getaffinity(0))]
    if pin == "ranks":
        os.sched_setaffinity(0, {core})
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=procs)
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(cnn())
    if pin == "compute":
        # Linux: pid 0 is the calling thread; the threads that exist (Gloo's,
        # DDP's) keep their affinity.
        os.sched_setaffinity(0, {core})
    sgd = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    images, labels = fashion_mnist()
    per = batch // procs
    perm = torch.randperm(len(labels), generator=torch.Generator().manual_seed(0))
    loss_fn = nn.CrossEntropyLoss()
    start = time.monotonic()
    for s in range(warmup + steps):
        if s == warmup:
            dist.barrier()
            start = time.monotonic()
        idx = perm[(s * batch + rank * per) % (len(labels) - batch):][:per]
        x = images.index_select(0, idx).float().div_(255).sub_(0.2860).div_(0.3530)
        y = labels.index_select(0, idx)
        loss = loss_fn(model(x), y)
        sgd.zero_grad()
        loss.backward()
        sgd.step()
    dist.barrier()
    seconds = time.monotonic() - start
    if rank == 0:
        with open(out, "w") as f:
            json.dump({"samples_per_s": steps * batch / seconds, "steps": steps, "seconds": seconds}, f)
    dist.destroy_process_group()


def main():
    a = argparse.ArgumentParser()
    a.add_argument("--procs", type=int, default=2)
    a.add_argument("--batch", type=int, default=128)
    a.add_argument("--steps", type=int, default=300)
    a.add_argument("--warmup", type=int, default=20)
    a.add_argument("--pin", choices=["ranks", "compute"],
                   help="ranks: every thread of rank r on core r; compute: only its compute thread, after Gloo's start")
    args = a.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = f"/tmp/ddp_baseline.{os.getpid()}.json"
    mp.spawn(worker, args=(args.procs, port, args.batch, args.steps, args.warmup, out, args.pin), nprocs=args.procs)
    with open(out) as f:
        print(f.read())
    os.remove(out)


if __name__ == "__main__":
    main()
