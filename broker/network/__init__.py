"""The network edge: connections and their limits, what a handler sees of a request, the handler registry, and log regions and memory on the way out."""
