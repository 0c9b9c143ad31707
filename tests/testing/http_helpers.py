"""Helpers shared by the emulator tests."""

import aiohttp


async def post_raw(url, data):
    """POST raw bytes as JSON; returns ``(status, parsed JSON body)`` (5 s timeout)."""
    timeout = aiohttp.ClientTimeout(total=5)
    async with aiohttp.ClientSession(timeout=timeout) as http:
        headers = {"Content-Type": "application/json"}
        async with http.post(url, data=data, headers=headers) as r:
            return r.status, await r.json()
