"""A browser (WebRTC) bot with pipecat-fast: ``python examples/webrtc_bot.py -t webrtc``.

Open the URL the runner prints and talk. Needs ``pip install "pipecat-ai[webrtc]"`` and the
keys listed in ``bot_common.py``.
"""

from bot_common import run_bot
from pipecat.runner.types import RunnerArguments
from pipecat.runner.utils import create_transport
from pipecat.transports.base_transport import TransportParams


async def bot(runner_args: RunnerArguments):
    """Entry point the Pipecat development runner calls for each session."""
    transport = await create_transport(
        runner_args,
        {"webrtc": lambda: TransportParams(audio_in_enabled=True, audio_out_enabled=True)},
    )
    await run_bot(
        transport,
        call_id=runner_args.session_id or "webrtc-session",
        handle_sigint=runner_args.handle_sigint,
    )


if __name__ == "__main__":
    from pipecat.runner.run import main

    main()
