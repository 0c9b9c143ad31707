"""Fields of one record read one after another are one block of per-caller data.

Issue 16, session of 2026-12-02: small examples of our own; each quiet case has the case
that must stay loud beside it.
"""

import textwrap

from pipecat_fast.lint.python_source import _record_of
from tests.lint.snippets import BODY, flagged, lint


def _module(code: str) -> str:
    return textwrap.dedent(code).replace("BODY_TEXT", BODY)


STUDENT_TAIL = """
def context(student):
    prompt = "BODY_TEXT" + f\"\"\"

Student: {student.name}, grade {student.grade}, goals: {student.goals}.
Keep it simple.\"\"\"
    return [{"role": "system", "content": prompt}]
"""


def test_a_record_s_fields_at_the_tail_are_late_together():
    # The name is followed only by the record's other fields and four words: nothing
    # static is at stake (the goals are the student's own, not instructions).
    assert not flagged(lint(_module(STUDENT_TAIL)))


def test_the_same_record_ahead_of_the_instructions_stays_early():
    head = STUDENT_TAIL.replace('"BODY_TEXT" + f', "f").replace(
        "Keep it simple.", "Keep it simple.\nBODY_TEXT"
    )
    found = flagged(lint(_module(head)), "CB103")
    assert found and all(f.position.value == "early" for f in found)


def test_another_unknown_value_after_the_record_still_leaves_the_position_open():
    # `{rules}` is not one of the student's fields: it may be the whole instructions, so the
    # name before it keeps the middle default.
    other = STUDENT_TAIL.replace("goals: {student.goals}.", "goals: {student.goals}. {rules}")
    other = other.replace("def context(student):", "def context(student, rules):")
    assert flagged(lint(_module(other)), "CB103")


def test_the_record_a_field_is_read_from():
    import ast

    def rec(src):
        return _record_of(ast.parse(src, mode="eval").body)

    assert rec("student.name") == "student"
    assert rec('user["id"]') == "user"
    assert rec('profile.get("goals")') == "profile"
    assert rec("self.caller.phone") == "self.caller"
    assert rec("self.name") is None  # an object's own attributes: often its configuration
    assert rec("name") is None


def test_fields_of_one_record_far_apart_are_not_one_block():
    # The name sits mid-prompt; the goals come after all the other instructions: the
    # name's cost is everything between them, as for any value.
    apart = STUDENT_TAIL.replace(
        "Student: {student.name}, grade {student.grade}, goals: {student.goals}.",
        "Student: {student.name}.\nBODY_TEXT\nBODY_TEXT\nGoals: {student.goals}.",
    )
    assert flagged(lint(_module(apart)), "CB103")
