"""nn.distributions against torch.distributions: log_prob, entropy, mean, variance and kl_divergence values and
their gradients with respect to the parameters (eagerly with loss.backward() and compiled with
autodiff.value_and_grad; float64 within 1e-10, float32 within 1e-5), sample shapes and dtypes, argument
validation with torch's messages, moments of large draws, and two small programs end to end (a policy
gradient step, a VAE loss)."""
import numpy as np
import pytest

import autodiff
import tracer as T
from nn import distributions as D

torch = pytest.importorskip("torch")
TD = torch.distributions

R = np.random.default_rng(0)
TOL = {"float64": dict(rtol=1e-10, atol=1e-12), "float32": dict(rtol=1e-5, atol=1e-6)}
# Gradients through digamma reach polygamma(1, x), where torch's float64 value is off by up to 5e-10 relative
# (polygamma(1, 1.1278) against mpmath; tracegrad's is within 2e-16, see tests/cases/gamma_fns.py's rows)
TRIGAMMA = {"float64": dict(rtol=3e-9, atol=1e-9), "float32": TOL["float32"]}
_TRIGAMMA_CASES = ("beta", "gamma", "dirichlet")


def _spd(n, batch=()):
    m = R.normal(size=batch + (n, n))
    return m @ np.swapaxes(m, -1, -2) + n * np.eye(n)


def _simplex(*shape):
    x = R.uniform(0.2, 1.0, shape)
    return x / x.sum(-1, keepdims=True)


# name -> (build(lib, *params), parameter arrays, value array)
CASES = {
    "normal": (lambda d, loc, scale: d.Normal(loc, scale), [R.normal(size=3), R.uniform(0.5, 2, 3)],
               R.normal(size=(2, 3))),
    "categorical_probs": (lambda d, p: d.Categorical(probs=p), [R.uniform(0.1, 1, (2, 4))],
                          np.array([[0, 3], [2, 1], [1, 1]])),
    "categorical_logits": (lambda d, lg: d.Categorical(logits=lg), [R.normal(size=(2, 4))], np.array([3, 0])),
    "bernoulli_probs": (lambda d, p: d.Bernoulli(probs=p), [R.uniform(0.1, 0.9, 3)], np.array([0.0, 1.0, 1.0])),
    "bernoulli_logits": (lambda d, lg: d.Bernoulli(logits=lg), [R.normal(size=3)], np.array([[1.0, 0.0, 1.0]] * 2)),
    "mvn_covariance": (lambda d, loc, c: d.MultivariateNormal(loc, covariance_matrix=c),
                       [R.normal(size=3), _spd(3, (2,))], R.normal(size=(2, 3))),
    "mvn_scale_tril": (lambda d, loc, s: d.MultivariateNormal(loc, scale_tril=s),
                       [R.normal(size=(2, 3)), np.tril(R.normal(size=(3, 3)), -1) + np.diag(R.uniform(0.5, 2, 3))],
                       R.normal(size=(4, 2, 3))),
    "mvn_precision": (lambda d, loc, p: d.MultivariateNormal(loc, precision_matrix=p), [R.normal(size=3), _spd(3)],
                      R.normal(size=3)),
    "mvn_diagonal": (lambda d, loc, v: d.MultivariateNormal(loc, covariance_matrix=_diag(d, v)),
                     [R.normal(size=3), R.uniform(0.5, 2, 3)], R.normal(size=(2, 3))),
    "uniform": (lambda d, lo, hi: d.Uniform(lo, hi), [R.uniform(-2, -1, 3), R.uniform(1, 2, 3)],
                R.uniform(-0.9, 0.9, (2, 3))),
    "beta": (lambda d, a, b: d.Beta(a, b), [R.uniform(0.5, 3, 3), R.uniform(0.5, 3, 3)], R.uniform(0.1, 0.9, 3)),
    "gamma": (lambda d, a, r: d.Gamma(a, r), [R.uniform(0.5, 4, 3), R.uniform(0.5, 2, 3)], R.uniform(0.1, 3, (2, 3))),
    "dirichlet": (lambda d, c: d.Dirichlet(c), [R.uniform(0.5, 3, (2, 3))], _simplex(2, 3)),
    "independent_normal": (lambda d, loc, scale: d.Independent(d.Normal(loc, scale), 1),
                           [R.normal(size=(2, 3)), R.uniform(0.5, 2, (2, 3))], R.normal(size=(2, 3))),
}


def _diag(d, v):
    return T.diag_embed(v) if d is D else torch.diag_embed(v)


def _ours(arrays, dtype, requires_grad=False):
    return [T.tensor(a.astype(dtype), requires_grad=requires_grad) for a in arrays]


def _theirs(arrays, dtype):
    return [torch.tensor(a.astype(dtype), requires_grad=True) for a in arrays]


def _value(v, dtype, lib):
    v = v if v.dtype.kind == "i" else v.astype(dtype)
    return T.tensor(v) if lib is D else torch.tensor(v)


def _moments(dist):
    """The moments torch gives finite floats for (Categorical's NaN mean and int mode are left out)."""
    names = []
    for name in ("mean", "variance", "stddev", "mode"):
        arr = getattr(dist, name).detach().numpy()
        if np.isfinite(arr).all() and arr.dtype.kind == "f":
            names.append(name)
    return names


def _stats(dist, value, names):
    """log_prob, entropy and the named moments, in one list."""
    return [dist.log_prob(value), dist.entropy()] + [getattr(dist, name) for name in names]


def _loss(stats, lib):
    total = 0
    for k, s in enumerate(stats):
        total = total + (s * (1.0 + 0.25 * k)).sum()
    return total


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", list(CASES))
def test_values_and_gradients_match_torch(name, dtype):
    build, params, value = CASES[name]
    tp = _theirs(params, dtype)
    names = _moments(build(TD, *tp))
    t_stats = _stats(build(TD, *tp), _value(value, dtype, torch), names)
    t_loss = _loss(t_stats, torch)
    t_grads = torch.autograd.grad(t_loss, tp)

    ours = _ours(params, dtype, requires_grad=True)
    o_stats = _stats(build(D, *ours), _value(value, dtype, D), names)
    assert len(o_stats) == len(t_stats)
    for o, t in zip(o_stats, t_stats, strict=True):
        assert o.shape == tuple(t.shape) and o.dtype == str(t.dtype).replace("torch.", "")
        np.testing.assert_allclose(o.numpy(), t.detach().numpy(), **TOL[dtype])
    loss = _loss(o_stats, D)
    np.testing.assert_allclose(loss.numpy(), t_loss.detach().numpy(), **TOL[dtype])
    loss.backward()
    gtol = (TRIGAMMA if name in _TRIGAMMA_CASES else TOL)[dtype]
    for p, g in zip(ours, t_grads, strict=True):
        np.testing.assert_allclose(p.grad.numpy(), g.numpy(), **gtol, err_msg=f"{name} backward")

    plain = _ours(params, dtype)
    step = autodiff.value_and_grad(lambda *ps: _loss(_stats(build(D, *ps), _value(value, dtype, D), names), D),
                                   wrt=plain)
    val, grads = step(*plain)
    np.testing.assert_allclose(val.numpy(), t_loss.detach().numpy(), **TOL[dtype])
    for g, t in zip(grads, t_grads, strict=True):
        np.testing.assert_allclose(g.numpy(), t.numpy(), **gtol, err_msg=f"{name} value_and_grad")


KL_PAIRS = {
    "normal": (lambda d, a, b, c, e: (d.Normal(a, b), d.Normal(c, e)),
               [R.normal(size=3), R.uniform(0.5, 2, 3), R.normal(size=3), R.uniform(0.5, 2, 3)]),
    "categorical": (lambda d, a, b: (d.Categorical(probs=a), d.Categorical(logits=b)),
                    [R.uniform(0.1, 1, (2, 4)), R.normal(size=(2, 4))]),
    "bernoulli": (lambda d, a, b: (d.Bernoulli(probs=a), d.Bernoulli(logits=b)), [R.uniform(0.1, 0.9, 3),
                                                                                R.normal(size=3)]),
    "mvn": (lambda d, a, b, c, e: (d.MultivariateNormal(a, covariance_matrix=b), d.MultivariateNormal(c, scale_tril=e)),
            [R.normal(size=(2, 3)), _spd(3), R.normal(size=3),
             np.tril(R.normal(size=(2, 3, 3)), -1) + np.diag(R.uniform(0.5, 2, 3))]),
    "uniform": (lambda d, a, b, c, e: (d.Uniform(a, b), d.Uniform(c, e)),
                [R.uniform(-1, 0, 3), R.uniform(1, 2, 3), R.uniform(-3, -1, 3), R.uniform(2, 3, 3)]),
    "beta": (lambda d, a, b, c, e: (d.Beta(a, b), d.Beta(c, e)), [R.uniform(0.5, 3, 3) for _ in range(4)]),
    "gamma": (lambda d, a, b, c, e: (d.Gamma(a, b), d.Gamma(c, e)), [R.uniform(0.5, 3, 3) for _ in range(4)]),
    "dirichlet": (lambda d, a, b: (d.Dirichlet(a), d.Dirichlet(b)), [R.uniform(0.5, 3, (2, 4)) for _ in range(2)]),
    "independent": (lambda d, a, b: (d.Independent(d.Normal(a, b), 1), d.Independent(d.Normal(b, a + 1), 1)),
                    [R.uniform(0.5, 2, (2, 3)), R.uniform(0.5, 2, (2, 3))]),
}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", list(KL_PAIRS))
def test_kl_divergence_matches_torch(name, dtype):
    build, params = KL_PAIRS[name]
    tp = _theirs(params, dtype)
    t_kl = TD.kl_divergence(*build(TD, *tp))
    t_grads = torch.autograd.grad((t_kl * 1.5).sum(), tp)
    ours = _ours(params, dtype, requires_grad=True)
    kl = D.kl_divergence(*build(D, *ours))
    assert kl.shape == tuple(t_kl.shape)
    np.testing.assert_allclose(kl.numpy(), t_kl.detach().numpy(), **TOL[dtype])
    (kl * 1.5).sum().backward()
    gtol = (TRIGAMMA if name in _TRIGAMMA_CASES else TOL)[dtype]
    for p, g in zip(ours, t_grads, strict=True):
        np.testing.assert_allclose(p.grad.numpy(), g.numpy(), **gtol)
    plain = _ours(params, dtype)
    _, grads = autodiff.value_and_grad(lambda *ps: (D.kl_divergence(*build(D, *ps)) * 1.5).sum(), wrt=plain)(*plain)
    for g, t in zip(grads, t_grads, strict=True):
        np.testing.assert_allclose(g.numpy(), t.numpy(), **gtol)


def test_kl_edges_match_torch():
    """Zero probabilities give inf / 0 terms, and Uniforms that do not nest give inf, as torch."""
    p, q = np.array([0.0, 0.5, 0.5]), np.array([0.5, 0.0, 0.5])
    for a, b in ((p, q), (q, p), (p, p)):
        ours = D.kl_divergence(D.Categorical(probs=T.tensor(a)), D.Categorical(probs=T.tensor(b)))
        theirs = TD.kl_divergence(TD.Categorical(probs=torch.tensor(a)), TD.Categorical(probs=torch.tensor(b)))
        np.testing.assert_allclose(ours.numpy(), theirs.numpy())
    ours = D.kl_divergence(D.Bernoulli(probs=T.tensor([0.0, 1.0, 0.3])), D.Bernoulli(probs=T.tensor([1.0, 1.0, 0.0])))
    theirs = TD.kl_divergence(TD.Bernoulli(probs=torch.tensor([0.0, 1.0, 0.3])),
                              TD.Bernoulli(probs=torch.tensor([1.0, 1.0, 0.0])))
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-5)
    ours = D.kl_divergence(D.Uniform(T.tensor([0.0, -1.0]), T.tensor([1.0, 1.0])), D.Uniform(0.5, 2.0))
    assert np.isinf(ours.numpy()).all()


def test_register_kl_and_missing_pairs():
    class MyNormal(D.Normal):
        pass

    assert float(D.kl_divergence(MyNormal(0.0, 1.0), D.Normal(1.0, 1.0))) == pytest.approx(0.5)  # inherited pair

    @D.register_kl(MyNormal, D.Normal)
    def _kl(p, q):
        return T.tensor(7.0)

    assert float(D.kl_divergence(MyNormal(0.0, 1.0), D.Normal(1.0, 1.0))) == 7.0  # the more specific pair wins
    with pytest.raises(NotImplementedError, match="No KL\\(p \\|\\| q\\) is implemented for p type Normal and q type "
                                                  "Gamma"):
        D.kl_divergence(D.Normal(0.0, 1.0), D.Gamma(1.0, 1.0))


SHAPED = {
    "normal": lambda d: d.Normal(T.zeros(2) if d is D else torch.zeros(2), 1.0),
    "categorical": lambda d: d.Categorical(probs=(T.ones if d is D else torch.ones)(3, 4)),
    "bernoulli": lambda d: d.Bernoulli(probs=(T.ones if d is D else torch.ones)(2) * 0.3),
    "mvn": lambda d: d.MultivariateNormal((T.zeros if d is D else torch.zeros)(2, 3),
                                          scale_tril=(T.eye if d is D else torch.eye)(3)),
    "uniform": lambda d: d.Uniform(0.0, (T.ones if d is D else torch.ones)(2)),
    "beta": lambda d: d.Beta((T.ones if d is D else torch.ones)(2), 2.0),
    "gamma": lambda d: d.Gamma((T.ones if d is D else torch.ones)(2), 2.0),
    "dirichlet": lambda d: d.Dirichlet((T.ones if d is D else torch.ones)(2, 3)),
}


@pytest.mark.parametrize("name", list(SHAPED))
def test_sample_shapes_and_dtypes_match_torch(name):
    ours, theirs = SHAPED[name](D), SHAPED[name](TD)
    assert ours.batch_shape == tuple(theirs.batch_shape) and ours.event_shape == tuple(theirs.event_shape)
    for shape in ((), (5,), (2, 3)):
        a, b = ours.sample(shape), theirs.sample(shape)
        assert a.shape == tuple(b.shape) and a.dtype == str(b.dtype).replace("torch.", ""), (shape, a.shape, b.shape)
        assert not a.requires_grad
    assert ours.has_rsample == theirs.has_rsample
    expanded = ours.expand((4,) + ours.batch_shape)
    assert expanded.batch_shape == tuple(theirs.expand((4,) + tuple(theirs.batch_shape)).batch_shape)
    assert expanded.sample((2,)).shape == (2, 4) + ours.batch_shape + ours.event_shape


def test_large_draw_moments():
    T.manual_seed(0)
    n = 40000
    x = D.Normal(T.tensor([1.0, -2.0]), T.tensor([0.5, 3.0])).rsample((n,)).numpy()
    np.testing.assert_allclose(x.mean(0), [1.0, -2.0], atol=0.05)
    np.testing.assert_allclose(x.std(0), [0.5, 3.0], rtol=0.03)
    c = D.Categorical(probs=T.tensor([0.1, 0.2, 0.7])).sample((n,)).numpy()
    np.testing.assert_allclose(np.bincount(c, minlength=3) / n, [0.1, 0.2, 0.7], atol=0.01)
    b = D.Bernoulli(logits=T.tensor(0.5)).sample((n,)).numpy()
    assert abs(b.mean() - 1 / (1 + np.exp(-0.5))) < 0.01 and set(np.unique(b)) == {0.0, 1.0}
    cov = np.array([[2.0, 0.6], [0.6, 1.0]])
    m = D.MultivariateNormal(T.tensor([1.0, 0.0], dtype="float64"), T.tensor(cov)).rsample((n,)).numpy()
    np.testing.assert_allclose(np.cov(m.T), cov, atol=0.06)
    u = D.Uniform(-1.0, 3.0).sample((n,)).numpy()
    assert u.min() >= -1 and u.max() < 3 and abs(u.mean() - 1) < 0.03
    g = D.Gamma(T.tensor([0.5, 4.0], dtype="float64"), T.tensor([2.0, 0.5], dtype="float64")).sample((n,)).numpy()
    np.testing.assert_allclose(g.mean(0), [0.25, 8.0], rtol=0.03)
    np.testing.assert_allclose(g.var(0), [0.125, 16.0], rtol=0.06)
    dr = D.Dirichlet(T.tensor([1.0, 2.0, 5.0], dtype="float64")).sample((n,)).numpy()
    np.testing.assert_allclose(dr.sum(-1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(dr.mean(0), [0.125, 0.25, 0.625], atol=0.01)
    be = D.Beta(2.0, 3.0).sample((n,)).numpy()
    assert abs(be.mean() - 0.4) < 0.01 and abs(be.var() - 0.04) < 0.004


def test_validation_messages_match_torch():
    cases = [
        lambda d, t: d.Normal(t.zeros(2), t.tensor([1.0, -1.0])),
        lambda d, t: d.Uniform(1.0, 0.0),
        lambda d, t: d.Bernoulli(probs=t.tensor(1.5)),
        lambda d, t: d.Categorical(),
        lambda d, t: d.MultivariateNormal(t.zeros(2)),
        lambda d, t: d.MultivariateNormal(t.zeros(2), t.tensor([[1.0, 2.0], [2.0, 1.0]])),
        lambda d, t: d.Gamma(t.tensor([1.0, 0.0]), 1.0),
        lambda d, t: d.Dirichlet(t.tensor([-1.0, 1.0])),
        lambda d, t: d.Uniform(0.0, 1.0).log_prob(t.tensor([0.5, 2.0])),
        lambda d, t: d.Categorical(probs=t.tensor([0.5, 0.5])).log_prob(t.tensor([3])),
        lambda d, t: d.Normal(t.zeros(3), 1.0).log_prob(t.zeros(2)),
        lambda d, t: d.MultivariateNormal(t.zeros(3), t.eye(3)).log_prob(t.zeros(2)),
    ]
    for make in cases:
        with pytest.raises(ValueError) as theirs:
            make(TD, torch)
        with pytest.raises(ValueError) as ours:
            make(D, T)
        # the same message up to the invalid values' printout (tracegrad's tensor repr is not torch's)
        assert str(ours.value).split("\n")[0] == str(theirs.value).split("\n")[0]
    assert D.Normal(0.0, -1.0, validate_args=False).scale.item() == -1.0


def test_policy_gradient_step_matches_torch():
    """REINFORCE: loss = -(Categorical(logits=obs @ W + b).log_prob(actions) * advantages).mean() - 0.01 H."""
    obs, w, b = R.normal(size=(6, 4)), R.normal(size=(4, 3)) * 0.5, R.normal(size=3) * 0.1
    actions, adv = np.array([0, 2, 1, 1, 0, 2]), R.normal(size=6)

    def loss_of(lib, t, W, B):
        dist = lib.Categorical(logits=t.tensor(obs) @ W + B)
        return -(dist.log_prob(t.tensor(actions)) * t.tensor(adv)).mean() - 0.01 * dist.entropy().mean()

    tw, tb = torch.tensor(w, requires_grad=True), torch.tensor(b, requires_grad=True)
    t_loss = loss_of(TD, torch, tw, tb)
    t_loss.backward()
    ow, ob = T.tensor(w, requires_grad=True), T.tensor(b, requires_grad=True)
    o_loss = loss_of(D, T, ow, ob)
    o_loss.backward()
    np.testing.assert_allclose(o_loss.numpy(), t_loss.detach().numpy(), rtol=1e-10)
    np.testing.assert_allclose(ow.grad.numpy(), tw.grad.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(ob.grad.numpy(), tb.grad.numpy(), rtol=1e-10, atol=1e-12)
    pw, pb = T.tensor(w), T.tensor(b)
    val, (gw, gb) = autodiff.value_and_grad(lambda: loss_of(D, T, pw, pb), wrt=[pw, pb])()
    np.testing.assert_allclose(gw.numpy(), tw.grad.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(gb.numpy(), tb.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_vae_loss_matches_torch_with_the_same_noise():
    """z = Normal(mu, exp(logvar / 2)).rsample(); loss = |z @ Wd - x|^2 + KL(q(z|x) || N(0, 1)); torch is fed
    the noise tracegrad drew (read back from z), so both compute the same function of the weights."""
    x = R.normal(size=(5, 4))
    w_mu, w_lv, w_dec = (R.normal(size=s) * 0.3 for s in ((4, 2), (4, 2), (2, 4)))

    def loss_of(lib, t, wm, wl, wd, eps=None):
        mu, logvar = t.tensor(x) @ wm, t.tensor(x) @ wl
        q = lib.Normal(mu, t.exp(0.5 * logvar))
        z = q.rsample() if eps is None else mu + t.tensor(eps) * t.exp(0.5 * logvar)
        prior = lib.Normal(t.zeros_like(mu), t.ones_like(mu))
        recon = ((z @ wd - t.tensor(x)) ** 2).sum()
        return recon + lib.kl_divergence(q, prior).sum(), (z, mu, logvar)

    ours = [T.tensor(a, requires_grad=True) for a in (w_mu, w_lv, w_dec)]
    T.manual_seed(3)
    o_loss, (z, mu, logvar) = loss_of(D, T, *ours)
    eps = ((z - mu) / T.exp(0.5 * logvar)).detach().numpy()
    assert abs(eps.mean()) < 1.5 and 0.2 < eps.std() < 3  # a standard normal draw, not zeros
    o_loss.backward()
    theirs = [torch.tensor(a, requires_grad=True) for a in (w_mu, w_lv, w_dec)]
    t_loss, _ = loss_of(TD, torch, *theirs, eps=eps)
    t_loss.backward()
    np.testing.assert_allclose(o_loss.numpy(), t_loss.detach().numpy(), rtol=1e-10)
    for o, t in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(o.grad.numpy(), t.grad.numpy(), rtol=1e-9, atol=1e-11)

    plain = [T.tensor(a) for a in (w_mu, w_lv, w_dec)]
    step = autodiff.value_and_grad(lambda *ws: loss_of(D, T, *ws), wrt=plain, has_aux=True)
    (val, (z2, mu2, lv2)), grads = step(*plain)
    eps2 = ((z2 - mu2) / T.exp(0.5 * lv2)).numpy()
    assert not np.allclose(eps2, eps)  # the compiled step draws fresh noise
    theirs = [torch.tensor(a, requires_grad=True) for a in (w_mu, w_lv, w_dec)]
    t_loss, _ = loss_of(TD, torch, *theirs, eps=eps2)
    t_grads = torch.autograd.grad(t_loss, theirs)
    np.testing.assert_allclose(val.numpy(), t_loss.detach().numpy(), rtol=1e-10)
    for g, t in zip(grads, t_grads, strict=True):
        np.testing.assert_allclose(g.numpy(), t.numpy(), rtol=1e-9, atol=1e-11)
