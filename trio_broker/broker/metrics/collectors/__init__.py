"""Metrics read from the broker's state when scraped: logs, groups, lag, the log cleaner.

Why apart from the rest of ``metrics/``: the registry and the request timings sit below storage
(every layer records into them), while these collectors read the logs, the coordinators and
the cleaner, so they sit above the server core, in the network's layer.

May import the server core (``BrokerState``), storage and what they import; never the network.
"""
