"""Subcommands of the ldpfast command line (see ldpfast.cli)."""
