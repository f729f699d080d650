"""Theory for the ocms family."""

__all__: list = []
