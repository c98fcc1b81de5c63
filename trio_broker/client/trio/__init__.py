"""The client core driven by Trio: ``Producer``, ``Consumer``, ``Admin`` and their connections.

The public names are re-exported by ``trio_broker.client``, which is where users import them.
May import the protocol and the client core; nothing of the broker.
"""
