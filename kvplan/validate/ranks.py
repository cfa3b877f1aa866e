"""validate on several ranks: one process per tensor-parallel rank (`python -m
kvplan.validate`), meeting through torch.distributed (NCCL on GPUs, Gloo on CPU); each
allocates and measures its own shard and rank 0 gathers the results."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kvplan.core.errors import BadInputError, KvplanError
from kvplan.validate.allocate import _check_fits, _resolve_device, require_torch, run_rank
from kvplan.validate.predict import total
from kvplan.validate.results import RANK_TIMEOUT_S, RankResult, ValidateRequest


def launch_ranks(request: ValidateRequest, timeout_s: int = RANK_TIMEOUT_S) -> list[RankResult]:
    """Start --tp rank processes; each allocates and measures its shard, rank 0 gathers all.

    Ranks are plain subprocesses (`python -m kvplan.validate`) meeting at a file:// store;
    they are killed, and the store removed, on every way out (Ctrl-C included). When one
    fails the others are stopped at once rather than left waiting in the collective.
    """
    world = request.tp
    torch = require_torch()
    cuda = request.device == "cuda" or request.device == "auto" and torch.cuda.is_available()
    if cuda and torch.cuda.device_count() < world:
        raise BadInputError(f"--tp {world} needs {world} GPUs; torch sees "
                            f"{torch.cuda.device_count()}", "use --device cpu (Gloo ranks)")
    if not cuda:  # the ranks share this machine's memory: check their sum before starting
        _check_fits(request, total(request), torch.device("cpu"), torch, ranks_here=world)
    package_root = str(Path(__file__).resolve().parent.parent.parent)
    env = dict(os.environ)
    env["PYTHONPATH"] = package_root + (os.pathsep + env["PYTHONPATH"]
                                        if env.get("PYTHONPATH") else "")
    with tempfile.TemporaryDirectory(prefix="kvplan-validate-") as tmp:
        job, out = Path(tmp) / "request.pkl", Path(tmp) / "result.pkl"
        job.write_bytes(pickle.dumps(request))
        procs: list[subprocess.Popen[bytes]] = []
        logs = [Path(tmp) / f"rank{r}.log" for r in range(world)]
        try:
            for rank in range(world):
                with open(logs[rank], "wb") as log:
                    procs.append(subprocess.Popen(
                        [sys.executable, "-m", "kvplan.validate", str(job), str(rank),
                         str(world), str(Path(tmp) / "store"), str(out)],
                        env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log))
            deadline = time.monotonic() + timeout_s
            while any(proc.poll() is None for proc in procs):
                failed = [r for r, proc in enumerate(procs) if proc.poll()]
                if failed or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            failed = [r for r, proc in enumerate(procs) if proc.poll()]
            if out.exists():
                status, payload = pickle.loads(out.read_bytes())
                if status == "error":
                    raise BadInputError(payload[0], payload[1])
                return list(payload)
            if failed:
                tail = logs[failed[0]].read_text(errors="replace").strip().splitlines()
                raise KvplanError(f"validate rank {failed[0]} failed: "
                                  + (tail[-1] if tail else "no output"))
            raise BadInputError(f"the {world} validate ranks did not finish within "
                                f"{timeout_s} s; they were stopped")
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()


def _rank_main(argv: Sequence[str]) -> int:
    """One rank: init the process group, allocate and measure, gather to rank 0."""
    from datetime import timedelta

    job, rank_s, world_s, store, out = argv
    rank, world = int(rank_s), int(world_s)
    request: ValidateRequest = pickle.loads(Path(job).read_bytes())
    torch = require_torch()
    import torch.distributed as dist

    device = _resolve_device(torch, request.device, rank)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo",
                            init_method=f"file://{store}", rank=rank, world_size=world,
                            timeout=timedelta(seconds=RANK_TIMEOUT_S // 2))
    try:
        try:
            outcome: Any = run_rank(request, rank, check_memory=device.type == "cuda")
        except KvplanError as exc:
            outcome = ("error", (f"rank {rank}: {exc.message}", exc.hint))
        except Exception as exc:  # reach the collective anyway, so no rank waits for us
            outcome = ("error", (f"rank {rank}: {type(exc).__name__}: {exc}", None))
        gathered = _all_gather_objects(outcome, world, device, torch, dist)
        if rank == 0:
            failed = [g for g in gathered if isinstance(g, tuple)]
            Path(out).write_bytes(pickle.dumps(failed[0] if failed else ("ok", gathered)))
    finally:
        dist.destroy_process_group()
    return 0


def _all_gather_objects(obj: Any, world: int, device: Any, torch: Any, dist: Any) -> list[Any]:
    """all_gather of pickled objects as uint8 tensors (gather_object needs numpy)."""
    data = pickle.dumps(obj)
    size = torch.tensor([len(data)], dtype=torch.int64, device=device)
    sizes = [torch.zeros_like(size) for _ in range(world)]
    dist.all_gather(sizes, size)
    longest = max(int(x.item()) for x in sizes)
    buf = torch.zeros(longest, dtype=torch.uint8, device=device)
    buf[:len(data)] = torch.frombuffer(bytearray(data), dtype=torch.uint8).to(device)
    bufs = [torch.zeros_like(buf) for _ in range(world)]
    dist.all_gather(bufs, buf)
    return [pickle.loads(bytes(b[:int(n.item())].cpu().tolist()))
            for b, n in zip(bufs, sizes, strict=True)]

