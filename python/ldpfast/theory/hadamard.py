"""Theory for the hadamard family."""

__all__: list = []
