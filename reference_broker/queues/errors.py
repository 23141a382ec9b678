"""The queue model's refusals: each carries its AMQP error condition and the HTTP status the
admin API answers with.

Owns: `BrokerError` and its kinds (not-found, precondition-failed, resource-locked,
not-allowed). Raised by the virtual host (vhost.py) and the queue owners (owners.py); the
protocol layer and the admin API turn them into an AMQP error or an HTTP answer.
"""

from __future__ import annotations

NOT_FOUND = "amqp:not-found"
PRECONDITION_FAILED = "amqp:precondition-failed"
RESOURCE_LOCKED = "amqp:resource-locked"
NOT_ALLOWED = "amqp:not-allowed"


class BrokerError(Exception):
    """A model-level refusal; `condition` is the AMQP error condition, `status` the HTTP one."""

    condition = "amqp:internal-error"
    status = 500

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class NotFoundError(BrokerError):
    condition = NOT_FOUND
    status = 404


class PreconditionFailedError(BrokerError):
    condition = PRECONDITION_FAILED
    status = 400


class ResourceLockedError(BrokerError):
    """An exclusive queue used by another connection (RabbitMQ's check_exclusive_access)."""

    condition = RESOURCE_LOCKED
    status = 405  # AMQP 0-9-1's RESOURCE_LOCKED; the /management node answers 400


class NotAllowedError(BrokerError):
    condition = NOT_ALLOWED
    status = 400
