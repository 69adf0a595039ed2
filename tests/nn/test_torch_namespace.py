"""`import nn.torch as torch` gives torch's namespace (issue 20 item 5): the import rule maps every common torch
import line to a module path that exists, dtypes are attributes that work where torch's do, and the
submodules (nn, optim, utils.data, autograd, cuda, backends, amp, distributed, jit, ...) are there."""
import importlib
import io
import re

import numpy as np
import pytest

import nn
import nn.torch as torch
import tracer
from nn import functional as F

# ---------------------------------------------------------------- the import rule (docs/from-pytorch.md's table)

# typical import lines of public PyTorch programs (nanoGPT, minGPT, pytorch/examples, torchvision references,
# DDP and AMP tutorials)
TORCH_IMPORTS = """
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
import torch.nn.init as init
import torch.utils.data
import torch.utils.data as data
import torch.nn.parallel
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.backends.cudnn as cudnn
import torch.autograd as autograd
import torch.distributions as D
from torch import nn
from torch import nn, optim
from torch import Tensor
from torch.nn import functional as F
from torch.nn import init
from torch.nn import Module, Parameter, Linear, ModuleList
from torch.nn.parameter import Parameter
from torch.nn.utils import clip_grad_norm_, parameters_to_vector
from torch.nn.utils.rnn import pad_sequence, pack_padded_sequence, pad_packed_sequence
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.nn.parallel import DataParallel
from torch.optim import lr_scheduler
from torch.optim import Optimizer
from torch.optim.optimizer import Optimizer
from torch.optim.lr_scheduler import StepLR, CosineAnnealingLR, LambdaLR, OneCycleLR, _LRScheduler
from torch.utils.data import DataLoader, Dataset, TensorDataset, random_split, Subset, IterableDataset
from torch.utils.data.distributed import DistributedSampler
from torch.utils.data.dataloader import default_collate
from torch.utils.data.sampler import SubsetRandomSampler
from torch.utils.data.dataset import Dataset
from torch.utils.checkpoint import checkpoint
from torch.utils.tensorboard import SummaryWriter
from torch.cuda.amp import autocast, GradScaler
from torch.amp import autocast, GradScaler
from torch.autograd import Variable, grad
from torch.distributions import Categorical, Normal
from torch.testing import assert_close
import torch.linalg
import torch.cuda
import torch.jit
""".strip().splitlines()


def map_import(line: str) -> str:
    """The rule: torch.nn... -> nn..., torch.optim... -> nn.optim..., torch.utils.data... -> nn.data...,
    any other torch.X -> nn.torch.X; `import torch` -> `import nn.torch as torch`."""
    def module(path: str) -> str:
        for old, new in (("torch.utils.data", "nn.data"), ("torch.nn", "nn"), ("torch.optim", "nn.optim")):
            if path == old or path.startswith(old + "."):
                return new + path[len(old):]
        return "nn." + path if path.startswith("torch") else path

    if line == "import torch":
        return "import nn.torch as torch"
    m = re.fullmatch(r"import (\S+) as (\w+)", line)
    if m:
        path = module(m.group(1))
        parent, _, leaf = path.rpartition(".")
        return f"from {parent} import {leaf} as {m.group(2)}" if parent else f"import {path} as {m.group(2)}"
    m = re.fullmatch(r"import (\S+)", line)
    if m:
        return f"import {module(m.group(1))}"
    m = re.fullmatch(r"from (\S+) import (.+)", line)
    if m and m.group(1) == "torch":
        names = []  # `from torch import nn, optim`: the nn package and nn.optim; others from nn.torch
        for name in (n.strip() for n in m.group(2).split(",")):
            names.append({"nn": "import nn", "optim": "from nn import optim"}.get(name,
                                                                                 f"from nn.torch import {name}"))
        return "; ".join(names)
    return f"from {module(m.group(1))} import {m.group(2)}"


def test_the_rule_maps_the_issue_examples():
    assert map_import("import torch.nn as nn") == "import nn as nn"
    assert map_import("import torch.nn.functional as F") == "from nn import functional as F"
    assert map_import("import torch.optim as optim") == "from nn import optim as optim"
    assert map_import("from torch.optim.lr_scheduler import StepLR") == "from nn.optim.lr_scheduler import StepLR"
    assert map_import("from torch.utils.data import X") == "from nn.data import X"
    assert map_import("import torch.nn.parallel") == "import nn.parallel"
    assert map_import("import torch.backends.cudnn as cudnn") == "from nn.torch.backends import cudnn as cudnn"


@pytest.mark.parametrize("line", TORCH_IMPORTS)
def test_every_mapped_import_line_runs(line):
    mapped = map_import(line)
    scope: dict = {}
    exec(mapped, scope)  # noqa: S102 - the line under test
    bound = [n for n in scope if n != "__builtins__"]
    assert bound, mapped


@pytest.mark.parametrize("line", TORCH_IMPORTS)
def test_every_line_is_a_real_torch_import(line):
    pytest.importorskip("torch")
    try:
        exec(line, {})  # noqa: S102 - the torch program's own line
    except ModuleNotFoundError as e:  # torch's optional dependencies (tensorboard)
        pytest.skip(f"torch needs {e.name} for this line")


def test_imported_names_are_the_ones_torch_programs_expect():
    scope: dict = {}
    exec("from nn.parallel import DistributedDataParallel as DDP\nfrom nn.data.distributed import DistributedSampler\n"
         "from nn.torch.backends import cudnn\nfrom nn.optim.lr_scheduler import StepLR", scope)
    assert scope["DistributedSampler"] is nn.data.DistributedSampler and scope["StepLR"] is nn.optim.lr_scheduler.StepLR
    assert scope["cudnn"] is torch.backends.cudnn and issubclass(scope["DDP"], nn.Module)


# ---------------------------------------------------------------- the namespace


def test_submodules_are_tracegrads_packages():
    assert torch.nn is nn and torch.nn.functional is F and torch.nn.init is nn.init and torch.nn.utils is nn.utils
    assert torch.optim is nn.optim and torch.optim.lr_scheduler is nn.optim.lr_scheduler
    assert torch.utils.data is nn.data and torch.Tensor is tracer.Tensor
    assert torch.nn.parallel.DistributedDataParallel is nn.parallel.DistributedDataParallel
    assert torch.distributions.Normal is importlib.import_module("nn.distributions").Normal


@pytest.mark.parametrize("name", ["tensor", "zeros", "ones", "full", "arange", "linspace", "randn", "rand", "randint",
                                  "randperm", "zeros_like", "ones_like", "full_like", "rand_like", "randn_like",
                                  "empty", "eye", "cat", "stack", "split", "chunk", "where", "max", "min", "var",
                                  "std", "mean", "sum", "pow", "clamp", "exp", "log", "matmul", "bmm", "einsum",
                                  "softmax", "sigmoid", "tanh", "flatten", "unsqueeze", "squeeze", "transpose",
                                  "permute", "gather", "topk", "sort", "argmax", "allclose", "isnan", "multinomial",
                                  "from_numpy", "as_tensor", "is_tensor", "numel", "no_grad", "enable_grad",
                                  "inference_mode", "set_grad_enabled", "is_grad_enabled", "manual_seed",
                                  "Generator", "device", "save", "load", "tril", "triu", "outer", "cumsum", "norm",
                                  "abs", "sqrt", "maximum", "minimum", "nonzero", "unique", "masked_fill", "trace"])
def test_torch_functions_are_there(name):
    assert callable(getattr(torch, name))


def test_only_torch_names_and_every_one_has_torchs_meaning_source():
    from nn.torch import names, tensors
    assert set(tensors.FUNCTIONS) <= names.TORCH
    assert len(tensors.FUNCTIONS) > 300
    for tracegrad_only in ("spec", "trace_function", "guard", "stop_gradient", "astype", "permute_dims"):
        assert not hasattr(torch, tracegrad_only)
    assert torch.trace(tracer.tensor([[1.0, 2.0], [3.0, 4.0]])).item() == 5.0  # the matrix trace, not the tracer


def test_tensor_functions_take_torchs_forms():
    x = torch.tensor([[1.0, 5.0], [7.0, 2.0]])
    assert torch.full((2,), 3).dtype == torch.int64 and torch.full((2,), 1.5).dtype == torch.float32
    assert torch.full((1,), True).dtype == torch.bool
    assert [t.tolist() for t in torch.where(x > 4)] == [[0, 1], [1, 0]]
    assert torch.equal(x, x.clone()) is True
    assert torch.pow(2.0, torch.tensor([1.0, 3.0])).tolist() == [2.0, 8.0]
    assert torch.numel(x) == 4 and torch.is_tensor(x) and not torch.is_tensor(np.ones(2))
    assert torch.zeros_like(x, dtype=torch.long).dtype == torch.int64
    assert torch.softmax(x, dim=1, dtype=torch.float64).dtype == torch.float64
    assert torch.LongTensor([1, 2]).dtype == torch.int64 and torch.FloatTensor(2, 3).shape == (2, 3)
    assert torch.Size([2, 3]) == (2, 3)


# ---------------------------------------------------------------- dtypes


def test_dtypes_are_attributes_that_work_where_torchs_do():
    x = torch.ones(2)
    assert x.dtype == torch.float32 and x.to(torch.float64).dtype == torch.float64
    assert torch.tensor([1, 2], dtype=torch.long).dtype == "int64"
    assert torch.zeros(2, dtype=torch.bool).dtype == torch.bool
    pairs = {"float": "float32", "double": "float64", "half": "float16", "long": "int64", "int": "int32",
             "short": "int16", "int8": "int8", "uint8": "uint8", "bool": "bool", "float16": "float16",
             "int16": "int16", "int32": "int32", "int64": "int64", "float32": "float32", "float64": "float64"}
    for name, dtype in pairs.items():
        assert getattr(torch, name) == dtype, name
        assert torch.zeros(1, dtype=getattr(torch, name)).dtype == dtype
    assert torch.float16.is_floating_point and not torch.long.is_floating_point and torch.double.itemsize == 8
    assert {torch.float32: 1}["float32"] == 1  # hashes as its name
    assert torch.finfo(torch.float32).eps == np.finfo(np.float32).eps and torch.iinfo(torch.int8).max == 127
    assert torch.get_default_dtype() == torch.float32
    assert torch.promote_types(torch.int64, torch.float32) == torch.float32


def test_dtypes_tracegrad_lacks_exist_and_fail_on_use():
    table = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}  # nanoGPT's table
    assert table["bfloat16"] == "bfloat16" and not torch.cuda.is_bf16_supported()
    with pytest.raises(TypeError, match="bfloat16"):
        torch.zeros(2, dtype=torch.bfloat16)
    with pytest.raises(TypeError, match="bfloat16"):
        torch.ones(2).to(torch.bfloat16)
    with pytest.raises(TypeError, match="no such dtype"):
        torch.finfo(torch.bfloat16)
    with pytest.raises(TypeError, match="set_default_dtype"):
        torch.set_default_dtype(torch.float64)
    torch.set_default_dtype(torch.float32)  # torch's default: accepted


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int64", "int32", "int16", "int8", "uint8", "bool"])
def test_dtypes_agree_with_torchs(dtype):
    real = pytest.importorskip("torch")
    assert str(getattr(real, dtype)) == f"torch.{getattr(torch, dtype)}"
    assert getattr(real, dtype).itemsize == getattr(torch, dtype).itemsize
    assert getattr(real, dtype).is_floating_point == getattr(torch, dtype).is_floating_point


# ---------------------------------------------------------------- grad modes, seeds, devices, cuda, save/load


def test_grad_modes_and_autograd():
    w = torch.ones(2, requires_grad=True)
    with torch.no_grad():
        assert not (w * 2).requires_grad
    with torch.inference_mode():
        assert not torch.is_grad_enabled()
    with torch.set_grad_enabled(False):
        assert not (w * 2).requires_grad
    (g,) = torch.autograd.grad((w * w).sum(), [w])
    assert g.tolist() == [2.0, 2.0]
    torch.autograd.backward([(w * 3).sum()])
    assert w.grad.tolist() == [3.0, 3.0]
    assert torch.autograd.Variable(w) is w and torch.autograd.no_grad is torch.no_grad


def test_manual_seed_seeds_draws_and_weight_initialisation():
    torch.manual_seed(3)
    a, la = torch.randn(4), nn.Linear(3, 2).weight.numpy().copy()
    torch.manual_seed(3)
    b, lb = torch.randn(4), nn.Linear(3, 2).weight.numpy().copy()
    assert a.tolist() == b.tolist() and (la == lb).all() and torch.initial_seed() == 3
    g = torch.Generator(device="cpu").manual_seed(5)
    c = torch.randn(3, generator=g)
    assert c.tolist() == torch.randn(3, generator=torch.Generator().manual_seed(5)).tolist()
    assert torch.randperm(6, generator=g).sort().values.tolist() == list(range(6))


def test_devices_and_cuda_without_a_gpu(monkeypatch):
    assert str(torch.device("cpu")) == "cpu" and torch.ones(2).device == torch.device("cpu")
    assert torch.cuda.is_available() in (True, False) and isinstance(torch.cuda.device_count(), int)
    if not torch.cuda.is_available():
        assert torch.cuda.device_count() == 0 and torch.cuda.memory_allocated() == 0
        torch.cuda.synchronize()
        torch.cuda.manual_seed_all(0)
        with pytest.raises(RuntimeError, match="no GPU"):
            torch.cuda.current_device()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    assert torch.ones(2, device=device).device == device


def test_cudnn_and_backend_flags_are_accepted():
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.deterministic = True
    assert torch.backends.cudnn.benchmark and not torch.backends.mps.is_available()
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.set_float32_matmul_precision("high")
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    assert torch.get_num_threads() == 1 and torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(False)


def test_save_and_load_use_tracegrads_safe_format(tmp_path):
    model = nn.Linear(3, 2)
    opt = torch.optim.Adam(model.parameters(), lr=0.1)
    path = tmp_path / "ckpt.pt"
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": 3}, path)
    ck = torch.load(path, map_location="cpu", weights_only=True)
    twin = nn.Linear(3, 2)
    twin.load_state_dict(ck["model"])
    assert (twin.weight.numpy() == model.weight.numpy()).all() and int(ck["epoch"]) == 3
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    buffer.seek(0)
    assert set(torch.load(buffer)) == {"weight", "bias"}
    with pytest.raises(TypeError, match="state_dict"):
        torch.save(model, tmp_path / "model.pt")


def test_torch_checkpoints_load(tmp_path):
    real = pytest.importorskip("torch")
    lin = real.nn.Linear(3, 2)
    real.save(lin.state_dict(), tmp_path / "t.pt")
    ours = nn.Linear(3, 2)
    ours.load_state_dict(torch.load(tmp_path / "t.pt"))
    np.testing.assert_array_equal(ours.weight.numpy(), lin.weight.detach().numpy())


# ---------------------------------------------------------------- parallel, amp, jit, compile, distributed


def test_data_parallel_wrappers_pass_through_with_torchs_state_dict_keys():
    inner = nn.Linear(2, 3)
    for wrapper in (torch.nn.DataParallel(inner), nn.parallel.DistributedDataParallel(inner, device_ids=[0])):
        x = torch.randn(4, 2)
        assert np.allclose(wrapper(x).numpy(), inner(x).numpy()) and wrapper.module is inner
        assert sorted(wrapper.state_dict()) == ["module.bias", "module.weight"]
        assert [id(p) for p in wrapper.parameters()] == [id(p) for p in inner.parameters()]
    with nn.parallel.DistributedDataParallel(inner).no_sync():
        pass


def test_the_amp_loop_runs_unchanged():
    model = nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.cuda.amp.GradScaler()
    x, y = torch.randn(8, 3), torch.randn(8, 1)
    losses = []
    for _ in range(3):
        opt.zero_grad()
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            loss = F.mse_loss(model(x), y)
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        scaler.step(opt)
        scaler.update()
        losses.append(loss.item())
    assert losses[2] < losses[0]


def test_jit_and_compile_return_what_they_are_given():
    model = nn.Linear(2, 2)
    assert torch.compile(model) is model and torch.jit.script(model) is model
    assert torch.compile()(model) is model and torch.jit.trace(model, torch.ones(1, 2)) is model

    @torch.jit.script
    def f(x):
        return x * 2
    assert f(torch.ones(1)).tolist() == [2.0]


def test_distributed_on_one_process():
    torch.distributed.init_process_group("gloo")
    assert torch.distributed.is_initialized() and torch.distributed.get_world_size() == 1
    t = torch.tensor([1.0, 2.0])
    torch.distributed.all_reduce(t, op=torch.distributed.ReduceOp.SUM)
    torch.distributed.broadcast(t, src=0)
    torch.distributed.barrier()
    assert t.tolist() == [1.0, 2.0]
    gathered = [torch.zeros(2)]
    torch.distributed.all_gather(gathered, t)
    assert gathered[0].tolist() == [1.0, 2.0]
    torch.distributed.destroy_process_group()
    ran = []
    torch.multiprocessing.spawn(lambda rank, a: ran.append((rank, a)), args=(7,), nprocs=1)
    assert ran == [(0, 7)]


def test_utils_checkpoint_and_tensorboard(tmp_path):
    lin = nn.Linear(3, 3)
    x = torch.randn(2, 3)
    assert np.allclose(torch.utils.checkpoint.checkpoint(lin, x, use_reentrant=False).numpy(), lin(x).numpy())
    with torch.utils.tensorboard.SummaryWriter(str(tmp_path)) as w:
        w.add_scalar("loss", torch.tensor(0.5), 1)
        w.add_histogram("w", lin.weight, 1)
    assert '"tag": "loss"' in (tmp_path / "scalars.jsonl").read_text()


def test_testing_assert_close():
    torch.testing.assert_close(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.0 + 1e-7]))
    with pytest.raises(AssertionError):
        torch.testing.assert_close(torch.tensor([1.0]), torch.tensor([1.1]))


# ---------------------------------------------------------------- a torch script, only its imports changed

SCRIPT = '''
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim.lr_scheduler import StepLR
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
X = torch.from_numpy(DATA_X)
Y = torch.from_numpy(DATA_Y)
loader = DataLoader(TensorDataset(X, Y), batch_size=16, shuffle=False)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 16)
        self.fc2 = nn.Linear(16, 3)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


model = Net().to(torch.float64)
model.load_state_dict({k: torch.tensor(v) for k, v in INIT.items()})
opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
sched = StepLR(opt, step_size=2, gamma=0.5)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model.to(device)
losses = []
for epoch in range(3):
    model.train()
    for xb, yb in loader:
        opt.zero_grad()
        loss = F.cross_entropy(model(xb), yb)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
    sched.step()
model.eval()
with torch.no_grad():
    logits = model(X)
    values, predicted = logits.max(dim=1)
    spread = logits.std(dim=0)
    accuracy = (predicted == Y).float().mean().item()
'''


def test_a_torch_script_runs_with_only_its_imports_changed_and_agrees_with_torch():
    real = pytest.importorskip("torch")
    ours_text = "\n".join(map_import(line) if line.startswith(("import torch", "from torch")) else line
                          for line in SCRIPT.splitlines())
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((48, 4)), rng.integers(0, 3, 48)
    layers = {"fc1": real.nn.Linear(4, 16), "fc2": real.nn.Linear(16, 3)}
    init = {f"{name}.{k}": v.detach().numpy().astype("float64") for name, layer in layers.items()
            for k, v in layer.state_dict().items()}
    runs = []
    for text in (SCRIPT, ours_text):
        scope = {"DATA_X": x, "DATA_Y": y, "INIT": init}
        exec(compile(text, "script.py", "exec"), scope)  # noqa: S102 - the script under test
        runs.append(scope)
    theirs, ours = runs
    np.testing.assert_allclose(ours["losses"], theirs["losses"], rtol=1e-10)
    np.testing.assert_array_equal(ours["predicted"].numpy(), theirs["predicted"].numpy())
    np.testing.assert_allclose(ours["values"].numpy(), theirs["values"].numpy(), rtol=1e-10)
    np.testing.assert_allclose(ours["spread"].numpy(), theirs["spread"].numpy(), rtol=1e-10)
    assert ours["accuracy"] == theirs["accuracy"]


GPT = '''
import math
import torch
import torch.nn as nn
from torch.nn import functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, block_size):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.n_head, self.n_embd = n_head, n_embd
        self.register_buffer("bias", torch.tril(torch.ones(block_size, block_size)).view(1, 1, block_size, block_size))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class Block(nn.Module):
    def __init__(self, n_embd, n_head, block_size):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head, block_size)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = nn.ModuleDict(dict(c_fc=nn.Linear(n_embd, 4 * n_embd), c_proj=nn.Linear(4 * n_embd, n_embd)))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp.c_proj(F.gelu(self.mlp.c_fc(self.ln_2(x))))


class GPT(nn.Module):
    def __init__(self, vocab, n_embd=16, n_head=2, block_size=8, n_layer=2):
        super().__init__()
        self.block_size = block_size
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab, n_embd), wpe=nn.Embedding(block_size, n_embd),
            h=nn.ModuleList([Block(n_embd, n_head, block_size) for _ in range(n_layer)]), ln_f=nn.LayerNorm(n_embd)))
        self.lm_head = nn.Linear(n_embd, vocab, bias=False)

    def forward(self, idx, targets=None):
        b, t = idx.size()
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        loss = None if targets is None else F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss

    @torch.no_grad()
    def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None):
        for _ in range(max_new_tokens):
            idx_cond = idx if idx.size(1) <= self.block_size else idx[:, -self.block_size:]
            logits, _ = self(idx_cond)
            logits = logits[:, -1, :] / temperature
            if top_k is not None:
                v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
                logits[logits < v[:, [-1]]] = -float("Inf")
            probs = F.softmax(logits, dim=-1)
            idx_next = torch.multinomial(probs, num_samples=1)
            idx = torch.cat((idx, idx_next), dim=1)
        return idx


torch.manual_seed(1337)
model = GPT(VOCAB)
model.load_state_dict({k: torch.tensor(v) for k, v in INIT.items()})
model = model.double()
decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                              lr=1e-2, betas=(0.9, 0.95))
X, Y = torch.from_numpy(DATA_X), torch.from_numpy(DATA_Y)
losses = []
for it in range(4):
    logits, loss = model(X, Y)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    losses.append(loss.item())
model.eval()
sample = model.generate(torch.zeros((1, 1), dtype=torch.long), max_new_tokens=10, top_k=5)
'''


def test_a_nanogpt_style_program_runs_with_only_its_imports_changed_and_agrees_with_torch():
    real = pytest.importorskip("torch")
    ours_text = "\n".join(map_import(line) if line.startswith(("import torch", "from torch")) else line
                          for line in GPT.splitlines())
    rng = np.random.default_rng(0)
    data = rng.integers(0, 11, (4, 9))
    arrays = {"DATA_X": np.ascontiguousarray(data[:, :-1]), "DATA_Y": np.ascontiguousarray(data[:, 1:])}
    scope = {"VOCAB": 11, "INIT": {}}
    exec(compile(GPT.split("torch.manual_seed(1337)")[0], "gpt_defs.py", "exec"), scope)  # noqa: S102
    init = {k: v.detach().numpy() for k, v in scope["GPT"](11).state_dict().items() if not k.endswith(".attn.bias")}
    runs = []
    for text in (GPT, ours_text):
        scope = {"VOCAB": 11, "INIT": init, **arrays}
        text = text.replace("model.load_state_dict(", "model.load_state_dict(strict=False, state_dict=")
        exec(compile(text, "gpt.py", "exec"), scope)  # noqa: S102 - the program under test
        runs.append(scope)
    theirs, ours = runs
    np.testing.assert_allclose(ours["losses"], theirs["losses"], rtol=1e-9)
    assert ours["sample"].shape == (1, 11) and ours["sample"].dtype == torch.long
    assert 0 <= int(ours["sample"].min()) and int(ours["sample"].max()) < 11
    del real
