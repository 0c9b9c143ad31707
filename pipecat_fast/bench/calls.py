"""Call scripts for the demo and bench: synthesized caller audio, its timings, the scripted replies.

A call script is one JSON file in ``data/calls/`` (paths inside it are relative to ``data/``)::

    {
      "id": "book_cleaning",                    # must equal the file name's stem
      "description": "A new patient books ...",
      "language": "en",                         # what the caller speaks (BCP-47), for the STT
      "system_prompt": "prompts/dental_receptionist.md",
      "tools": "tools/dental_tools.json",       # OpenAI-format function tools
      "espeak": {"version": "1.51", "voice": "en-us", "rate": 175},   # how the audio was made
      "smart_turn_v3": {"model": "smart-turn-v3.2-cpu.onnx", "window_ms": [170, 450]},
      "turns": [
        {
          "user": {
            "text": "Perfect. Do I need to bring anything?",
            "audio": "audio/book_cleaning_4.wav",   # 16 kHz mono s16 WAV
            "speech_start_ms": 150, "speech_end_ms": 3100,
            "words": [{"text": "Perfect.", "start_ms": 150, "end_ms": 640}, ...],
            "pauses": [                             # optional: deliberate mid-utterance pauses
              {"after_word": 0, "ms": 1500, "start_ms": 690, "end_ms": 2490,
               "smart_turn_v3": {"min": 0.95, "max": 0.98}}
            ],
            "smart_turn_v3": {"min": 0.8, "max": 0.97}   # optional, see Turn.smart_turn_v3
          },
          "assistant": "Happy to help with that. ..."   # what the LLM emulator streams back
        }
      ]
    }

Fields of ``turns[i].user``:

- ``text``: what the caller says; the STT emulator's final transcript.
- ``audio``: the utterance (``scripts/make_audio_fixtures.py`` makes it from ``text``).
- ``speech_start_ms`` / ``speech_end_ms``: first and last voiced audio; the caller's real end of
  speech is ``speech_end_ms``, the zero of the turn's time to first audio.
- ``words``: one entry per whitespace-separated token of ``text`` (punctuation kept), in order,
  inside the speech span.
- ``pauses`` (optional): the caller stops mid-utterance on purpose, as people do while they
  recall a date or a name, and then goes on. ``after_word`` (index into ``words``, never the
  last) and ``ms`` (the silence the generator inserts there) are written by hand; the generator
  measures ``start_ms`` / ``end_ms`` (the end of word ``after_word`` and the start of the next
  one; at least ``ms`` apart) and ``smart_turn_v3``, how sure Smart Turn v3 is that the turn is
  complete when the VAD stops inside the pause. A pause must be longer than the VAD's stop window
  (``MIN_PAUSE_MS``), so the pipeline does see the caller stop. Bot audio that starts inside a
  pause is a *false cut-off*: the bench counts those per configuration, apart from TTFA; such
  turns are the only ones a configuration may talk over.
- ``smart_turn_v3`` (optional): how sure Smart Turn v3 is that the turn is complete at its real
  end: the lowest and highest P(complete) at every 20 ms chunk boundary where the VAD stop can
  fall (the call's ``smart_turn_v3.window_ms`` after the last voiced audio; see
  :mod:`pipecat_fast.bench.smart_turn`).

All times are integer ms from the start of the turn's WAV file; the timings come from
``scripts/make_audio_fixtures.py``, which also made the audio (espeak-ng). Fields this loader
does not know are ignored, so a lever may add its own scripted events to a turn (a barge-in, an
idle gap) and read them from :attr:`Turn.raw`; document them here when you do.

The large-prompt variant of ``prompts/X.md`` is ``prompts/X.md`` followed by the appendix rendered
from ``prompts/X_knowledge.json`` (see :mod:`pipecat_fast.bench.knowledge`): the same static
prefix, ~30,000 o200k tokens in all.

Every problem with a call script, its prompt, its tools or its audio raises
:class:`CallScriptError`, which names the file and the field.
"""

from __future__ import annotations

import json
import wave
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipecat_fast.bench.knowledge import render_knowledge
from pipecat_fast.textnorm import normalize

if TYPE_CHECKING:
    from pipecat.adapters.llm.schemas.tools_schema import ToolsSchema

DATA_DIR = Path(__file__).resolve().parent / "data"
"""The shipped call material (package data)."""

SAMPLE_RATE = 16_000
"""Sample rate of every call audio file, Hz (mono, signed 16-bit little-endian PCM)."""

MIN_PAUSE_MS = 400
"""Shortest deliberate pause: twice the VAD's stop window (Silero ``stop_secs`` 0.2 s), so the
pipeline sees the caller stop and its end-of-turn model is asked."""


class CallScriptError(ValueError):
    """A call script, prompt, tool list or audio file is missing or malformed.

    Attributes:
        path: The file at fault.
        field: The field at fault, e.g. ``"turns[1].user.speech_end_ms"`` or ``"sample_rate"``.
    """

    def __init__(self, path: Path | str, field: str, message: str) -> None:
        self.path = Path(path)
        self.field = field
        super().__init__(f"{self.path}: {field}: {message}")


@dataclass(frozen=True)
class Word:
    """One token of the user's utterance and where it is spoken, in ms from the file start."""

    text: str
    start_ms: int
    end_ms: int


@dataclass(frozen=True)
class SmartTurnVerdict:
    """Smart Turn v3's P(complete) over the window where a VAD stop can fall.

    Attributes:
        min: The lowest probability at any chunk boundary in the window.
        max: The highest.
    """

    min: float
    max: float


@dataclass(frozen=True)
class Pause:
    """A deliberate pause inside an utterance (the caller stops, then goes on).

    Attributes:
        after_word: Index of the word the pause follows (never the last word).
        ms: The silence the generator inserted (ms).
        start_ms: End of word ``after_word`` (ms from the file start).
        end_ms: Start of the next word (ms from the file start).
        smart_turn_v3: Smart Turn v3's verdict when the VAD stops in the pause, as the generator
            measured it; above 0.5 the stock pipeline answers the half utterance. ``None`` if
            not recorded.
    """

    after_word: int
    ms: int
    start_ms: int
    end_ms: int
    smart_turn_v3: SmartTurnVerdict | None = None


@dataclass(frozen=True)
class Turn:
    """One user utterance and the assistant's scripted reply to it.

    Attributes:
        index: 0-based position in the call.
        user_text: What the caller says (the final transcript the STT emulator emits).
        audio_path: Absolute path of the 16 kHz mono s16 WAV of the utterance.
        audio_duration_ms: Length of that file, ms.
        speech_start_ms: First voiced audio, ms from the file start.
        speech_end_ms: End of the last voiced audio, ms from the file start (the moment the
            caller actually stopped speaking).
        words: The tokens of ``user_text`` with their timings, in order.
        reply: The assistant reply the LLM emulator streams for this turn.
        smart_turn_v3: How sure Pipecat's default end-of-turn model (Smart Turn v3,
            ``smart-turn-v3.2-cpu.onnx``) is that the turn is complete at its real end, at every
            chunk boundary where the VAD stop can fall (measured by
            ``scripts/make_audio_fixtures.py``); below 0.5 the stock pipeline waits up to 3 s of
            silence before answering. ``None`` if the script does not record it.
        pauses: Deliberate mid-utterance pauses, in order (usually none).
        raw: The turn's ``user`` object as written, for fields this loader does not know.
    """

    index: int
    user_text: str
    audio_path: Path
    audio_duration_ms: int
    speech_start_ms: int
    speech_end_ms: int
    words: tuple[Word, ...]
    reply: str
    smart_turn_v3: SmartTurnVerdict | None = None
    pauses: tuple[Pause, ...] = ()
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def deliberate_pause(self) -> bool:
        """Whether the caller pauses mid-utterance on purpose (see :class:`Pause`)."""
        return bool(self.pauses)


@dataclass(frozen=True)
class EspeakInfo:
    """How the call's audio was synthesized (``espeak-ng -v voice -s rate``)."""

    version: str
    voice: str
    rate: int


@dataclass(frozen=True)
class CallScript:
    """One scripted call: who calls, what they say, what the agent answers.

    Attributes:
        id: The call id (the script's file stem).
        description: One line saying what happens in the call.
        language: The language the caller speaks (BCP-47, e.g. ``"en"``, ``"es"``).
        system_prompt: The system prompt text (the large variant if asked for).
        system_prompt_path: The prompt's ``.md`` file.
        tools: OpenAI-format function tools (``{"type": "function", "function": {...}}``).
        espeak: How the audio was made.
        turns: The turns, in order.
        path: The call script file.
    """

    id: str
    description: str
    language: str
    system_prompt: str
    system_prompt_path: Path
    tools: list[dict[str, Any]]
    espeak: EspeakInfo
    turns: tuple[Turn, ...]
    path: Path


def call_ids(data_dir: Path | str | None = None) -> list[str]:
    """Ids of the call scripts in ``data_dir/calls`` (default: the shipped ones), sorted."""
    return sorted(p.stem for p in (Path(data_dir or DATA_DIR) / "calls").glob("*.json"))


def load_calls(
    ids: list[str] | None = None,
    data_dir: Path | str | None = None,
    *,
    large_prompt: bool = False,
) -> list[CallScript]:
    """Load call scripts by id, in the order given (default: all, sorted by id).

    Args:
        ids: Call ids (file stems in ``data_dir/calls``); ``None`` loads every call.
        data_dir: The data directory (default: the shipped :data:`DATA_DIR`).
        large_prompt: Use the ~30k-token variant of each call's system prompt.

    Raises:
        CallScriptError: If an id has no script or anything in a script is malformed.
    """
    root = Path(data_dir or DATA_DIR)
    if ids is None:
        ids = call_ids(root)
    calls = []
    for call_id in ids:
        path = root / "calls" / f"{call_id}.json"
        if not path.is_file():
            known = ", ".join(call_ids(root)) or "none"
            raise CallScriptError(path, "id", f"no call script {call_id!r} (known: {known})")
        calls.append(load_call(path, data_dir=root, large_prompt=large_prompt))
    return calls


def load_call(
    path: Path | str, *, data_dir: Path | str | None = None, large_prompt: bool = False
) -> CallScript:
    """Load and check one call script (see the module docstring for its shape).

    Checks every field's presence and type, that each audio file is a 16 kHz mono s16 WAV, and
    that the timings fit it: ``0 <= speech_start_ms < speech_end_ms <= duration``, words in order,
    inside the speech span, and spelling out ``user.text``.

    Args:
        path: The call script (``.json``).
        data_dir: Where the script's relative paths start (default: the script's grandparent,
            i.e. ``data/`` for ``data/calls/x.json``).
        large_prompt: Use the ~30k-token variant of the system prompt.

    Raises:
        CallScriptError: Naming the file and field at fault.
    """
    path = Path(path)
    root = Path(data_dir) if data_dir is not None else path.resolve().parent.parent
    obj = _read_json(path)
    if not isinstance(obj, dict):
        raise CallScriptError(path, "(top level)", "must be a JSON object")
    get = _Getter(path)
    call_id = get.text(obj, "id")
    if call_id != path.stem:
        raise CallScriptError(path, "id", f"{call_id!r} must equal the file name {path.stem!r}")
    prompt_path = _resolve(path, root, "system_prompt", get.text(obj, "system_prompt"))
    tools_path = _resolve(path, root, "tools", get.text(obj, "tools"))
    esp = get.mapping(obj, "espeak")
    espeak = EspeakInfo(
        get.text(esp, "version", "espeak."),
        get.text(esp, "voice", "espeak."),
        get.integer(esp, "rate", "espeak."),
    )
    raw_turns = get.items(obj, "turns")
    turns = tuple(_turn(get, root, i, t) for i, t in enumerate(raw_turns))
    return CallScript(
        id=call_id,
        description=get.text(obj, "description"),
        language=get.text(obj, "language"),
        system_prompt=load_system_prompt(prompt_path, large=large_prompt),
        system_prompt_path=prompt_path,
        tools=load_tools(tools_path),
        espeak=espeak,
        turns=turns,
        path=path,
    )


def load_system_prompt(path: Path | str, *, large: bool = False) -> str:
    """Read a system prompt; ``large=True`` appends the rendered ``<stem>_knowledge.json``.

    Raises:
        CallScriptError: If the prompt or its knowledge file is missing or malformed.
    """
    path = Path(path)
    base = _read_text(path, "system_prompt")
    if not large:
        return base
    knowledge = path.with_name(f"{path.stem}_knowledge.json")
    if not knowledge.is_file():
        raise CallScriptError(knowledge, "file", f"not found (needed for the large {path.name})")
    return base.rstrip("\n") + "\n\n" + _render_cached(knowledge, knowledge.stat().st_mtime_ns)


def load_tools(path: Path | str) -> list[dict[str, Any]]:
    """Read an OpenAI-format tool list: ``[{"type": "function", "function": {"name", ...}}]``.

    Raises:
        CallScriptError: If the file is missing, not JSON, or a tool lacks its name or parameters.
    """
    path = Path(path)
    tools = _read_json(path)
    if not isinstance(tools, list) or not tools:
        raise CallScriptError(path, "(top level)", "must be a non-empty JSON list of tools")
    get = _Getter(path)
    for i, tool in enumerate(tools):
        where = f"[{i}]."
        if not isinstance(tool, dict) or tool.get("type") != "function":
            raise CallScriptError(path, f"[{i}].type", "must be an object of type 'function'")
        fn = get.mapping(tool, "function", where)
        get.text(fn, "name", f"{where}function.")
        get.text(fn, "description", f"{where}function.")
        get.mapping(fn, "parameters", f"{where}function.")
    return tools


def tools_schema(tools: Iterable[dict[str, Any]]) -> ToolsSchema:
    """Convert OpenAI-format tools to Pipecat's ``ToolsSchema`` (for ``LLMContext(tools=...)``)."""
    from pipecat.adapters.llm.schemas.function_schema import FunctionSchema
    from pipecat.adapters.llm.schemas.tools_schema import ToolsSchema

    schemas = []
    for tool in tools:
        fn = tool["function"]
        params = fn.get("parameters", {})
        schemas.append(
            FunctionSchema(
                name=fn["name"],
                description=fn.get("description", ""),
                properties=params.get("properties", {}),
                required=params.get("required", []),
            )
        )
    return ToolsSchema(standard_tools=schemas)


def read_pcm(path: Path | str) -> tuple[bytes, int]:
    """Read a call audio file's PCM.

    Returns:
        ``(pcm, sample_rate)``: signed 16-bit little-endian mono samples and 16000.

    Raises:
        CallScriptError: If the file is missing, not a PCM WAV, or not 16 kHz mono 16-bit
            (field ``format``, ``sample_rate``, ``channels`` or ``sample_width``).
    """
    path = Path(path)
    try:
        with wave.open(str(path), "rb") as w:
            _check_wav(path, w)
            return w.readframes(w.getnframes()), w.getframerate()
    except FileNotFoundError:
        raise CallScriptError(path, "file", "not found") from None
    except (wave.Error, EOFError) as e:
        raise CallScriptError(path, "format", f"not a PCM WAV file ({e})") from None


def normalize_user_text(text: str) -> str:
    """The key :func:`reply_table` uses: :func:`pipecat_fast.textnorm.normalize`.

    The LLM emulator looks replies up with the same function, so a collision this table
    rejects is exactly one the emulator would have made.
    """
    return normalize(text)


def reply_table(calls: Iterable[CallScript]) -> dict[str, str]:
    """Map each normalized user text (:func:`normalize_user_text`) to its scripted reply.

    The LLM emulator looks up the reply by the last user message it receives.

    Raises:
        CallScriptError: If one user text has two different replies across the calls.
    """
    table: dict[str, str] = {}
    where: dict[str, str] = {}
    for call in calls:
        for turn in call.turns:
            key = normalize_user_text(turn.user_text)
            field = f"turns[{turn.index}].user.text"
            if key in table and table[key] != turn.reply:
                raise CallScriptError(
                    call.path, field, f"same text as {where[key]} but a different reply"
                )
            table[key] = turn.reply
            where[key] = f"{call.path.name} {field}"
    return table


# --- internals ---------------------------------------------------------------------------------


class _Getter:
    """Typed field access that raises CallScriptError naming the file and field path."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _get(self, obj: dict, key: str, prefix: str, kind: type | tuple, what: str) -> Any:
        if key not in obj:
            raise CallScriptError(self.path, prefix + key, "missing")
        value = obj[key]
        if not isinstance(value, kind) or isinstance(value, bool):
            raise CallScriptError(self.path, prefix + key, f"must be {what}, got {value!r:.60}")
        return value

    def text(self, obj: dict, key: str, prefix: str = "") -> str:
        value = self._get(obj, key, prefix, str, "a string")
        if not value.strip():
            raise CallScriptError(self.path, prefix + key, "must not be empty")
        return value

    def integer(self, obj: dict, key: str, prefix: str = "") -> int:
        return self._get(obj, key, prefix, int, "an integer")

    def mapping(self, obj: dict, key: str, prefix: str = "") -> dict:
        return self._get(obj, key, prefix, dict, "an object")

    def items(self, obj: dict, key: str, prefix: str = "") -> list:
        value = self._get(obj, key, prefix, list, "a list")
        if not value:
            raise CallScriptError(self.path, prefix + key, "must not be empty")
        return value


def _turn(get: _Getter, root: Path, i: int, raw: Any) -> Turn:
    pre = f"turns[{i}]."
    if not isinstance(raw, dict):
        raise CallScriptError(get.path, f"turns[{i}]", "must be an object")
    user = get.mapping(raw, "user", pre)
    upre = pre + "user."
    text = get.text(user, "text", upre)
    audio = _resolve(get.path, root, upre + "audio", get.text(user, "audio", upre))
    try:
        duration_ms = _wav_duration_ms(audio)
    except CallScriptError as e:
        raise CallScriptError(get.path, upre + "audio", str(e)) from None
    start = get.integer(user, "speech_start_ms", upre)
    end = get.integer(user, "speech_end_ms", upre)
    if not 0 <= start < end <= duration_ms:
        raise CallScriptError(
            get.path,
            upre + "speech_end_ms",
            f"speech span {start}..{end} ms must satisfy 0 <= start < end <= {duration_ms} "
            f"(the length of {audio.name})",
        )
    words = []
    prev_end = start
    for j, rw in enumerate(get.items(user, "words", upre)):
        wpre = f"{upre}words[{j}]"
        if not isinstance(rw, dict):
            raise CallScriptError(get.path, wpre, "must be an object")
        word = Word(
            get.text(rw, "text", wpre + "."),
            get.integer(rw, "start_ms", wpre + "."),
            get.integer(rw, "end_ms", wpre + "."),
        )
        if not prev_end <= word.start_ms <= word.end_ms <= end:
            raise CallScriptError(
                get.path,
                wpre,
                f"{word.text!r} at {word.start_ms}..{word.end_ms} ms must start after the "
                f"previous word ({prev_end} ms) and end inside the speech span ({start}..{end} ms)",
            )
        words.append(word)
        prev_end = word.end_ms
    if [w.text for w in words] != text.split():
        raise CallScriptError(get.path, upre + "words", f"do not spell out the text {text!r}")
    pauses = _pauses(get, user, upre, words)
    return Turn(
        index=i,
        user_text=text,
        audio_path=audio,
        audio_duration_ms=duration_ms,
        speech_start_ms=start,
        speech_end_ms=end,
        words=tuple(words),
        reply=get.text(raw, "assistant", pre),
        smart_turn_v3=_smart_turn(get, user, upre),
        pauses=pauses,
        raw=user,
    )


def _pauses(get: _Getter, user: dict, upre: str, words: list[Word]) -> tuple[Pause, ...]:
    if "pauses" not in user:
        return ()
    out: list[Pause] = []
    for j, raw in enumerate(get.items(user, "pauses", upre)):
        ppre = f"{upre}pauses[{j}]"
        if not isinstance(raw, dict):
            raise CallScriptError(get.path, ppre, "must be an object")
        after = get.integer(raw, "after_word", ppre + ".")
        if not 0 <= after < len(words) - 1:
            raise CallScriptError(
                get.path,
                ppre + ".after_word",
                f"must index a word before the last one (0..{len(words) - 2}), got {after}",
            )
        if out and after <= out[-1].after_word:
            raise CallScriptError(get.path, ppre + ".after_word", "pauses must be in word order")
        ms = get.integer(raw, "ms", ppre + ".")
        if ms < MIN_PAUSE_MS:
            raise CallScriptError(
                get.path,
                ppre + ".ms",
                f"{ms} ms is too short to be a pause the pipeline sees (at least {MIN_PAUSE_MS})",
            )
        start = get.integer(raw, "start_ms", ppre + ".")
        end = get.integer(raw, "end_ms", ppre + ".")
        if start != words[after].end_ms or end != words[after + 1].start_ms:
            raise CallScriptError(
                get.path,
                ppre + ".start_ms",
                f"{start}..{end} ms must run from the end of {words[after].text!r} "
                f"({words[after].end_ms} ms) to the start of {words[after + 1].text!r} "
                f"({words[after + 1].start_ms} ms); regenerate with scripts/make_audio_fixtures.py",
            )
        if end - start < ms:
            raise CallScriptError(
                get.path, ppre + ".end_ms", f"the pause is {end - start} ms, shorter than ms={ms}"
            )
        out.append(Pause(after, ms, start, end, _smart_turn(get, raw, ppre + ".")))
    return tuple(out)


def _smart_turn(get: _Getter, user: dict, upre: str) -> SmartTurnVerdict | None:
    if "smart_turn_v3" not in user:
        return None
    verdict = get.mapping(user, "smart_turn_v3", upre)
    values = []
    for key in ("min", "max"):
        field = f"{upre}smart_turn_v3.{key}"
        p = verdict.get(key)
        if isinstance(p, bool) or not isinstance(p, int | float) or not 0.0 <= p <= 1.0:
            raise CallScriptError(get.path, field, f"must be a number in 0..1, got {p!r:.60}")
        values.append(float(p))
    if values[0] > values[1]:
        raise CallScriptError(get.path, f"{upre}smart_turn_v3.min", "must not exceed max")
    return SmartTurnVerdict(*values)


def _wav_duration_ms(path: Path) -> int:
    try:
        with wave.open(str(path), "rb") as w:
            _check_wav(path, w)
            return w.getnframes() * 1000 // w.getframerate()
    except (wave.Error, EOFError) as e:
        raise CallScriptError(path, "format", f"not a PCM WAV file ({e})") from None


def _check_wav(path: Path, w: wave.Wave_read) -> None:
    if w.getnchannels() != 1:
        raise CallScriptError(path, "channels", f"{w.getnchannels()} channels, expected 1 (mono)")
    if w.getsampwidth() != 2:
        raise CallScriptError(
            path, "sample_width", f"{8 * w.getsampwidth()}-bit samples, expected 16-bit"
        )
    if w.getframerate() != SAMPLE_RATE:
        raise CallScriptError(
            path, "sample_rate", f"{w.getframerate()} Hz, expected {SAMPLE_RATE} Hz"
        )


def _resolve(path: Path, root: Path, field: str, rel: str) -> Path:
    target = (root / rel).resolve()
    if not target.is_file():
        raise CallScriptError(path, field, f"file not found: {target}")
    return target


def _read_text(path: Path, field: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CallScriptError(path, "file", "not found") from None
    except (OSError, UnicodeDecodeError) as e:
        raise CallScriptError(path, field, f"cannot read: {e}") from None


def _read_json(path: Path) -> Any:
    text = _read_text(path, "file")
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise CallScriptError(path, "json", f"line {e.lineno} column {e.colno}: {e.msg}") from None


@lru_cache(maxsize=8)
def _render_cached(path: Path, mtime_ns: int) -> str:
    data = _read_json(path)
    try:
        return render_knowledge(data)
    except (KeyError, TypeError, ValueError, IndexError) as e:
        raise CallScriptError(path, str(e), "missing or malformed knowledge field") from None
