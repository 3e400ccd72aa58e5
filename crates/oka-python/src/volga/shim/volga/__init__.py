"""Oka's stand-in for Volga's Python API (`volga.api`), given to Oka's Python
workers when the real package is not importable, so that a module written
for Volga's on-demand layer runs as written. It implements what declaring
features needs: `@entity` and `field`, `@source` with its connectors,
`@on_demand`, and `@pipeline` (declared; Oka does not run streaming jobs).
"""
