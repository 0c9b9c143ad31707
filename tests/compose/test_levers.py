"""Levers: the plain value that says which levers a call runs."""

import pytest

from pipecat_fast.compose import TELEPHONY_PLAYOUT_DELAY_S, WEBRTC_PLAYOUT_DELAY_S, Levers

OPT_IN = {"endofturn", "preemptive"}


def test_all_is_every_lever_but_the_opt_in_ones_and_stock_is_none():
    assert set(Levers.all().on()) == set(Levers.names()) - OPT_IN
    assert Levers.parse("all") == Levers.all() == Levers()
    assert Levers.stock().on() == ()
    assert Levers.all().describe() == "all" and Levers.stock().describe() == "stock"


def test_the_end_of_turn_levers_join_all_on_request():
    levers = Levers.parse("all,endofturn,preemptive")
    assert levers.on() == Levers.names()
    assert levers.describe() == ", ".join(Levers.names())


def test_names_are_the_switches_in_the_order_frames_meet_them():
    names = Levers.names()
    assert "playout_delay_s" not in names
    assert names.index("stabilizer") < names.index("prefill") < names.index("aggregator")
    assert names.index("aggregator") < names.index("bargein")


def test_parse_all_with_a_removal_and_dashes_for_underscores():
    levers = Levers.parse("all,-draft-and-hold")
    assert not levers.draft_and_hold
    assert set(levers.on()) == set(Levers.names()) - OPT_IN - {"draft_and_hold"}


def test_parse_takes_plus_and_spaces_as_separators_as_a_url_query_sends_them():
    expected = Levers.parse("all,-bargein,endofturn")
    assert Levers.parse("all+-bargein+endofturn") == expected
    assert Levers.parse("all -bargein  endofturn") == expected


def test_parse_a_list_turns_on_only_what_it_names():
    assert Levers.parse("stabilizer, prefill").on() == ("stabilizer", "prefill")
    assert Levers.parse("stock,aggregator").on() == ("aggregator",)


def test_parse_unknown_lever_names_the_known_ones():
    with pytest.raises(ValueError, match="unknown lever 'turbo'.*stabilizer"):
        Levers.parse("all,turbo")
    with pytest.raises(ValueError, match="empty"):
        Levers.parse(" , ")


def test_prefill_without_the_stabiliser_is_refused_with_the_reason():
    with pytest.raises(ValueError, match="prefill needs the stabiliser"):
        Levers.parse("prefill")
    with pytest.raises(ValueError, match="prefill needs the stabiliser"):
        Levers.all(stabilizer=False)


def test_endofturn_and_preemptive_need_draft_and_hold():
    for lever in ("endofturn", "preemptive"):
        with pytest.raises(ValueError, match=f"{lever} needs draft-and-hold"):
            Levers.parse(f"stabilizer,{lever}")
    assert Levers.parse("all,-draft_and_hold,-endofturn,-preemptive").on()


def test_patience_is_a_setting_carried_by_parse_not_a_switch():
    levers = Levers.parse("all", patience="snappy")
    assert levers.patience == "snappy" and "patience" not in Levers.names()
    assert levers.settings() == {"playout_delay_s": WEBRTC_PLAYOUT_DELAY_S, "patience": "snappy"}
    with pytest.raises(ValueError, match="patience"):
        Levers(patience="")


def test_playout_delay_is_checked_and_carried_by_parse():
    assert Levers.parse("all", playout_delay_s=TELEPHONY_PLAYOUT_DELAY_S).playout_delay_s == 0.15
    assert Levers.all().playout_delay_s == WEBRTC_PLAYOUT_DELAY_S
    assert Levers.stock().with_playout_delay(0.2).playout_delay_s == 0.2
    for bad in (-0.1, True, "0.1", float("nan")):
        with pytest.raises(ValueError, match="playout_delay_s"):
            Levers(playout_delay_s=bad)


def test_describe_lists_the_levers_on_when_not_all():
    assert Levers.parse("stabilizer,prefill").describe() == "stabilizer, prefill"
