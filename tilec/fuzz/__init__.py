"""Random tile programs through every pass: generated well-typed kernels (`generate`), the
differential check in the interpreter and through ptxas (`differential`), mutated bad
programs (`mutate`), and the same kernels on the GPU (`gpu`). docs/testing.md says how to
run them."""
