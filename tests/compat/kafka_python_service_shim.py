"""Stand-in for kafka-python's ``test/service.py``, which its sdist does not ship.

With ``KAFKA_URI`` set, its fixtures only need an ExternalService handle for a
broker that is already running (kbroker); spawning brokers is never asked for.
"""


class ExternalService:
    def __init__(self, host, port):
        self.host, self.port = host, port

    def start(self):
        pass

    def stop(self):
        pass

    def dump_logs(self):
        pass

    def wait_for(self, pattern, timeout=30):
        return True


class SpawnedService:
    def __init__(self, *args, **kwargs):
        raise RuntimeError("kbroker's compat run uses an external broker only (KAFKA_URI)")
