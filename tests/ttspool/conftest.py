import pytest
from loguru import logger


@pytest.fixture
def caplog_loguru():
    """Messages logged through loguru during the test."""
    messages = []
    handler_id = logger.add(lambda m: messages.append(m.record["message"]), level="DEBUG")
    yield messages
    logger.remove(handler_id)
