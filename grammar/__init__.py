"""The tile DSL grammar (package data `tilec.grammar`)."""
