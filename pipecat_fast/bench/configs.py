"""Named bench configurations: each is the stock pipeline plus one or more levers.

A configuration is a function that receives the :class:`~pipecat_fast.bench.pipeline.PipelineSpec`
of a call before it is assembled and adds its levers. Each lever's issue registers its own
configuration here, so the bench can run any of them side by side with ``stock``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pipecat_fast.bench.pipeline import PipelineSpec


@dataclass(frozen=True)
class BenchConfig:
    """A named pipeline configuration.

    Parameters:
        name: As given to ``--configs``.
        description: One line for the report.
        customize: Adds the configuration's levers to a call's pipeline spec.
    """

    name: str
    description: str
    customize: Callable[[PipelineSpec], None]


def _stock(spec: PipelineSpec) -> None:
    """Pipecat as a user would configure it: nothing added."""


CONFIGS: dict[str, BenchConfig] = {}


def register(config: BenchConfig) -> BenchConfig:
    """Add a configuration to :data:`CONFIGS` (its name must be new).

    Raises:
        ValueError: If the name is taken.
    """
    if config.name in CONFIGS:
        raise ValueError(f"bench configuration {config.name!r} already registered")
    CONFIGS[config.name] = config
    return config


register(BenchConfig("stock", "stock Pipecat 1.14 pipeline (the baseline)", _stock))
register(BenchConfig("stock-again", "the same stock pipeline again: shows the noise floor", _stock))


def get_configs(names: list[str]) -> list[BenchConfig]:
    """Look configurations up by name, in the order given.

    Raises:
        ValueError: Naming the unknown configuration and listing the known ones.
    """
    unknown = [n for n in names if n not in CONFIGS]
    if unknown:
        raise ValueError(
            f"unknown bench configuration(s) {', '.join(unknown)}; known: {', '.join(CONFIGS)}"
        )
    return [CONFIGS[n] for n in names]
