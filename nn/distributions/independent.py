"""Independent(base_distribution, reinterpreted_batch_ndims): the base's rightmost batch dims as event dims
(log_prob and entropy summed over them), as torch.distributions.Independent."""
from __future__ import annotations

from .distribution import Distribution


def _sum_right(x, n):
    return x.sum(tuple(range(-n, 0))) if n else x


class Independent(Distribution):
    """Independent(Normal(loc, scale), 1): a diagonal Gaussian over the last axis."""

    arg_constraints: dict = {}

    def __init__(self, base_distribution, reinterpreted_batch_ndims: int, validate_args=None):
        shape = base_distribution.batch_shape + base_distribution.event_shape
        event_dim = reinterpreted_batch_ndims + len(base_distribution.event_shape)
        if reinterpreted_batch_ndims > len(base_distribution.batch_shape):
            raise ValueError("Expected reinterpreted_batch_ndims <= len(base_distribution.batch_shape), actual "
                             f"{reinterpreted_batch_ndims} vs {len(base_distribution.batch_shape)}")
        self.base_dist = base_distribution
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims
        cut = len(shape) - event_dim
        super().__init__(shape[:cut], shape[cut:], validate_args=validate_args)

    @property
    def has_rsample(self):
        return self.base_dist.has_rsample

    @property
    def support(self):
        return None  # the base checks its own support

    @property
    def mean(self):
        return self.base_dist.mean

    @property
    def mode(self):
        return self.base_dist.mode

    @property
    def variance(self):
        return self.base_dist.variance

    def sample(self, sample_shape=()):
        return self.base_dist.sample(sample_shape)

    def rsample(self, sample_shape=()):
        return self.base_dist.rsample(sample_shape)

    def log_prob(self, value):
        return _sum_right(self.base_dist.log_prob(value), self.reinterpreted_batch_ndims)

    def entropy(self):
        return _sum_right(self.base_dist.entropy(), self.reinterpreted_batch_ndims)

    def expand(self, batch_shape, _instance=None):
        batch_shape = tuple(batch_shape)
        base = self.base_dist.expand(batch_shape + self._event_shape[:self.reinterpreted_batch_ndims])
        return Independent(base, self.reinterpreted_batch_ndims, validate_args=False)

    def __repr__(self):
        return f"Independent({self.base_dist!r}, {self.reinterpreted_batch_ndims})"
