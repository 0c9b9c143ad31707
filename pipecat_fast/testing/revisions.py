"""Real ASR revision structure: fitted from pocketsphinx partials, replayed onto scripts.

The STT emulator's default interims only ever grow word by word, which no real engine does:
real engines revise their last words as more audio arrives. This module fits a small model of
that behaviour from the 14 real partial sequences in
``../shared/data/stt/pocketsphinx_partials.jsonl`` (pocketsphinx 5.1.1 on LibriVox, CMU test
clips and espeak-ng speech, 100 ms chunks) and generates revising interim sequences for a
:class:`~pipecat_fast.testing.deepgram_server.ScriptedUtterance`, deterministic per utterance.

The fitted parameters ship as ``pipecat_fast/testing/data/asr_revisions.json`` so the bench
works without the shared data; :func:`refit` rebuilds them from the jsonl when it is present.

Words are compared after :func:`pipecat_fast.textnorm.normalize_words`. A *revision* is an
update whose words are not an extension of the previous update's words; this counts a
growing in-progress word (``"te"`` -> ``"ten"``) as a revision, so it finds more revisions
than the jsonl's own ``n_non_prefix_revisions`` field, which compares characters.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from statistics import median

from pipecat_fast.prefix import common_prefix_len
from pipecat_fast.testing.deepgram_server import ScriptedUtterance
from pipecat_fast.testing.shared_data import shared_data_dir
from pipecat_fast.textnorm import normalize_words

SHIPPED_MODEL_PATH = Path(__file__).parent / "data" / "asr_revisions.json"
# ../shared/data beside the project root (absent in an installed wheel).
DEFAULT_PARTIALS_PATH = shared_data_dir() / "stt" / "pocketsphinx_partials.jsonl"
WRONG_WORDS_KEPT = 40


@dataclass(frozen=True)
class PartialSequence:
    """One real utterance's interim hypotheses.

    Parameters:
        name: Where the audio came from (the jsonl's ``audio`` field).
        partials: ``(s of audio, text)`` for each distinct non-empty partial, in order.
        final: The engine's final result after the end of the utterance.
        reference: What was actually said, when known.
        chunk_s: Audio fed per engine call (s).
    """

    name: str
    partials: tuple[tuple[float, str], ...]
    final: str
    reference: str | None = None
    chunk_s: float = 0.1


def load_partial_sequences(path: str | Path = DEFAULT_PARTIALS_PATH) -> list[PartialSequence]:
    """Read the partial sequences jsonl (``../shared/data/stt/pocketsphinx_partials.jsonl``).

    Empty partials are dropped (an STT sends none).

    Raises:
        FileNotFoundError: If the file is absent.
        ValueError: If a line is not a JSON object with ``partials`` and
            ``final_after_end_utt`` (the message names the line).
    """
    sequences = []
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            partials = tuple(
                (float(p["t_audio_s"]), str(p["partial"]))
                for p in row["partials"]
                if str(p["partial"]).strip()
            )
            sequences.append(
                PartialSequence(
                    name=str(row.get("audio", f"line {n}")),
                    partials=partials,
                    final=str(row["final_after_end_utt"]),
                    reference=row.get("reference_text"),
                    chunk_s=float(row.get("chunk_ms", 100)) / 1000.0,
                )
            )
        except (ValueError, KeyError, TypeError) as e:
            raise ValueError(f"{path}:{n}: not a partial sequence: {e}") from e
    return sequences


@dataclass(frozen=True)
class RevisionModel:
    """How a real engine revises its interims (counts fitted from real partial sequences).

    Parameters:
        source: Where the counts come from.
        sequences: Sequences fitted.
        updates: Updates seen (a partial following another).
        revisions: Updates that revised earlier words.
        touched: Histogram, words of the previous partial a revision replaced -> count.
        persistence: Histogram, updates the first replaced word had been shown -> count.
        shrinks: Revisions after which the partial had fewer words.
        truncations: Revisions whose replaced last word was the start of a word after it
            (an in-progress word).
        wrong_words: The words most often replaced, with counts (the vocabulary of errors).
        interval_s_median: Median time between distinct partials (s).
        lateness_s_median: Median time from a replaced word's appearance to its
            replacement (s).
    """

    source: str
    sequences: int
    updates: int
    revisions: int
    touched: dict[int, int]
    persistence: dict[int, int]
    shrinks: int
    truncations: int
    wrong_words: dict[str, int] = field(default_factory=dict)
    interval_s_median: float = 0.0
    lateness_s_median: float = 0.0

    @property
    def revision_rate(self) -> float:
        """Share of updates that revise earlier words."""
        return self.revisions / self.updates if self.updates else 0.0

    @property
    def split_rate(self) -> float:
        """Share of revisions that shrink the partial."""
        return self.shrinks / self.revisions if self.revisions else 0.0

    @property
    def truncation_rate(self) -> float:
        """Share of revisions that replace an in-progress (truncated) word."""
        return self.truncations / self.revisions if self.revisions else 0.0

    def to_dict(self) -> dict:
        """JSON-ready dict (histogram keys become strings)."""
        d = asdict(self)
        d["touched"] = {str(k): v for k, v in sorted(self.touched.items())}
        d["persistence"] = {str(k): v for k, v in sorted(self.persistence.items())}
        d["revision_rate"] = round(self.revision_rate, 4)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> RevisionModel:
        """Inverse of :meth:`to_dict`.

        Raises:
            ValueError: If a field is missing or malformed.
        """
        try:
            return cls(
                source=str(d["source"]),
                sequences=int(d["sequences"]),
                updates=int(d["updates"]),
                revisions=int(d["revisions"]),
                touched={int(k): int(v) for k, v in d["touched"].items()},
                persistence={int(k): int(v) for k, v in d["persistence"].items()},
                shrinks=int(d["shrinks"]),
                truncations=int(d["truncations"]),
                wrong_words={str(k): int(v) for k, v in d.get("wrong_words", {}).items()},
                interval_s_median=float(d.get("interval_s_median", 0.0)),
                lateness_s_median=float(d.get("lateness_s_median", 0.0)),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise ValueError(f"malformed revision model: {e!r}") from e


def fit_revision_model(
    sequences: Iterable[Sequence[tuple[float, str]]], *, source: str = ""
) -> RevisionModel:
    """Count how a sequence of partials revises itself.

    Empty partials and repeats of the previous one (after normalisation) are not updates.

    Args:
        sequences: Each a list of ``(s, text)`` partials in order.
        source: Provenance recorded in the model.
    """
    touched: Counter[int] = Counter()
    persistence: Counter[int] = Counter()
    wrong: Counter[str] = Counter()
    n_seq = updates = revisions = shrinks = truncations = 0
    gaps: list[float] = []
    lateness: list[float] = []
    for seq in sequences:
        hyps: list[tuple[float, list[str]]] = []
        for t, text in seq:
            words = normalize_words(text)
            if words and (not hyps or hyps[-1][1] != words):  # empty or repeated: no update
                hyps.append((t, words))
        if not hyps:
            continue
        n_seq += 1
        shown = [1] * len(hyps[0][1])  # hypotheses each position's word has been shown in
        born = [hyps[0][0]] * len(hyps[0][1])
        for (t0, a), (t1, b) in zip(hyps, hyps[1:], strict=False):
            updates += 1
            gaps.append(t1 - t0)
            keep = common_prefix_len(a, b)
            if keep < len(a):
                revisions += 1
                touched[len(a) - keep] += 1
                persistence[shown[keep]] += 1
                lateness.append(t1 - born[keep])
                shrinks += len(b) < len(a)
                truncations += any(w != a[-1] and w.startswith(a[-1]) for w in b[keep:])
                wrong.update(a[keep:])
            shown = [shown[j] + 1 if j < keep else 1 for j in range(len(b))]
            born = [born[j] if j < keep else t1 for j in range(len(b))]
    return RevisionModel(
        source=source,
        sequences=n_seq,
        updates=updates,
        revisions=revisions,
        touched=dict(sorted(touched.items())),
        persistence=dict(sorted(persistence.items())),
        shrinks=shrinks,
        truncations=truncations,
        # Ties broken alphabetically so a re-fit gives the same file.
        wrong_words=dict(sorted(wrong.items(), key=lambda kv: (-kv[1], kv[0]))[:WRONG_WORDS_KEPT]),
        interval_s_median=round(median(gaps), 4) if gaps else 0.0,
        lateness_s_median=round(median(lateness), 4) if lateness else 0.0,
    )


SOURCE = (
    "14 real partial sequences, shared/data/stt/pocketsphinx_partials.jsonl: pocketsphinx 5.1.1 "
    "(en-us model, default config, 100 ms chunks) on LibriVox and CMU test speech and espeak-ng "
    "speech"
)


def refit(path: str | Path = DEFAULT_PARTIALS_PATH) -> RevisionModel | None:
    """Fit the model from the shared partial sequences; None when the file is absent."""
    path = Path(path)
    if not path.is_file():
        return None
    sequences = load_partial_sequences(path)
    return fit_revision_model((s.partials for s in sequences), source=SOURCE)


@lru_cache(maxsize=1)
def shipped_model() -> RevisionModel:
    """The fitted model shipped in the package (``testing/data/asr_revisions.json``)."""
    return RevisionModel.from_dict(json.loads(SHIPPED_MODEL_PATH.read_text(encoding="utf-8")))


def write_model(model: RevisionModel, path: str | Path = SHIPPED_MODEL_PATH) -> None:
    """Write a model as JSON (used to refresh the shipped file)."""
    Path(path).write_text(json.dumps(model.to_dict(), indent=1) + "\n", encoding="utf-8")


@dataclass
class _Chunk:
    """Truth words ``start:end`` as shown: right (``ttl`` None) or wrong for ``ttl`` updates."""

    start: int
    end: int
    words: list[str]
    ttl: int | None = None


def _sample(rng: random.Random, histogram: dict[int, int]) -> int:
    values = sorted(histogram)
    return rng.choices(values, weights=[histogram[v] for v in values])[0] if values else 1


def _wrong_word(rng: random.Random, model: RevisionModel, truth: str, in_progress: bool) -> str:
    """A wrong rendering of ``truth``: its start while it is spoken, else an error word."""
    key = "".join(normalize_words(truth))
    if in_progress and len(key) >= 3 and rng.random() < model.truncation_rate:
        return key[: rng.randint(1, len(key) - 1)]
    vocab = [w for w in model.wrong_words if w != key] or ["uh"]
    weights = [model.wrong_words.get(w, 1) for w in vocab]
    return rng.choices(vocab, weights=weights)[0]


def revising_partials(
    utterance: ScriptedUtterance,
    interval_s: float,
    *,
    seed: int = 0,
    model: RevisionModel | None = None,
) -> list[tuple[float, str]]:
    """Revising interim hypotheses for an utterance, ending with its true words.

    Every ``interval_s`` of audio the hypothesis shows the words heard so far (a word is
    heard at its ``end_s``). With the fitted revision rate an update also shows its last
    words wrong: how many from the fitted ``touched`` histogram (a word still being spoken
    counts), for as many updates as the fitted ``persistence`` histogram says, sometimes one
    word more than they replace (fitted shrink rate) or an in-progress word cut short
    (fitted truncation rate), wrong words drawn from the fitted error vocabulary. When a
    wrong word expires, it and everything after it are shown right again.

    Args:
        utterance: The scripted utterance (word timings relative to its onset, s).
        interval_s: Audio time between interims (s), e.g. the profile's
            ``stt_interim_interval_ms / 1000``.
        seed: Mixed with the utterance text, so each utterance gets its own fixed sequence.
        model: The revision model; the shipped one by default.

    Returns:
        ``(s after onset, text)`` pairs, distinct consecutive texts, the last one the true
        words at the end of speech; empty for an utterance with no words.

    Raises:
        ValueError: If ``interval_s`` is not positive.
    """
    if not interval_s > 0:
        raise ValueError(f"interval_s must be positive, got {interval_s!r}")
    model = model or shipped_model()
    words = utterance.words
    if not words:
        return []
    truth = [w.text for w in words]
    rng = random.Random(f"{seed}:{utterance.text}")
    chunks: list[_Chunk] = []
    out: list[tuple[float, str]] = []
    step = 1
    while (t := round(step * interval_s, 6)) < utterance.duration_s:
        step += 1
        heard = sum(1 for w in words if w.end_s <= t)
        speaking = heard < len(words) and words[heard].start_s <= t
        covered = chunks[-1].end if chunks else 0
        # A wrong word lives for a number of *updates*: age it only on a tick that brings
        # an update anyway (new words) or that its expiry makes one.
        due = any(c.ttl == 1 for c in chunks)
        changed = _expire(chunks, truth, heard) if heard > covered or due else False
        covered = chunks[-1].end if chunks else 0
        for i in range(covered, heard):
            chunks.append(_Chunk(i, i + 1, [truth[i]]))
            changed = True
        if changed and rng.random() < model.revision_rate:
            _inject(rng, model, chunks, truth, heard, speaking)
        text = " ".join(w for c in chunks for w in c.words)
        if text and (not out or out[-1][1] != text):
            out.append((t, text))
    final = " ".join(truth)
    if not out or out[-1][1] != final:
        out.append((round(utterance.duration_s, 6), final))
    return out


def _expire(chunks: list[_Chunk], truth: list[str], heard: int) -> bool:
    """Age wrong chunks; from the first expired one on, show the truth heard so far."""
    expired = None
    for i, c in enumerate(chunks):
        if c.ttl is not None:
            c.ttl -= 1
            if c.ttl <= 0 and expired is None:
                expired = i
    if expired is None:
        return False
    start = chunks[expired].start
    del chunks[expired:]
    chunks.extend(_Chunk(i, i + 1, [truth[i]]) for i in range(start, heard))
    return True


def _inject(
    rng: random.Random,
    model: RevisionModel,
    chunks: list[_Chunk],
    truth: list[str],
    heard: int,
    speaking: bool,
) -> None:
    """Show the last few right words (and the word being spoken) wrong for a while."""
    right_tail = 0
    for c in reversed(chunks):
        if c.ttl is not None:
            break
        right_tail += 1
    n = min(_sample(rng, model.touched), right_tail + int(speaking))
    if n < 1:
        return
    end = heard + int(speaking)
    start = end - n
    wrong = [_wrong_word(rng, model, truth[i], i == heard) for i in range(start, end)]
    # A word cut short already shrinks the partial when it expires; split only the others.
    if not speaking and rng.random() < model.split_rate:
        wrong.insert(rng.randrange(len(wrong) + 1), _wrong_word(rng, model, truth[start], False))
    del chunks[len(chunks) - (n - int(speaking)) :]
    chunks.append(_Chunk(start, end, wrong, ttl=_sample(rng, model.persistence)))


def with_revisions(
    utterance: ScriptedUtterance,
    interval_s: float,
    *,
    seed: int = 0,
    model: RevisionModel | None = None,
) -> ScriptedUtterance:
    """The utterance with :func:`revising_partials` as its scripted ``partials``."""
    return replace(
        utterance, partials=tuple(revising_partials(utterance, interval_s, seed=seed, model=model))
    )


__all__ = [
    "DEFAULT_PARTIALS_PATH",
    "SHIPPED_MODEL_PATH",
    "PartialSequence",
    "RevisionModel",
    "fit_revision_model",
    "load_partial_sequences",
    "refit",
    "revising_partials",
    "shipped_model",
    "with_revisions",
    "write_model",
]
