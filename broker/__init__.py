"""The kbroker server: listeners, connections, request handlers, replica manager and purgatory."""
