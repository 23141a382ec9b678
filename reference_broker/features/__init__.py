"""The broker's protocol features, each in its own module, each wired into protocol/ at one
point: anonymous relay, dynamic nodes, local transactions, link recovery, source filters,
sole connection for container, resource alarms.

Owns: each feature's state and rules. May touch: the model (queues/) and the connection or
session objects it is handed, through their public methods.
"""
