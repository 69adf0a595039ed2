"""torch.distributions on tracegrad tensors (`nn.distributions`, also `nn.torch.distributions`): log_prob,
entropy, rsample and kl_divergence are tracer ops, so they differentiate through autodiff.value_and_grad and
loss.backward(). Gamma, Beta and Dirichlet sample but have no rsample (see gamma_family.py)."""
from . import constraints
from .categorical import Bernoulli, Categorical
from .distribution import Distribution
from .gamma_family import Beta, Dirichlet, Gamma
from .independent import Independent
from .kl import kl_divergence, register_kl
from .mvn import MultivariateNormal
from .normal import Normal, Uniform

__all__ = ["Bernoulli", "Beta", "Categorical", "Dirichlet", "Distribution", "Gamma", "Independent",
           "MultivariateNormal", "Normal", "Uniform", "constraints", "kl_divergence", "register_kl"]
