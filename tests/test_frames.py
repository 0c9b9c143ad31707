"""The shared frames: their Pipecat class decides how queues treat them; old paths still work."""

from pipecat.frames.frames import DataFrame, SystemFrame

from pipecat_fast.frames import StableTranscriptFrame, TTFAAnnotationFrame


def test_old_import_paths_give_the_same_classes():
    from pipecat_fast import stabilizer, ttfa
    from pipecat_fast.stabilizer.frames import StableTranscriptFrame as old_stable
    from pipecat_fast.ttfa.observer import TTFAAnnotationFrame as old_note

    assert stabilizer.StableTranscriptFrame is old_stable is StableTranscriptFrame
    assert ttfa.TTFAAnnotationFrame is old_note is TTFAAnnotationFrame


def test_the_stable_frame_is_an_in_order_frame_no_interruption_drops():
    frame = StableTranscriptFrame("book a", 2, 2, 0, False, 0)
    assert isinstance(frame, DataFrame) and not isinstance(frame, SystemFrame)
    assert frame.interruptible is False


def test_the_annotation_is_a_system_frame():
    assert isinstance(TTFAAnnotationFrame(), SystemFrame)
    assert TTFAAnnotationFrame().target == "current"
