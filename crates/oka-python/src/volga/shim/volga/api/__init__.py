"""Volga's declaration API, as Oka supplies it (see the package's docstring)."""
