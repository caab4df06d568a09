"""Studies that measure an algorithm rather than train with it: `grad_corr`, ES's gradient
against the true one at fixed parameters (Zhang, Clune & Stanley 2017)."""
