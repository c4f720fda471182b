"""Your implementations of the five stages. Check them with `make grade`."""
