"""Errors that teach, for modules: `module_getattr(...)` makes a module-level `__getattr__` that raises
`MissingTorchAttribute` (an AttributeError: `hasattr(F, "scaled_dot_product_attention")`-style feature checks
read a plain no) naming the torch attribute tracegrad lacks and the nearest tracegrad spelling; a name torch
does not have either gets Python's message with close matches.
"""
from __future__ import annotations

from tracer.torch_hints import MissingTorchAttribute

from . import names

# torch.<name> -> the nearest tracegrad spelling (names tracegrad lacks; the rest get the generic message)
TORCH = {
    "fft": "numpy.fft on x.numpy() (tracegrad has no FFT op)",
    "vmap": "write the batched computation directly (tracer functions broadcast), or autodiff.value_and_grad",
    "func": "autodiff.grad / autodiff.value_and_grad (JAX's functional form: argnums=, pytrees)",
    "sparse": "tracegrad has dense tensors only",
    "sparse_coo_tensor": "tracegrad has dense tensors only: torch.zeros(size) then index writes",
    "quantization": "tracegrad has no quantized tensors", "ao": "tracegrad has no quantized tensors",
    "hub": "build the model class and model.load_state_dict(nn.load(path)) (nn.load reads torch checkpoints)",
    "profiler": "step.stats and step.memory_profile() of an autodiff.value_and_grad step; benchmarks/",
    "export": "autodiff.value_and_grad(...).module is the traced IR", "fx": "tracer.trace(fn, *args) gives the IR",
    "mps": "device='cuda' (CuPy) or the CPU", "xpu": "device='cuda' (CuPy) or the CPU",
    "set_default_tensor_type": "dtype= on the constructors; model.to(torch.float64)",
    "get_rng_state": "torch.Generator(seed) passed as generator= makes draws repeatable",
    "set_rng_state": "torch.manual_seed(seed)",
    "view_as_complex": "tracegrad has no complex dtypes", "view_as_real": "tracegrad has no complex dtypes",
    "complex": "tracegrad has no complex dtypes", "polar": "tracegrad has no complex dtypes",
    "stft": "numpy on x.numpy()", "istft": "numpy on x.numpy()",
    "cov": "c = x - x.mean(1, keepdim=True); c @ c.mT / (x.shape[1] - 1)",
    "chain_matmul": "torch.linalg.multi_dot or a @ b @ c", "pdist": "torch.cdist(x, x) (its upper triangle)",
    "cosine_similarity": "(a * b).sum(dim) / (a.norm(dim=dim) * b.norm(dim=dim)).clamp_min(eps)",
    "block_diag": "torch.zeros then slice writes, or torch.cat of padded blocks",
    "cartesian_prod": "torch.meshgrid(a, b, indexing='ij') then torch.stack(..., -1).reshape(-1, 2)",
    "combinations": "torch.triu_indices(n, n, 1) to index pairs",
    "trapz": "((y[1:] + y[:-1]) / 2 * dx).sum()", "trapezoid": "((y[1:] + y[:-1]) / 2 * dx).sum()",
    "Storage": "tracegrad tensors have no storage; x.numpy() is the array",
}

NN = {
    "SyncBatchNorm": "nn.BatchNorm2d (one process; with nn.distributed each process keeps its own statistics)",
    "LazyLinear": "nn.Linear(in_features, out_features) with the input size given",
    "LazyConv2d": "nn.Conv2d with in_channels given",
    "UninitializedParameter": "nn.Parameter(np.empty(shape))",
    "modules": "nn itself (nn.Linear, nn.Module, ...)",
    "quantized": "tracegrad has no quantized modules", "qat": "tracegrad has no quantized modules",
    "intrinsic": "tracegrad has no fused quantized modules", "quantizable": "tracegrad has no quantized modules",
}

FUNCTIONAL = {
    "grid_sample": "no grid sampling op yet", "affine_grid": "no affine grid op yet",
    "cosine_similarity": "(a * b).sum(dim) / (a.norm(dim=dim) * b.norm(dim=dim)).clamp_min(eps)",
    "gumbel_softmax": "F.softmax((logits - (-torch.rand_like(logits).log()).log()) / tau, dim=-1)",
    "multi_head_attention_forward": "nn.MultiheadAttention",
}

AUTOGRAD = {
    "functional": "autodiff.grad / value_and_grad (jacobian: one grad per output row)",
    "forward_ad": "tracegrad differentiates in reverse mode only (autodiff.grad)",
    "profiler": "step.stats of an autodiff.value_and_grad step",
    "graph": "tracegrad's recorded tape has no hooks on saved tensors",
}

CUDA = {
    "Stream": "CuPy's cupy.cuda.Stream (tracegrad runs one stream)", "Event": "time.perf_counter around a call",
    "graphs": "autodiff.value_and_grad compiles the step already", "CUDAGraph": "autodiff.value_and_grad",
    "nvtx": "not provided",
}

_TABLES = {"torch": (TORCH, names.TORCH), "torch.nn": (NN, names.NN), "torch.nn.functional": (FUNCTIONAL,
           names.FUNCTIONAL), "torch.autograd": (AUTOGRAD, names.AUTOGRAD), "torch.cuda": (CUDA, names.CUDA),
           "torch.linalg": ({}, names.LINALG), "torch.special": ({}, names.SPECIAL), "torch.optim": ({}, names.OPTIM),
           "torch.optim.lr_scheduler": ({}, names.LR_SCHEDULER), "torch.utils.data": ({}, names.DATA),
           "torch.nn.init": ({}, names.INIT), "torch.nn.utils": ({}, names.UTILS),
           "torch.distributed": ({}, names.DISTRIBUTED)}


def module_getattr(module_name: str, torch_module: str, namespace: dict):
    """A module `__getattr__` for `module_name`, which stands for `torch_module` (a key of the tables above):
    reached only for names the module does not define."""
    hints, torch_names = _TABLES[torch_module]

    def __getattr__(name: str):
        if name.startswith("__"):  # dunder probes (__path__, __wrapped__, ...): Python's plain error, at no cost
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        raise MissingTorchAttribute(f"module {module_name!r}", name,
                                    lambda: [n for n in namespace if not n.startswith("_")], torch_names, hints,
                                    torch_module)
    return __getattr__


__all__ = ["AUTOGRAD", "CUDA", "FUNCTIONAL", "NN", "TORCH", "MissingTorchAttribute", "module_getattr"]
