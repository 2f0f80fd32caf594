"""Passes over tilec IR (imported as `tilec.passes`): each module is one pass."""

from tilec.passes import canonicalize, cse, dce  # noqa: F401  (registers the passes)
