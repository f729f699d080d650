"""field kernels (see ldpfast.kernels)."""

__all__: list = []
