"""gcpipe: a reproducible research pipeline for Guerrilla Checkers."""

__version__ = "0.1.0"
