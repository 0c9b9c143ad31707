"""Offline test doubles and local engines for exercising Pipecat pipelines without network."""
