"""Passes over tilec IR (imported as `tilec.passes`): each module is one pass."""
