"""Running the broker: the injected scheduler (asyncio or manual), the asyncio pump and
server, the WebSocket listener, the in-memory broker for tests and the subprocess wrapper.

Owns: sockets, the event loop and time. May touch: protocol/ through its entry points
(`receive_data`, `transport_lost`, timers), the admin server and the config.
"""
