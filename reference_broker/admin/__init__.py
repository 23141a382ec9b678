"""Operating the broker: the RabbitMQ-compatible admin HTTP API (plain functions, its aiohttp
server and a client) and the `/management` node over AMQP (requests and its link pair).

Owns: users' requests to inspect and change the model. May touch: the model (queues/),
permissions and resource alarms through their APIs; never the engine directly.
"""
