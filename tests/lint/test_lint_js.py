"""JavaScript/TypeScript mode: template literals, classes, arrow functions, JS clock calls.

Written in our own words in the shapes LiveKit agents-js, OpenAI's realtime agents and
Twilio's samples use (the evaluation corpus has the real ones).
"""

import ast

from hypothesis import given, settings
from hypothesis import strategies as st

from pipecat_fast.lint import Frequency, Position, Severity
from pipecat_fast.lint.js_source import js_to_python, lint_js_source
from pipecat_fast.lint.project import Project

RULES = " ".join(["Keep every answer short and read the details back to the caller."] * 25)


def only(findings, rule):
    hits = [f for f in findings if f.rule == rule]
    assert len(hits) == 1, [(f.rule, f.severity.label, f.message) for f in findings]
    return hits[0]


def test_a_date_in_the_second_sentence_of_agent_instructions():
    code = f"""
export class Receptionist extends voice.Agent {{
  private tz: string;
  constructor(options: {{ timezone: string }}) {{
    const today = new Date().toLocaleDateString('en-US', {{ weekday: 'long' }});
    const instructions =
      `You are the front desk of a dental practice. ` +
      `Today is ${{today}}. ` +
      `{RULES}`;
    super({{ instructions, tools: [] }});
  }}
}}
"""
    f = only(lint_js_source(code), "CB101")
    assert f.frequency is Frequency.DAY and f.severity is Severity.WARNING
    assert f.position is Position.EARLY and f.line == 8  # the JS file's own line


def test_an_arrow_function_template_with_the_date_last_is_fine():
    code = f"""
const BASE = (modality: string, currentDate: string) =>
  `You are a scheduling assistant.\\n${{modality}}\\n{RULES}\\n` +
  `The current date is ${{currentDate}}.`;
class Scheduler extends voice.Agent {{
  constructor() {{
    const now = new Date();
    const currentDate = `${{now.toISOString().slice(0, 10)}}`;
    super({{ instructions: BASE('Voice.', currentDate) }});
  }}
}}
"""
    findings = lint_js_source(code)
    assert all(f.severity < Severity.WARNING for f in findings if f.rule == "CB101")
    assert any(f.rule == "CB101" and f.position is Position.LATE for f in findings)


def test_iso_string_sliced_to_the_day_changes_per_day():
    code = f"""
function build(): string {{
  const day = new Date().toISOString().slice(0, 10);
  const systemPrompt = `Date: ${{day}}. {RULES}`;
  return systemPrompt;
}}
"""
    f = only(lint_js_source(code), "CB101")
    assert f.frequency is Frequency.DAY


def test_per_request_text_early_in_a_classifier_request():
    code = f"""
export async function classify(message: string, companyName = 'Acme') {{
  const messages = [
    {{ role: 'system', content: 'You classify assistant messages.' }},
    {{
      role: 'user',
      content: `Company: ${{companyName}}\\n<message>\\n${{message}}\\n</message>\\n{RULES}`,
    }},
  ];
  return fetch('/api', {{ method: 'POST', body: JSON.stringify({{ input: messages }}) }});
}}
"""
    f = only(lint_js_source(code), "CB105")
    assert f.severity >= Severity.WARNING and "message" in f.message


def test_a_per_call_id_pushed_after_the_static_prompt_is_late():
    code = f"""
class Chat {{
  constructor() {{
    this.context = [{{ role: 'system', content: '{RULES}' }}];
  }}
  setCallSid(callSid) {{
    this.context.push({{ role: 'system', content: `callSid: ${{callSid}}` }});
  }}
}}
"""
    assert [f for f in lint_js_source(code) if f.severity >= Severity.WARNING] == []


def test_constants_imported_from_another_module_are_not_volatile():
    tools = "export const CAPTURE_EXPIRATION_DATE = 'captureExpirationDate';\n"
    code = f"""
import {{ CAPTURE_EXPIRATION_DATE }} from './tools';
const coreFunctions = `Call ${{CAPTURE_EXPIRATION_DATE}} to capture the card's date.`;
export const systemPrompt = `${{coreFunctions}}\\n{RULES}`;
"""
    project = Project({"agent/tools.ts": tools, "agent/prompt.ts": code})
    assert lint_js_source(code, "agent/prompt.ts", project=project) == []
    # Alone, the ALL_CAPS import is still a constant by its name.
    assert [f for f in lint_js_source(code) if f.rule.startswith("CB1")] == []


def test_random_ids_and_the_clock_map_to_their_python_counterparts():
    tree = js_to_python(
        "const a = Date.now(); const b = Math.random(); const c = crypto.randomUUID();\n"
        "const d = new Date().getHours(); const e = [x, y].join('\\n');\n"
    )
    text = ast.unparse(tree)
    assert "_js_time.time()" in text and "_js_random.random()" in text
    assert "_js_uuid.uuid4()" in text and ".hour" in text and "'\\n'.join([x, y])" in text


def test_unreadable_statements_are_skipped_not_fatal():
    code = f"""
type Opts = {{ a: string }};
interface X {{ b: number }}
function build() {{
  const broken = (((;
  const systemPrompt = `It is ${{new Date().toISOString()}}. {RULES}`;
}}
"""
    f = only(lint_js_source(code), "CB101")
    assert f.severity is Severity.ERROR and f.line == 6 and "new Date()" in f.message


@settings(max_examples=80, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab`'\"${}()[]:=;,\n /+*.<>?!#@x1")), max_size=150))
def test_property_any_js_text_lints_without_raising(source):
    for f in lint_js_source(source, provider="openai"):
        assert f.line >= 1 and f.col >= 1
