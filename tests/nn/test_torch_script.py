"""A complete, ordinary PyTorch training script (a small CNN with BatchNorm on the bundled digits: model
class, loss module, optimizer, a DataLoader-style loop with zero_grad, loss.backward() and step(),
train()/eval()) runs on tracegrad with only its import lines changed, and reaches the accuracy that the same
script reaches in torch, within 1%."""
import difflib
import os

import numpy as np
import pytest

import nn

DIGITS = os.path.join(os.path.dirname(nn.data.__file__), "digits.npz")

TORCH_SCRIPT = '''
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import optim

torch.manual_seed(0)

data = np.load(DIGITS)
images = (data["images"].astype("float32") / 16.0)[:, None]   # (N, 1, 8, 8)
labels = data["labels"].astype("int64")
order = np.random.default_rng(0).permutation(len(labels))
train, test = order[:1400], order[1400:]


def loader(x, y, batch_size, seed):
    """Shuffled mini-batches, as a DataLoader with shuffle=True and drop_last=True."""
    idx = np.random.default_rng(seed).permutation(len(x))
    for start in range(0, len(x) - batch_size + 1, batch_size):
        part = idx[start:start + batch_size]
        yield torch.from_numpy(x[part]), torch.from_numpy(y[part])


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(16)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(32)
        self.pool = nn.MaxPool2d(2)
        self.dropout = nn.Dropout(0.1)
        self.fc = nn.Linear(32 * 2 * 2, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.bn1(self.conv1(x))))
        x = self.pool(F.relu(self.bn2(self.conv2(x))))
        x = torch.flatten(x, 1)
        return self.fc(self.dropout(x))


model = Net()
criterion = nn.CrossEntropyLoss()
optimizer = optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

for epoch in range(EPOCHS):
    model.train()
    for xb, yb in loader(images[train], labels[train], 50, seed=epoch):
        optimizer.zero_grad()
        loss = criterion(model(xb), yb)
        loss.backward()
        optimizer.step()

model.eval()
logits = model(torch.from_numpy(images[test]))
accuracy = (logits.argmax(1) == torch.from_numpy(labels[test])).float().mean().item()
'''

# the only changes: the imports
CHANGES = [
    ("import torch\n", "import nn.torch as torch\n"),
    ("import torch.nn as nn\n", "import nn\n"),
    ("import torch.nn.functional as F\n", "from nn import functional as F\n"),
    ("from torch import optim\n", "from nn import optim\n"),
]


def tracegrad_script() -> str:
    script = TORCH_SCRIPT
    for old, new in CHANGES:
        assert script.count(old) == 1, old
        script = script.replace(old, new)
    return script


def test_only_the_import_lines_differ():
    diff = [line for line in difflib.unified_diff(TORCH_SCRIPT.splitlines(), tracegrad_script().splitlines(),
                                                  lineterm="", n=0) if line[:1] in "+-" and line[:3] not in ("+++", "---")]
    removed = [line[1:].strip() for line in diff if line[0] == "-"]
    added = [line[1:].strip() for line in diff if line[0] == "+"]
    assert removed == ["import torch", "import torch.nn as nn", "import torch.nn.functional as F",
                       "from torch import optim"]
    assert all(a.startswith(("import", "from")) for a in added)


def _run(script: str, epochs: int) -> dict:
    # torch.manual_seed(0) in the script seeds tracegrad's dropout and weight initialisation (nn.torch's, as
    # torch's); seeded here too for the torch run, so it does not depend on what earlier tests initialised
    nn.init.manual_seed(0)
    scope = {"DIGITS": DIGITS, "EPOCHS": epochs, "__name__": "digits_script"}
    exec(compile(script, "digits_script.py", "exec"), scope)
    return scope


def test_the_script_trains_on_tracegrad():
    scope = _run(tracegrad_script(), epochs=1)
    assert scope["accuracy"] > 0.85
    assert scope["model"].bn1.num_batches_tracked.item() == 28  # BatchNorm statistics updated at every step


def test_tracegrad_reaches_the_accuracy_torch_reaches_within_1_percent():
    torch = pytest.importorskip("torch")
    ours = _run(tracegrad_script(), epochs=8)["accuracy"]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # many threads on a small shared machine only slow the tiny model down
    try:
        theirs = _run(TORCH_SCRIPT, epochs=8)["accuracy"]
    finally:
        torch.set_num_threads(threads)
    print(f"test accuracy after 8 epochs: tracegrad {ours:.4f}, torch {theirs:.4f}")
    assert abs(ours - theirs) <= 0.01, (ours, theirs)
    assert np.isfinite(ours) and ours > 0.95
