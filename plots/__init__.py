"""Entry points in a checkout: `python -m plots.KIND RUN_DIR ...` is `nevo plot KIND` (nevo.plots)."""
