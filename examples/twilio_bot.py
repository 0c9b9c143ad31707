"""A Twilio phone bot with pipecat-fast: ``python examples/twilio_bot.py -t twilio -x PROXY``.

Point your Twilio number's voice webhook at the runner (see Pipecat's development runner); the
call's audio arrives over Twilio Media Streams. Needs ``pip install "pipecat-ai[websocket]"``
and the keys listed in ``bot_common.py``.
"""

from bot_common import run_bot
from pipecat.runner.types import RunnerArguments
from pipecat.runner.utils import create_transport
from pipecat.transports.websocket.fastapi import FastAPIWebsocketParams


async def bot(runner_args: RunnerArguments):
    """Entry point the Pipecat development runner calls for each call."""
    transport = await create_transport(
        runner_args,
        {
            # 8 kHz mu-law in and out; the runner sets Twilio's serializer.
            "twilio": lambda: FastAPIWebsocketParams(audio_in_enabled=True, audio_out_enabled=True)
        },
    )
    call_id = runner_args.call_data.call_id if runner_args.call_data else "twilio-call"
    await run_bot(transport, call_id=call_id, handle_sigint=runner_args.handle_sigint)


if __name__ == "__main__":
    from pipecat.runner.run import main

    main()
