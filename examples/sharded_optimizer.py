"""Sharded data parallelism by hand, the communication FSDP and ZeRO-3 do: each rank keeps one
shard of the flattened parameters and that shard's optimizer state; every step the gradients
are reduce-scattered (each rank receives the sum of its own shard) and the updated shards are
all-gathered back into every rank's model.

torch.distributed.fsdp itself does not import with torch 1.13 on Python 3.11 (a dataclass with
a mutable default, whatever the backend), so examples/ddp_train.py --sharded uses this instead.
On "atp" the reduce-scatter is `reduce_scatter_tensor` (summed in the network); this torch's
Gloo has no reduce-scatter of a flat tensor, so on Gloo the same step is an allreduce of the
whole gradient and a slice of it.
"""
import torch
import torch.distributed as dist


class ShardedOptimizer:
    """SGD with momentum over `module`'s parameters, sharded across the default group."""

    def __init__(self, module, lr, momentum, backend):
        self.params = list(module.parameters())
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.total = sum(p.numel() for p in self.params)
        self.shard = -(-self.total // self.world)  # padded so every rank's shard is alike
        flat = self.flatten([p.detach() for p in self.params])
        self.mine = flat[self.rank * self.shard:(self.rank + 1) * self.shard].clone()
        self.mine.requires_grad_(True)
        self.inner = torch.optim.SGD([self.mine], lr=lr, momentum=momentum)
        self.reduce_scatter = backend != "gloo"

    def flatten(self, tensors):
        flat = torch.zeros(self.shard * self.world)
        torch.cat([t.reshape(-1) for t in tensors], out=flat[:self.total])
        return flat

    def zero_grad(self):
        for p in self.params:
            p.grad = None

    def step(self):
        gradients = self.flatten([p.grad for p in self.params]).div_(self.world)  # the mean
        summed = torch.empty(self.shard)
        if self.reduce_scatter:
            dist.reduce_scatter_tensor(summed, gradients)
        else:
            dist.all_reduce(gradients)
            summed.copy_(gradients[self.rank * self.shard:(self.rank + 1) * self.shard])
        self.mine.grad = summed
        self.inner.step()
        shards = [torch.empty(self.shard) for _ in range(self.world)]
        dist.all_gather(shards, self.mine.detach())
        full = torch.cat(shards)
        offset = 0
        with torch.no_grad():
            for p in self.params:
                p.copy_(full[offset:offset + p.numel()].view_as(p))
                offset += p.numel()
