"""nevo's nets in PyTorch, for the benchmarks that compare with it: the module, its parameters
from nevo's flat weights, and the forwards/s of torch.func.vmap over stacked individuals.

Shared code, not a command: used by bench_forward (its torch f/s columns) and bench_evotorch
(EvoTorch's networks). torch is imported inside the functions: the module imports without it.
"""

import time


def torch_module(spec):
    """The spec as a torch.nn.Module: SAME padding by F.pad, TF's (H, W, C) flatten order.

    Takes uint8 observations (..., C, H, W), batched or not (EvoTorch's vmap gives one at a time)."""
    import torch
    import torch.nn.functional as F

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = torch.nn.ModuleList(
                torch.nn.Conv2d(lay.cin, lay.cout, lay.kernel, lay.stride)
                if lay.kind == "conv"
                else torch.nn.Linear(lay.cin, lay.cout)
                for lay in spec.layers
            )

        def forward(self, x):  # x (..., C, H, W) uint8 or float pixel values
            x = x.float() / 255.0
            for i, (lay, mod) in enumerate(zip(spec.layers, self.layers)):
                if lay.kind == "conv":
                    top, bottom, left, right = lay.pad
                    x = mod(F.pad(x, (left, right, top, bottom)))
                else:
                    if i > 0 and spec.layers[i - 1].kind == "conv":
                        x = x.movedim(-3, -1).flatten(-3)  # (..., C, H, W) -> (..., H * W * C)
                    x = mod(x)
                if lay.relu:
                    x = torch.relu(x)
            return x

    return Net()


def torch_params(spec, flat):
    """{name: (n, *shape)} of n individuals' nevo weights flat (n, n_params) (a torch tensor), in
    torch_module's layouts: conv HWIO -> OIHW, dense (in, out) -> (out, in)."""
    n, params = len(flat), {}
    for i, lay in enumerate(spec.layers):
        w = flat[:, lay.w_offset : lay.b_offset]
        if lay.kind == "conv":
            w = w.reshape(n, lay.kernel, lay.kernel, lay.cin, lay.cout).permute(0, 4, 3, 1, 2)
        else:
            w = w.reshape(n, lay.cin, lay.cout).transpose(1, 2)
        params[f"layers.{i}.weight"] = w.contiguous()
        params[f"layers.{i}.bias"] = flat[:, lay.b_offset : lay.b_offset + lay.cout].contiguous()
    return params


def torch_vmap(spec, flat, n, m, obs, seconds, device="cuda"):
    """(forwards/s, logits (n*m, n_actions)) of torch.func.vmap over n stacked individuals, m rows each.

    flat (n, n_params) float32 torch tensor on `device` (on the GPU, shared with nevo's buffer);
    obs (n*m, C, H, W) uint8.
    """
    import torch
    from torch.func import functional_call, vmap

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False

    def sync():
        if device == "cuda":
            torch.cuda.synchronize()

    model = torch_module(spec).to(device)
    params = torch_params(spec, flat[:n])
    x = torch.as_tensor(obs, device=device).view(n, m, *spec.obs_shape)
    run = vmap(lambda p, xi: functional_call(model, p, (xi,)))
    with torch.no_grad():
        logits = run(params, x).reshape(n * m, -1)
        sync()
        calls, t0 = 0, time.perf_counter()
        while calls < 3 or time.perf_counter() - t0 < seconds:
            run(params, x)
            sync()
            calls += 1
        fps = calls * n * m / (time.perf_counter() - t0)
    del params
    if device == "cuda":
        torch.cuda.empty_cache()
    return fps, logits.cpu().numpy()
