"""The "atp" torch.distributed backend: ATP for allreduce, Gloo for everything else.

    import atp.distributed                       # registers the backend "atp"
    torch.distributed.init_process_group("atp")  # under torchrun: store, rank, world size
    model = torch.nn.parallel.DistributedDataParallel(model)   # nothing else changes

float32 SUM/AVG allreduces (DDP's gradient buckets among them) go through ATP: switches
aggregate them in the network and the parameter server completes what they could not, exactly.
Every other collective, dtype and op goes to a Gloo process group built from the same store.

Where the job runs: the controller named by ``Options(controller=...)`` or ``$ATP_CONTROLLER``
(``atp controller``) admits it when the group is created and removes it at
``destroy_process_group()``; with neither, rank 0 starts a loopback fabric (a switch and a PS
in its own process), so a single-machine run works out of the box. Each setting below can come
from ``Options`` (passed as ``pg_options``) or from its environment variable. docs/pytorch.md.
"""
import dataclasses
import os
from typing import Optional

import torch
import torch.distributed as dist

from . import _c10d

ProcessGroupATP = _c10d.ProcessGroupATP


@dataclasses.dataclass
class Options:
    """Settings of the "atp" backend; None: the environment variable, else the default."""
    controller: Optional[str] = None         # ATP_CONTROLLER: host:port of `atp controller`
    credential: Optional[str] = None         # ATP_CREDENTIAL: if the controller needs one to admit
    tls_ca_file: Optional[str] = None        # ATP_CONTROLLER_CA: talk TLS, trusting this CA (PEM)
    rack: Optional[str] = None               # ATP_RACK: this node's rack switch (one rack: itself)
    worker_ip: Optional[str] = None          # ATP_WORKER_IP: address to bind (default: routed one)
    name: Optional[str] = None               # ATP_JOB_NAME: shown by `atp job list`
    values_per_packet: Optional[int] = None  # ATP_VALUES_PER_PACKET: K (default: the switch's)
    window: Optional[int] = None             # ATP_WINDOW: fragments in flight (default 64)
    parameter_servers: Optional[int] = None  # ATP_PARAMETER_SERVERS: PS shards (default 1)
    max_gradient: Optional[float] = None     # ATP_MAX_GRADIENT: largest |gradient| (default 1)
    lease_seconds: Optional[int] = None      # ATP_LEASE_SECONDS (default: the controller's)
    deadline_ms: Optional[int] = None        # ATP_DEADLINE_MS: an allreduce fails after this


_ENVIRONMENT = {
    "controller": ("ATP_CONTROLLER", str), "credential": ("ATP_CREDENTIAL", str),
    "tls_ca_file": ("ATP_CONTROLLER_CA", str),
    "rack": ("ATP_RACK", str), "worker_ip": ("ATP_WORKER_IP", str),
    "name": ("ATP_JOB_NAME", str), "values_per_packet": ("ATP_VALUES_PER_PACKET", int),
    "window": ("ATP_WINDOW", int), "parameter_servers": ("ATP_PARAMETER_SERVERS", int),
    "max_gradient": ("ATP_MAX_GRADIENT", float), "lease_seconds": ("ATP_LEASE_SECONDS", int),
    "deadline_ms": ("ATP_DEADLINE_MS", int),
}


def _settings(options: Optional[Options]) -> dict:
    if options is not None and not isinstance(options, Options):
        raise TypeError(f"pg_options for the atp backend must be atp.distributed.Options, "
                        f"not {type(options).__name__}")
    settings = {}
    for field, (variable, kind) in _ENVIRONMENT.items():
        value = getattr(options, field) if options is not None else None
        if value is None and os.environ.get(variable):
            try:
                value = kind(os.environ[variable])
            except ValueError:
                raise ValueError(f"{variable}={os.environ[variable]!r} is not a {kind.__name__}")
        if value is not None:
            settings[field] = value
    return settings


def _create(backend_options, pg_options):
    store = backend_options.store
    rank, size = backend_options.group_rank, backend_options.group_size
    gloo = dist.ProcessGroupGloo(dist.PrefixStore("gloo/", store), rank, size,
                                 backend_options.timeout)
    return ProcessGroupATP(store, rank, size, gloo, _settings(pg_options))


def _atp_groups(group):
    """The ATP groups destroy_process_group(group) ends: all of them for the default group."""
    c10d = dist.distributed_c10d
    if group is None or group is c10d.GroupMember.WORLD:
        return [pg for pg in list(c10d._pg_map) if isinstance(pg, ProcessGroupATP)]
    return [group] if isinstance(group, ProcessGroupATP) else []


_torch_destroy_process_group = dist.destroy_process_group


def destroy_process_group(group=None):
    """torch's, after leaving ATP's jobs: DDP keeps its group alive past this call, and the
    job must not outlive it (rank 0 removes it once every rank left)."""
    for pg in _atp_groups(group):
        pg.shutdown()
    _torch_destroy_process_group(group)


_torch_monitored_barrier = dist.monitored_barrier


def monitored_barrier(group=None, timeout=None, wait_all_ranks=False):
    """torch's, which refuses any group but a Gloo one by name: an "atp" group's runs on its
    Gloo partner (every collective but the reductions does), reporting the ranks that did not
    pass as Gloo's does."""
    c10d = dist.distributed_c10d
    pg = c10d._get_default_group() if group is None or group is c10d.GroupMember.WORLD else group
    if not isinstance(pg, ProcessGroupATP) or c10d._rank_not_in_group(group):
        return _torch_monitored_barrier(group=c10d.GroupMember.WORLD if group is None else group,
                                        timeout=timeout, wait_all_ranks=wait_all_ranks)
    return pg.monitored_barrier(c10d.default_pg_timeout if timeout is None else timeout,
                                wait_all_ranks=wait_all_ranks)


def bfloat16_compress_hook(process_group, bucket):
    """torch's bf16_compress_hook, step for step (each bucket divided by the world size in
    bfloat16 and summed, then widened back), for DDP's register_comm_hook: torch 1.13 refuses to
    register its own without CUDA 11 and NCCL 2.10 (and any hook of that name: hence this
    one's). On an "atp" group the bfloat16 bucket goes
    through the network as itself; this torch's Gloo has no bfloat16 sum."""
    group = process_group if process_group is not None else dist.group.WORLD
    compressed = bucket.buffer().to(torch.bfloat16).div_(dist.get_world_size(group))
    future = dist.all_reduce(compressed, group=group, async_op=True).get_future()

    def decompress(fut):
        return bucket.buffer().copy_(fut.value()[0])
    return future.then(decompress)


if "ATP" not in dist.Backend._plugins:
    dist.Backend.register_backend("atp", _create, extended_api=True)
    dist.destroy_process_group = destroy_process_group
    dist.distributed_c10d.destroy_process_group = destroy_process_group
    dist.monitored_barrier = monitored_barrier
    dist.distributed_c10d.monitored_barrier = monitored_barrier

__all__ = ["Options", "ProcessGroupATP", "bfloat16_compress_hook", "destroy_process_group",
           "monitored_barrier"]
