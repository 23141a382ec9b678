"""admin: the adapters through which the suite manages a broker out of band.

Owns: `make_admin(settings, url_override, broker_url)`, the profile's adapter: `base.py` (the
`Admin` interface, `NoAdmin`), `rabbitmq.py` (RabbitMQ's HTTP API and rabbitmqctl),
`management_node.py` (RabbitMQ 4's /management node over AMQP, through a probe). Touches
nothing else.
"""

from __future__ import annotations

from amqpspec.conformance.admin.base import WS_LISTENER, WS_LISTENERS, Admin, NoAdmin
from amqpspec.conformance.admin.management_node import ManagementNodeAdmin
from amqpspec.conformance.admin.rabbitmq import RabbitMqCtl, RabbitMqCtlAdmin, RabbitMqHttpAdmin
from amqpspec.conformance.profile import AdminSettings

__all__ = [
    "WS_LISTENER",
    "WS_LISTENERS",
    "Admin",
    "ManagementNodeAdmin",
    "NoAdmin",
    "RabbitMqCtlAdmin",
    "RabbitMqHttpAdmin",
    "make_admin",
]


def make_admin(
    settings: AdminSettings, url_override: str | None = None, broker_url: str | None = None
) -> Admin:
    """The profile's admin adapter; `url_override` (--admin) wins over the profile's url (an
    http:// one selects rabbitmq-http); `broker_url` (amqp://user:pass@host:port) is where
    the management-node adapter goes when neither names an amqp:// url."""
    adapter = settings.adapter
    if url_override and (adapter == "none" or url_override.startswith("http")):
        adapter = "rabbitmq-http"
    if adapter == "management-node":
        url = url_override or settings.url or broker_url or "amqp://127.0.0.1:5672"
        alarms = (
            RabbitMqCtlAdmin(RabbitMqCtl(settings.rabbitmqctl, settings.env_script))
            if settings.alarm == "rabbitmqctl"
            else None
        )
        return ManagementNodeAdmin(url, alarms)
    if adapter == "rabbitmq-http":
        url = url_override or settings.url or "http://guest:guest@127.0.0.1:15672"
        ctl = (
            RabbitMqCtl(settings.rabbitmqctl, settings.env_script)
            if settings.alarm == "rabbitmqctl"
            else None
        )
        return RabbitMqHttpAdmin(url, settings.alarm, ctl, restart=settings.restart)
    if adapter == "rabbitmqctl":
        return RabbitMqCtlAdmin(RabbitMqCtl(settings.rabbitmqctl, settings.env_script))
    return NoAdmin()
