"""Date/time values that reach the prompt through a name defined elsewhere (issue 16).

An imported constant, an attribute, a helper function (here or in another module of the
tree), formatted with strftime/isoformat: the granularity decides how often the prefix
changes, the finding says so, and severity follows it.
"""

import textwrap

import pytest

from pipecat_fast.lint import Frequency, Position, Severity, lint_python_source
from pipecat_fast.lint.project import Project

BODY = "Keep answers short and read every detail back to the caller. " * 30


def lint(code: str, **kw):
    return lint_python_source(textwrap.dedent(code), **kw)


def clock(findings):
    hits = [f for f in findings if f.rule == "CB101"]
    assert len(hits) == 1, [(f.rule, f.severity.label, f.message) for f in findings]
    return hits[0]


@pytest.mark.parametrize(
    ("fmt", "frequency", "severity", "cost"),
    [
        ("%Y-%m-%d %H:%M:%S", Frequency.REQUEST, Severity.ERROR, None),
        ("%H:%M", Frequency.MINUTE, Severity.ERROR, "1,440 cache misses a day"),
        ("%A %H h", Frequency.HOUR, Severity.WARNING, "24 cache misses a day"),
        ("%A, %B %d", Frequency.DAY, Severity.WARNING, "1 cache miss a day"),
    ],
)
def test_granularity_of_the_format_grades_an_early_clock(fmt, frequency, severity, cost):
    code = f"""
    from datetime import datetime
    def now_text():
        return datetime.now().strftime("{fmt}")
    async def on_user_turn(context):
        context.system_prompt = f"It is {{now_text()}}. {BODY}"
    """
    f = clock(lint(code))
    assert (f.frequency, f.severity, f.position) == (frequency, severity, Position.EARLY)
    assert f"changes {frequency.label}" in f.message
    if cost:
        assert cost in f.message


def test_isoformat_timespec_and_replace_set_the_granularity():
    for expr, freq in (
        ("datetime.now().isoformat(timespec='minutes')", Frequency.MINUTE),
        ("datetime.now().replace(minute=0, second=0, microsecond=0)", Frequency.HOUR),
        ("datetime.now().date().isoformat()", Frequency.DAY),
        ("datetime.now().hour", Frequency.HOUR),
    ):
        code = f"""
        from datetime import datetime
        async def on_user_turn(context):
            context.system_prompt = f"It is {{{expr}}}. {BODY}"
        """
        assert clock(lint(code)).frequency is freq, expr


def test_a_clock_helper_in_another_module_counts_where_it_is_called():
    helpers = """
    from datetime import datetime
    def current_date():
        return datetime.now().strftime("%A, %B %d, %Y")
    """
    bot = f"""
    from utils.clock import current_date
    async def run_bot():
        system_prompt = f"Today is {{current_date()}}. {BODY}"
    """
    project = Project({"utils/clock.py": textwrap.dedent(helpers), "bot.py": textwrap.dedent(bot)})
    f = clock(lint(bot, filename="bot.py", project=project))
    assert f.frequency is Frequency.DAY and f.severity is Severity.WARNING
    assert f.line == 4 and "current_date()" in f.message


def test_an_imported_name_from_outside_the_tree_is_judged_by_its_name():
    code = f"""
    from config import current_time, CAPTURE_EXPIRATION_DATE
    from datetime import datetime
    async def run_bot():
        system_prompt = f"Time: {{current_time}}. {BODY}"
        other_prompt = f"Class: {{datetime}}. Tool {{CAPTURE_EXPIRATION_DATE}}. {BODY}"
    """
    f = clock(lint(code))
    # A stdlib name and an ALL_CAPS constant (a tool name) are never guessed from spelling.
    assert "named like" in f.message and f.line == 5


def test_a_date_computed_at_import_in_another_module_is_fixed_per_process():
    config = "import datetime\nTODAY = datetime.date.today().isoformat()\n"
    bot = f"""
    from config import TODAY
    async def run_bot():
        system_prompt = f"Today is {{TODAY}}. {BODY}"
    """
    project = Project({"config.py": config, "bot.py": textwrap.dedent(bot)})
    f = clock(lint(bot, filename="bot.py", project=project))
    # Computed once when the process starts and shared by every call it serves: the cache
    # holds across calls (the value only goes stale), so it is a note, not a warning.
    assert f.frequency is Frequency.PROCESS and f.severity is Severity.INFO
    assert "computed once at import time" in f.message


def test_a_date_computed_at_import_changes_per_call_where_each_call_has_a_process():
    config = "import datetime\nTODAY = datetime.date.today().isoformat()\n"
    bot = f"""
    from livekit.agents import Agent
    from config import TODAY
    class Receptionist(Agent):
        def __init__(self):
            super().__init__(instructions=f"Today is {{TODAY}}. {BODY}")
    """
    project = Project({"config.py": config, "bot.py": textwrap.dedent(bot)})
    f = clock(lint(bot, filename="bot.py", project=project))
    # LiveKit runs each job in its own process: the import runs again for every call, and
    # a date then changes once a day.
    assert f.frequency is Frequency.DAY and f.severity is Severity.WARNING
    assert "starts a process for each call" in f.message and "1 cache miss a day" in f.message


def test_a_clock_kept_on_an_attribute():
    code = f"""
    from datetime import date
    class Agent:
        def __init__(self):
            self.today = date.today()
            self.instructions = f"Today is {{self.today:%A %d %B}}. {BODY}"
    """
    f = clock(lint(code))
    assert f.frequency is Frequency.DAY and f.severity is Severity.WARNING


def test_a_helper_formatting_its_argument_gets_the_call_site_value():
    code = f"""
    import time
    def stamp(t):
        return time.strftime("%H:%M:%S", time.localtime(t))
    def label(value):
        return "order"
    async def on_user_turn(context):
        context.system_prompt = f"{{label(1)}} at {{stamp(time.time())}}. {BODY}"
    """
    f = clock(lint(code))
    assert f.frequency is Frequency.REQUEST and f.severity is Severity.ERROR


def test_a_clock_after_the_stable_prefix_is_fine():
    code = f"""
    from datetime import datetime
    def now_text():
        return datetime.now().strftime("%H:%M:%S")
    async def on_user_turn(context):
        context.system_prompt = f"{BODY} It is {{now_text()}}."
    """
    f = clock(lint(code))
    assert f.position is Position.LATE and f.severity is Severity.INFO
