"""Steps the conformance cases share, one module per purpose (a case module imports the
steps it uses; none of these registers a case):

- `queues`: messages and filling queues (`body`, `fill`, `publish_messages`, `message_text`).
- `links`: sessions and links (`consumer`, `publisher`, `wait_credit`, crafted session and
  link flows, a small-frame connection).
- `deliveries`: receiving, settling and requeue (`collect`, `exactly`, `queued_receiver`,
  `take_unsettled`, `settle_first`, `consume_again`, `roundtrip`).
- `credit`: link flow control, 2.6.7 / 2.7.4 (drains and their replies, echoes,
  `available`, the broker's MUST violations so far, the proton prefetch pattern).
- `frames`: crafted transfers the engine would hold back (beyond the broker's window, one
  delivery in many frames), sent through the engine so it records them.
- `refusals`: sending crafted input and grading how the broker refuses it (frames, protocol
  headers, SASL).
- `alarms`: resource alarms and the session windows they close (2.5.6).
- `messages`: the bare message as sent and as delivered, section by section and byte for
  byte (3.2).
- `sentences`: spec sentences and outcome sets several case modules check against.
"""
