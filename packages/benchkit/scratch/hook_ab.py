"""Scratch: the wrapper's host time per backward over the unwrapped model, the hook code before 4372381 against after (CPU, gloo, world size 1)."""
import os, time, statistics, types, functools, weakref, torch, torch.distributed as dist
os.environ.setdefault("MASTER_ADDR", "127.0.0.1"); os.environ.setdefault("MASTER_PORT", "29535")
dist.init_process_group("gloo", rank=0, world_size=1)
from ddp import BucketedDDP
from ddp import base
torch.set_num_threads(1)

def old_grad_hook(self, index):
    old_note_backward(self)
    grad = self._params[index].grad
    if grad is not None and grad.layout != torch.strided:
        raise RuntimeError
    self._backward_seen = True
    if self._sync_enabled:
        self._on_grad_ready(index)

def old_note_backward(self):
    task = torch._C._current_graph_task_id()
    if self._backward_task is None:
        self._backward_task = task
        wrapper = weakref.ref(self)
        torch.autograd.Variable._execution_engine.queue_callback(functools.partial(base._backward_completed, wrapper, task))

def make():
    torch.manual_seed(0)
    return torch.nn.Sequential(*[torch.nn.Linear(8, 8) for _ in range(170)])
x = torch.randn(4, 8)
ml = make(); mo = make(); mn = make()
wo = BucketedDDP(mo, 25.0); wn = BucketedDDP(mn, 25.0)
object.__setattr__(wo, "_grad_hook", types.MethodType(old_grad_hook, wo))
def step(m, w):
    m.zero_grad(set_to_none=False)
    t0 = time.perf_counter()
    w(x).sum().backward()
    if w is not m: w.finish_gradient_synchronization()
    return time.perf_counter() - t0
res = {"local": [], "old": [], "new": []}
for i in range(600):
    for name, m, w in (("local", ml, ml), ("old", mo, wo), ("new", mn, wn)):
        res[name].append(step(m, w))
for k, v in res.items(): print(k, "%.3f ms" % (statistics.median(v[50:]) * 1e3))
print("overhead old %.3f new %.3f ms" % ((statistics.median(res["old"][50:]) - statistics.median(res["local"][50:])) * 1e3, (statistics.median(res["new"][50:]) - statistics.median(res["local"][50:])) * 1e3))
assert all(torch.equal(a.grad, b.grad) for a, b in zip(mo.parameters(), mn.parameters()))
