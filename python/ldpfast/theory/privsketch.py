"""Theory for the privsketch family."""

__all__: list = []
