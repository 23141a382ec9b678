"""The documented pytest entry point of the conformance plugin: `-p amqpspec.conformance.plugin`
(what `amqpspec run` passes; a pytest user names it the same way). The plugin itself is
`run/plugin.py`, which pytest loads through `pytest_plugins`; this module has no hooks of its
own, so the plugin is registered once.
"""

pytest_plugins = ["amqpspec.conformance.run.plugin"]
