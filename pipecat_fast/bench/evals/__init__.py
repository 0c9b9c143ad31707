"""Offline evaluation suites of the levers (``pipecat-fast bench sbd|partials|lint``).

They live with the bench, not in the lever packages: a lever never imports the bench or the
test material.
"""
