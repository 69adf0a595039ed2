"""torch.linalg's spellings: `tracer.linalg.vector_norm`, `matrix_norm`, `norm` and `cross` (tracer/products.py),
`svd` and `svdvals` (tracer/svd.py)."""
from .products import linalg_cross as cross
from .products import matrix_norm, norm, vector_norm
from .svd import svd, svdvals

__all__ = ["cross", "matrix_norm", "norm", "svd", "svdvals", "vector_norm"]
