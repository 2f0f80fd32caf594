"""The tile DSL frontend."""
