"""Every nn.init function torch has: signatures and defaults as torch's, deterministic fills exactly torch's,
random fills with torch's moments and bounds on large tensors, generator= streams, calculate_gain's values."""
import inspect
import math

import numpy as np
import pytest

import nn
import tracer
from nn import init

torch = pytest.importorskip("torch")

NAMES = ["uniform_", "normal_", "trunc_normal_", "constant_", "ones_", "zeros_", "eye_", "dirac_",
         "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_", "orthogonal_", "sparse_",
         "calculate_gain"]


@pytest.mark.parametrize("name", NAMES)
def test_signatures_and_defaults_are_torchs(name):
    ours, theirs = inspect.signature(getattr(init, name)), inspect.signature(getattr(torch.nn.init, name))
    assert list(ours.parameters)[1:] == list(theirs.parameters)[1:]
    for p in list(theirs.parameters)[1:]:
        assert ours.parameters[p].default == theirs.parameters[p].default, p


def _pair(shape, dtype="float32"):
    return nn.Parameter(np.full(shape, 7.0, dtype)), torch.full(shape, 7.0, dtype=getattr(torch, dtype))


@pytest.mark.parametrize("shape", [(3, 5), (5, 3), (4, 4)])
def test_eye_and_constants_equal_torchs(shape):
    ours, theirs = _pair(shape)
    np.testing.assert_array_equal(init.eye_(ours).numpy(), torch.nn.init.eye_(theirs).numpy())
    for fill in (init.ones_, init.zeros_):
        np.testing.assert_array_equal(fill(ours).numpy(), getattr(torch.nn.init, fill.__name__)(theirs).numpy())
    np.testing.assert_array_equal(init.constant_(ours, val=0.25).numpy(), torch.nn.init.constant_(theirs, 0.25).numpy())
    with pytest.raises(ValueError, match="2 dimensions"):
        init.eye_(np.zeros((2, 2, 2)))


@pytest.mark.parametrize("shape,groups", [((4, 2, 3), 1), ((6, 3, 3, 3), 1), ((6, 2, 3, 5), 2), ((4, 4, 3, 3, 3), 2),
                                          ((2, 5, 4, 4), 1), ((6, 1, 3), 3)])
def test_dirac_equals_torchs(shape, groups):
    ours, theirs = _pair(shape)
    np.testing.assert_array_equal(init.dirac_(ours, groups).numpy(), torch.nn.init.dirac_(theirs, groups).numpy())
    with pytest.raises(ValueError, match="divisible by groups"):
        init.dirac_(np.zeros((5, 2, 3)), groups=2)
    with pytest.raises(ValueError, match="3, 4, or 5"):
        init.dirac_(np.zeros((5, 2)))


@pytest.mark.parametrize("name,param", [(n, None) for n in ["linear", "conv1d", "conv2d", "conv3d",
                                                             "conv_transpose1d", "conv_transpose2d",
                                                             "conv_transpose3d", "sigmoid", "tanh", "relu",
                                                             "leaky_relu", "selu"]]
                         + [("leaky_relu", 0.2), ("leaky_relu", 1), ("leaky_relu", math.sqrt(5))])
def test_calculate_gain_equals_torchs(name, param):
    assert init.calculate_gain(name, param) == torch.nn.init.calculate_gain(name, param)


def test_calculate_gain_errors_as_torchs():
    for name, param in [("swish", None), ("identity", None), ("leaky_relu", True), ("leaky_relu", "x")]:
        with pytest.raises(ValueError) as ours:
            init.calculate_gain(name, param)
        with pytest.raises(ValueError) as theirs:
            torch.nn.init.calculate_gain(name, param)
        assert str(ours.value) == str(theirs.value)


@pytest.mark.parametrize("shape,gain", [((30, 50), 1.0), ((50, 30), 2.0), ((8, 4, 3, 3), 0.5), ((40, 40), 1.0)])
def test_orthogonal_is_orthogonal_as_torchs(shape, gain):
    ours = init.orthogonal_(np.zeros(shape, "float64"), gain=gain).reshape(shape[0], -1)
    theirs = torch.nn.init.orthogonal_(torch.zeros(shape, dtype=torch.float64), gain=gain).reshape(shape[0], -1)
    for w in (ours, theirs.numpy()):
        small = min(w.shape)
        gram = w @ w.T if w.shape[0] == small else w.T @ w
        np.testing.assert_allclose(gram, gain ** 2 * np.eye(small), atol=1e-10)
    with pytest.raises(ValueError, match="2 or more"):
        init.orthogonal_(np.zeros(3))


N = (400, 500)  # 200,000 draws: sample moments within a few standard errors


def _moments(w):
    w = np.asarray(w, "float64").ravel()
    return w.mean(), w.std(), w.min(), w.max()


FAN_IN, FAN_OUT = N[1], N[0]
BOUNDED = {  # the support of the bounded fills, from torch's formulas
    "uniform": (-0.5, 2.0), "trunc_default": (-2.0, 2.0), "trunc_narrow": (0.5, 1.2), "trunc_tail": (2.5, 4.0),
    "xavier_u": (-2.0 * math.sqrt(6 / (FAN_IN + FAN_OUT)), 2.0 * math.sqrt(6 / (FAN_IN + FAN_OUT))),
    "kaiming_u": (-math.sqrt(6 / FAN_IN), math.sqrt(6 / FAN_IN)),  # a=0: leaky_relu of slope 0
    "kaiming_u_sqrt5": (-1 / math.sqrt(FAN_IN), 1 / math.sqrt(FAN_IN)),
    "kaiming_u_fan_out": (-math.sqrt(6 / 1.04 / FAN_OUT), math.sqrt(6 / 1.04 / FAN_OUT)),
}
CALLS = {
    "uniform": lambda m, t: m.uniform_(t, -0.5, 2.0),
    "normal": lambda m, t: m.normal_(t, 1.5, 0.3),
    "trunc_default": lambda m, t: m.trunc_normal_(t),
    "trunc_vit": lambda m, t: m.trunc_normal_(t, mean=0.3, std=0.02, a=-0.04, b=0.5),
    "trunc_narrow": lambda m, t: m.trunc_normal_(t, mean=1.0, std=2.0, a=0.5, b=1.2),
    "trunc_tail": lambda m, t: m.trunc_normal_(t, mean=0.0, std=1.0, a=2.5, b=4.0),
    "xavier_u": lambda m, t: m.xavier_uniform_(t, gain=2.0),
    "xavier_n": lambda m, t: m.xavier_normal_(t, gain=0.7),
    "kaiming_u": lambda m, t: m.kaiming_uniform_(t),
    "kaiming_u_sqrt5": lambda m, t: m.kaiming_uniform_(t, a=math.sqrt(5)),
    "kaiming_u_fan_out": lambda m, t: m.kaiming_uniform_(t, a=0.2, mode="fan_out", nonlinearity="leaky_relu"),
    "kaiming_n_relu": lambda m, t: m.kaiming_normal_(t, mode="fan_out", nonlinearity="relu"),
    "kaiming_n_tanh": lambda m, t: m.kaiming_normal_(t, nonlinearity="tanh"),
    "kaiming_n_selu": lambda m, t: m.kaiming_normal_(t, nonlinearity="selu"),
}


@pytest.mark.filterwarnings("ignore:mean is more than 2 std")
@pytest.mark.parametrize("case", list(CALLS))
def test_random_fills_have_torchs_distribution(case):
    call = CALLS[case]
    ours = call(init, nn.Parameter(np.zeros(N, "float32"))).numpy()
    theirs = call(torch.nn.init, torch.zeros(N)).numpy()
    assert ours.dtype == np.float32
    (m1, s1, lo1, hi1), (m2, s2, lo2, hi2) = _moments(ours), _moments(theirs)
    assert abs(m1 - m2) < 6 * s2 / math.sqrt(ours.size) + 1e-7, (m1, m2)
    assert abs(s1 - s2) < 0.01 * s2, (s1, s2)
    if case in BOUNDED:
        lo, hi = BOUNDED[case]
        slack = 1e-6 * (hi - lo)
        for a, b in ((lo1, hi1), (lo2, hi2)):  # inside the support, and reaching its ends
            assert lo - slack <= a <= lo + 0.01 * (hi - lo) and hi - 0.01 * (hi - lo) <= b <= hi + slack, (a, b)
    for q in (0.01, 0.1, 0.5, 0.9, 0.99):
        assert abs(np.quantile(ours, q) - np.quantile(theirs, q)) < 0.01 * s2 * 4, q


def test_sparse_zeros_as_many_per_column_as_torch():
    for sparsity in (0.1, 0.35, 0.9):
        ours = init.sparse_(np.zeros((40, 300)), sparsity, std=0.5)
        theirs = torch.nn.init.sparse_(torch.zeros(40, 300), sparsity, std=0.5).numpy()
        assert ((ours == 0).sum(0) == (theirs == 0).sum(0)).all()
        kept = ours[ours != 0]
        assert abs(kept.std() - 0.5) < 0.02 and abs(kept.mean()) < 0.02
    assert len({tuple(np.flatnonzero(c == 0)) for c in ours.T}) > 1  # different rows per column
    with pytest.raises(ValueError, match="2 dimensions"):
        init.sparse_(np.zeros((2, 2, 2)), 0.5)


def test_generators_give_their_own_repeatable_streams():
    def fill(gen):
        return init.normal_(np.zeros(50), generator=gen).copy()

    np.testing.assert_array_equal(fill(tracer.Generator(3)), fill(tracer.Generator(3)))
    np.testing.assert_array_equal(fill(np.random.default_rng(3)), fill(np.random.default_rng(3)))
    assert not np.array_equal(fill(tracer.Generator(3)), fill(tracer.Generator(4)))
    init.manual_seed(0)
    before = fill(None)
    init.manual_seed(0)
    fill(tracer.Generator(9))  # a generator leaves the module's stream alone
    np.testing.assert_array_equal(fill(None), before)
    for f in (init.uniform_, init.trunc_normal_, init.xavier_uniform_, init.xavier_normal_, init.kaiming_uniform_,
              init.kaiming_normal_, init.orthogonal_):
        a, b = f(np.zeros((6, 7)), generator=tracer.Generator(1)), f(np.zeros((6, 7)), generator=tracer.Generator(1))
        np.testing.assert_array_equal(a, b)
    with pytest.raises(TypeError, match="generator"):
        init.normal_(np.zeros(3), generator=5)


def test_zero_element_and_deprecated_names_as_torch():
    with pytest.warns(UserWarning, match="zero-element"):
        init.kaiming_normal_(np.zeros((0, 3)))
    with pytest.warns(FutureWarning, match="deprecated in favor of `nn.init.normal_`"):
        w = init.normal(np.zeros(1000), 2.0, 0.1)
    assert abs(w.mean() - 2.0) < 0.02
    assert init._calculate_fan_in_and_fan_out(np.zeros((6, 2, 3))) == \
        torch.nn.init._calculate_fan_in_and_fan_out(torch.zeros(6, 2, 3))


def test_parameters_to_vector_and_back_equal_torchs():
    import autodiff
    from nn.param_vector import parameters_to_vector, vector_to_parameters

    model = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))
    ref = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2))
    ref.load_state_dict({k: torch.tensor(v) for k, v in model.state_dict().items()})
    ours = parameters_to_vector(model.parameters())
    theirs = torch.nn.utils.parameters_to_vector(ref.parameters())
    np.testing.assert_array_equal(ours.numpy(), theirs.detach().numpy())
    new = np.arange(ours.shape[0], dtype="float64") / 10  # float64 in: each parameter keeps float32
    weight = model[0].weight
    vector_to_parameters(tracer.tensor(new), model.parameters())
    torch.nn.utils.vector_to_parameters(torch.tensor(new, dtype=torch.float32), ref.parameters())
    assert model[0].weight is weight and weight.dtype == "float32"
    for (k, v), (k2, v2) in zip(model.state_dict().items(), ref.state_dict().items(), strict=True):
        assert k == k2
        np.testing.assert_allclose(np.asarray(v), v2.numpy(), rtol=1e-7)
    g = autodiff.grad(lambda: (parameters_to_vector(model.parameters()) ** 2).sum(), wrt=model.parameters())()
    np.testing.assert_allclose(np.concatenate([np.asarray(x).ravel() for x in g]), 2 * new, rtol=1e-6)
    with pytest.raises(ValueError, match="shape"):
        vector_to_parameters(tracer.tensor(new[:-1]), model.parameters())
    with pytest.raises(TypeError, match="Tensor"):
        vector_to_parameters(new, model.parameters())
