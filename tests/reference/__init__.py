"""Reference implementations that tilec's results are checked against (Triton kernels)."""
