"""Bench and demo: stock Pipecat vs pipecat-fast, side by side on real audio."""
