"""Training one cell (`python -m rnnrepro.train`)."""
