"""A random-weight llama-architecture GGUF model, generated locally and cached on disk.

No weights can be downloaded where this project is built and tested, yet prefix (KV) cache
behaviour needs a real inference engine. This module trains a byte-level BPE vocabulary on
text that ships with Python itself (``pydoc_data.topics``), draws seeded random weights, and
writes a GGUF file that llama.cpp loads like any llama model, with a ChatML chat template.
The model's replies are gibberish; its prefill and decode cost are real.

Generation is deterministic: the same spec, corpus and code produce the same file. Files
are cached under :func:`cache_dir` with a hash of everything that shapes them in the file
name, so a change to the spec, the corpus or this generator writes a new file.

Needs the ``gguf``, ``numpy`` and ``tokenizers`` packages (the ``bench`` extra).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from loguru import logger

CACHE_DIR_ENV = "PIPECAT_FAST_CACHE_DIR"
"""Environment variable that overrides where generated models are cached."""

# Bump when the bytes this module writes change for an unchanged spec.
_FORMAT_VERSION = 1

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
"""Control tokens, in id order: they always get ids 0, 1 and 2."""
BOS_TOKEN_ID = 0
IM_START_TOKEN_ID = 1
EOS_TOKEN_ID = 2
"""``<|im_end|>``: ends every ChatML turn, so it is the end-of-sequence token."""

# A ChatML template (the turn markup Qwen and others use) that also renders tool schemas
# into the system turn, so a prompt with tools costs prefill like it does on a real model.
# Accepts string or list-of-parts content and the "developer" role; written for this project.
CHATML_TEMPLATE = (
    "{%- macro render_content(content) -%}"
    "{%- if content is string -%}{{- content -}}"
    "{%- elif content is iterable -%}"
    "{%- for part in content -%}{%- if part.type == 'text' -%}{{- part.text -}}{%- endif -%}"
    "{%- endfor -%}"
    "{%- endif -%}"
    "{%- endmacro -%}"
    "{%- set system_first = messages and messages[0].role in ['system', 'developer'] -%}"
    "{%- if tools -%}"
    "{{- '<|im_start|>system\\n' -}}"
    "{%- if system_first -%}{{- render_content(messages[0].content) + '\\n\\n' -}}{%- endif -%}"
    "{{- '# Tools\\n\\nFunctions you may call, one JSON schema per line:\\n<tools>\\n' -}}"
    "{%- for tool in tools -%}{{- (tool | tojson) + '\\n' -}}{%- endfor -%}"
    '{{- \'</tools>\\nTo call one, reply with <tool_call>{"name": ..., "arguments": ...}'
    "</tool_call>.<|im_end|>\\n' -}}"
    "{%- endif -%}"
    "{%- for message in messages -%}"
    "{%- if not (loop.first and system_first and tools) -%}"
    "{%- set role = 'system' if message.role == 'developer' else message.role -%}"
    "{{- '<|im_start|>' + role + '\\n' -}}"
    "{{- render_content(message.content) -}}"
    "{%- if message.tool_calls -%}"
    "{%- for call in message.tool_calls -%}"
    "{{- '<tool_call>' + (call.function | tojson) + '</tool_call>' -}}"
    "{%- endfor -%}"
    "{%- endif -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)


@dataclass(frozen=True)
class ModelSpec:
    """Shape and seed of a generated model.

    Attributes:
        name: Short name, used in the file name.
        hidden_size: Embedding width (``n_embd``).
        n_layers: Transformer blocks.
        n_heads: Attention heads (also the KV heads: plain multi-head attention).
        ffn_size: SwiGLU feed-forward width.
        vocab_size: BPE vocabulary size including the control tokens; the trained vocabulary
            can come out smaller if the corpus runs out of merges.
        context_length: Trained context length written to the GGUF (tokens).
        seed: Seed for the weights.
        init_std: Standard deviation of the random matrices.
    """

    name: str
    hidden_size: int
    n_layers: int
    n_heads: int
    ffn_size: int
    vocab_size: int = 4096
    context_length: int = 8192
    seed: int = 0
    init_std: float = 0.02

    @property
    def head_dim(self) -> int:
        """Width of one attention head."""
        return self.hidden_size // self.n_heads

    @property
    def n_params(self) -> int:
        """Parameter count (tied input/output embedding, norms included)."""
        d, f = self.hidden_size, self.ffn_size
        per_layer = 4 * d * d + 3 * d * f + 2 * d
        return self.vocab_size * d + self.n_layers * per_layer + d


MODEL_SPECS: dict[str, ModelSpec] = {
    # ~88M parameters, ~176 MB in f16: large enough that a 3k-token prefill costs seconds on CPU.
    "bench": ModelSpec(name="bench", hidden_size=768, n_layers=12, n_heads=12, ffn_size=2048),
    # ~19M parameters: loads and answers in well under a second, for tests.
    "small": ModelSpec(
        name="small", hidden_size=384, n_layers=6, n_heads=6, ffn_size=2048, context_length=4096
    ),
}
"""Named model sizes accepted by :func:`ensure_model`."""


def cache_dir() -> Path:
    """Directory where generated models are cached.

    ``$PIPECAT_FAST_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/pipecat-fast``, else
    ``~/.cache/pipecat-fast``. Not created here.
    """
    override = os.environ.get(CACHE_DIR_ENV)
    if override:
        return Path(override).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "pipecat-fast"


def corpus_text() -> str:
    """The tokenizer's training text: Python's own ``pydoc`` topic pages, in key order.

    Raises:
        RuntimeError: If this Python was installed without ``pydoc_data``.
    """
    try:
        from pydoc_data.topics import topics
    except ImportError as exc:  # some minimal distro builds strip it
        raise RuntimeError(
            "pydoc_data.topics is missing from this Python install; it is the local corpus "
            "the test model's tokenizer is trained on"
        ) from exc
    return "\n\n".join(topics[key] for key in sorted(topics))


@dataclass(frozen=True)
class Vocab:
    """A trained byte-level BPE vocabulary in GGUF's terms.

    Attributes:
        tokens: Token strings in id order (byte-level alphabet, as GPT-2 writes them).
        merges: Merge rules, ``"left right"``, highest priority first.
    """

    tokens: tuple[str, ...]
    merges: tuple[str, ...]


def train_vocab(text: str, vocab_size: int) -> Vocab:
    """Train a GPT-2-style byte-level BPE vocabulary on ``text``.

    The pre-tokenizer is GPT-2's regex, which llama.cpp applies for ``tokenizer.ggml.pre =
    "gpt-2"``, so llama.cpp splits text the way the merges were learned. Control tokens get
    ids 0..2 (:data:`SPECIAL_TOKENS`). Deterministic for a given text.

    Args:
        text: Training corpus.
        vocab_size: Wanted vocabulary size, control tokens and the 256 byte symbols included.

    Returns:
        The vocabulary.
    """
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(text.split("\n\n"), trainer=trainer)
    by_id = {index: token for token, index in tokenizer.get_vocab(with_added_tokens=True).items()}
    if sorted(by_id) != list(range(len(by_id))):
        raise RuntimeError("trained vocabulary ids are not contiguous")
    tokens = tuple(by_id[i] for i in range(len(by_id)))
    if tokens[: len(SPECIAL_TOKENS)] != SPECIAL_TOKENS:
        raise RuntimeError(f"control tokens did not get ids 0..2: {tokens[:3]}")
    raw_merges = json.loads(tokenizer.to_str())["model"]["merges"]
    merges = tuple(m if isinstance(m, str) else " ".join(m) for m in raw_merges)
    return Vocab(tokens=tokens, merges=merges)


def _byte_symbols() -> dict[str, int]:
    """GPT-2's byte-level alphabet: the printable character standing for each byte value.

    Printable Latin-1 bytes stand for themselves; the other 68 byte values are given the
    code points 256, 257, ... in byte order (the scheme GPT-2 introduced and llama.cpp reads).
    """
    printable = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    symbols = {chr(b): b for b in printable}
    extra = 0
    for b in range(256):
        if b not in printable:
            symbols[chr(256 + extra)] = b
            extra += 1
    return symbols


def token_bytes(token: str) -> bytes:
    """The bytes a byte-level BPE token string stands for (e.g. ``"Ġthe"`` -> ``b" the"``)."""
    symbols = _byte_symbols()
    return bytes(symbols[char] for char in token)


def unspeakable_token_ids(tokens: Sequence[str]) -> list[int]:
    """Ids a reply should never contain: control tokens and tokens that are not UTF-8 alone.

    A random-weight model picks lone bytes of multi-byte characters as readily as words.
    llama-cpp-python holds back streamed text while it ends in an incomplete UTF-8 sequence,
    so one such token can stall a stream until the reply ends (measured: a 100-token reply
    arrived in one burst). Banning them keeps streaming token by token.

    Args:
        tokens: Token strings in id order, as stored in the GGUF.

    Returns:
        Sorted token ids.
    """
    banned = list(range(len(SPECIAL_TOKENS)))
    for token_id in range(len(SPECIAL_TOKENS), len(tokens)):
        try:
            token_bytes(tokens[token_id]).decode("utf-8")
        except (UnicodeDecodeError, KeyError):
            banned.append(token_id)
    return banned


def read_token_list(path: Path) -> list[str]:
    """The token strings stored in a GGUF file, in id order.

    Raises:
        ValueError: If the file has no ``tokenizer.ggml.tokens`` array.
    """
    import gguf

    reader = gguf.GGUFReader(path)
    field = reader.fields.get("tokenizer.ggml.tokens")
    if field is None:
        raise ValueError(f"{path} has no tokenizer.ggml.tokens")
    return [bytes(field.parts[index]).decode("utf-8") for index in field.data]


def spec_hash(spec: ModelSpec, corpus: str | None = None) -> str:
    """Hash of everything that shapes the file: spec, corpus, template, generator version.

    Args:
        spec: The model spec.
        corpus: Tokenizer corpus; defaults to :func:`corpus_text`.

    Returns:
        A 12-character hex digest.
    """
    import tokenizers

    corpus = corpus_text() if corpus is None else corpus
    material = {
        "spec": dataclasses.asdict(spec),
        "format": _FORMAT_VERSION,
        "corpus_sha256": hashlib.sha256(corpus.encode()).hexdigest(),
        "template": CHATML_TEMPLATE,
        "tokenizers": tokenizers.__version__,
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:12]


def model_path(spec: ModelSpec, directory: Path | None = None) -> Path:
    """Where ``spec``'s GGUF file lives in the cache (it may not exist yet)."""
    directory = cache_dir() if directory is None else directory
    return directory / f"pipecat-fast-{spec.name}-{spec_hash(spec)}.gguf"


def write_gguf(spec: ModelSpec, path: Path, *, corpus: str | None = None) -> Vocab:
    """Train the vocabulary, draw the weights and write a GGUF file to ``path``.

    Matrices are f16 drawn from N(0, ``spec.init_std``) with ``numpy.random.default_rng(
    spec.seed)`` in a fixed order; norm weights are f32 ones; the output projection is tied
    to the token embedding. The file is written to a temporary name and renamed into place,
    so a reader never sees a half-written model.

    Args:
        spec: The model to write.
        path: Destination file.
        corpus: Tokenizer corpus; defaults to :func:`corpus_text`.

    Returns:
        The vocabulary written.
    """
    import gguf
    import numpy as np

    vocab = train_vocab(corpus_text() if corpus is None else corpus, spec.vocab_size)
    n_vocab, d = len(vocab.tokens), spec.hidden_size
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        writer = gguf.GGUFWriter(tmp, "llama")
        writer.add_name(f"pipecat-fast-{spec.name}")
        writer.add_description("Random weights for engine behaviour tests; replies are gibberish.")
        writer.add_context_length(spec.context_length)
        writer.add_embedding_length(d)
        writer.add_block_count(spec.n_layers)
        writer.add_feed_forward_length(spec.ffn_size)
        writer.add_head_count(spec.n_heads)
        writer.add_head_count_kv(spec.n_heads)
        writer.add_layer_norm_rms_eps(1e-5)
        writer.add_rope_dimension_count(spec.head_dim)
        writer.add_rope_freq_base(10000.0)
        writer.add_vocab_size(n_vocab)
        writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
        writer.add_tokenizer_model("gpt2")
        writer.add_tokenizer_pre("gpt-2")
        writer.add_token_list(list(vocab.tokens))
        writer.add_token_types(
            [
                gguf.TokenType.CONTROL if i < len(SPECIAL_TOKENS) else gguf.TokenType.NORMAL
                for i in range(n_vocab)
            ]
        )
        writer.add_token_merges(list(vocab.merges))
        writer.add_bos_token_id(BOS_TOKEN_ID)
        writer.add_eos_token_id(EOS_TOKEN_ID)
        writer.add_add_bos_token(False)
        writer.add_chat_template(CHATML_TEMPLATE)

        rng = np.random.default_rng(spec.seed)

        def matrix(rows: int, cols: int) -> np.ndarray:
            drawn = rng.standard_normal((rows, cols), dtype=np.float32)
            drawn *= spec.init_std
            return drawn.astype(np.float16)

        ones = np.ones(d, dtype=np.float32)
        # numpy shape is (out, in); GGUF stores the reversed ggml shape.
        writer.add_tensor("token_embd.weight", matrix(n_vocab, d))
        writer.add_tensor("output_norm.weight", ones)
        for layer in range(spec.n_layers):
            block = f"blk.{layer}"
            writer.add_tensor(f"{block}.attn_norm.weight", ones)
            for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
                writer.add_tensor(f"{block}.{name}.weight", matrix(d, d))
            writer.add_tensor(f"{block}.ffn_norm.weight", ones)
            writer.add_tensor(f"{block}.ffn_gate.weight", matrix(spec.ffn_size, d))
            writer.add_tensor(f"{block}.ffn_up.weight", matrix(spec.ffn_size, d))
            writer.add_tensor(f"{block}.ffn_down.weight", matrix(d, spec.ffn_size))
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        tmp.chmod(0o644)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return vocab


def ensure_model(size: str = "small", *, directory: Path | None = None) -> Path:
    """Return the cached GGUF for a named size, generating it first if needed.

    Args:
        size: A key of :data:`MODEL_SPECS` (``"small"`` for tests, ``"bench"`` for benches).
        directory: Cache directory; defaults to :func:`cache_dir`.

    Returns:
        Path of the GGUF file.

    Raises:
        ValueError: If ``size`` is not a known size.
    """
    try:
        spec = MODEL_SPECS[size]
    except KeyError:
        known = ", ".join(sorted(MODEL_SPECS))
        raise ValueError(f"unknown model size {size!r}; known sizes: {known}") from None
    path = model_path(spec, directory)
    if path.is_file():
        return path
    started = time.perf_counter()
    logger.info(f"Generating the {size} test model ({spec.n_params / 1e6:.0f}M params) at {path}")
    write_gguf(spec, path)
    elapsed_s = time.perf_counter() - started
    size_mb = path.stat().st_size / 1e6
    logger.info(f"Wrote {path.name} ({size_mb:.0f} MB) in {elapsed_s:.1f} s")
    return path
