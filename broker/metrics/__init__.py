"""Prometheus metrics: counters kept on the request path (``counters``), everything else read from the broker's
state when scraped (``collector``), served by ``http`` on ``metrics.port``."""
