"""What each request to the random-weight test model should carry.

The generated model's replies are gibberish, so requests ban the control tokens and the tokens
that are not UTF-8 by themselves (``logit_bias``) so a reply never ends on its own and streams
token by token, cap replies at about one spoken phrase, and seed the sampler. See
``docs/engine.md``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipecat_fast.testing.gguf_model import read_token_list, unspeakable_token_ids

if TYPE_CHECKING:
    from pipecat.services.openai.llm import OpenAILLMService


@dataclass(frozen=True)
class EngineRequestSettings:
    """Request settings for the random-weight test model.

    Build with :meth:`for_model` or :meth:`LlamaCppServer.request_settings`, which read the
    ids to ban from the served model's vocabulary.

    Attributes:
        banned_token_ids: Token ids given a -100 logit bias: the control tokens, so the model
            never ends its turn on its own, and tokens that are not UTF-8 by themselves, which
            stall llama-cpp-python's stream (see
            :func:`.gguf_model.unspeakable_token_ids`).
        max_tokens: Reply cap in tokens. The replies have no sentence punctuation a sentence
            splitter would act on, so the reply's end is what hands text to TTS; ~20 tokens
            is about a first spoken phrase.
        seed: Sampler seed sent with every request, so a reply depends on the prompt only
            (the server otherwise advances its seed per request). ``None`` sends none.
        temperature: Sampling temperature; ``None`` keeps the server's default (0.8). Greedy
            (0.0) makes this model repeat one token.
    """

    banned_token_ids: tuple[int, ...]
    max_tokens: int = 20
    seed: int | None = 0
    temperature: float | None = None

    @classmethod
    def for_model(cls, model_path: str | Path, **overrides: Any) -> EngineRequestSettings:
        """Settings for a generated GGUF, banning what its vocabulary cannot stream.

        Args:
            model_path: The GGUF file served.
            **overrides: Other fields (``max_tokens``, ``seed``, ``temperature``).

        Returns:
            The settings.
        """
        return cls(banned_token_ids=_banned_ids(Path(model_path)), **overrides)

    def logit_bias(self) -> dict[str, float]:
        """The ``logit_bias`` request field (token id as a string -> bias)."""
        return {str(token_id): -100.0 for token_id in self.banned_token_ids}

    def request_params(self) -> dict[str, Any]:
        """Fields to merge into a raw ``/v1/chat/completions`` JSON body."""
        params: dict[str, Any] = {"max_tokens": self.max_tokens, "logit_bias": self.logit_bias()}
        if self.seed is not None:
            params["seed"] = self.seed
        if self.temperature is not None:
            params["temperature"] = self.temperature
        return params

    def openai_settings_fields(self) -> dict[str, Any]:
        """These settings as ``OpenAILLMService.Settings`` keyword arguments.

        ``max_tokens`` is sent as such (the server ignores ``max_completion_tokens``);
        ``logit_bias`` travels in ``extra``, which Pipecat merges into the request body.
        Combine with your own fields: ``OpenAILLMService.Settings(model=...,
        system_instruction=..., **settings.openai_settings_fields())``.
        """
        fields: dict[str, Any] = {
            "max_tokens": self.max_tokens,
            "extra": {"logit_bias": self.logit_bias()},
        }
        if self.seed is not None:
            fields["seed"] = self.seed
        if self.temperature is not None:
            fields["temperature"] = self.temperature
        return fields

    def openai_settings(
        self, model: str = "pipecat-fast-local", **fields: Any
    ) -> OpenAILLMService.Settings:
        """These settings as an ``OpenAILLMService.Settings``.

        Use as ``OpenAILLMService(base_url=server.base_url, api_key="none",
        settings=server.request_settings().openai_settings())``.

        Args:
            model: Model name sent; the server serves its one model whatever is sent.
            **fields: Other ``OpenAILLMService.Settings`` fields, e.g. ``system_instruction``.

        Returns:
            An ``OpenAILLMService.Settings``.
        """
        from pipecat.services.openai.llm import OpenAILLMService

        return OpenAILLMService.Settings(model=model, **{**self.openai_settings_fields(), **fields})


def _banned_ids(path: Path) -> tuple[int, ...]:
    stat = path.stat()
    return _banned_ids_cached(str(path.resolve()), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=8)
def _banned_ids_cached(path: str, mtime_ns: int, size: int) -> tuple[int, ...]:
    return tuple(unspeakable_token_ids(read_token_list(Path(path))))
