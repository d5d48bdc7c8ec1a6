"""The Kafka wire protocol: schemas, headers and record batches. Pure functions over bytes; no I/O."""

from kbroker.protocol import messages as _messages  # noqa: F401  (registers every API)
from kbroker.protocol.schema import REGISTRY, Message, decode, encode, struct_for

__all__ = ["REGISTRY", "Message", "decode", "encode", "struct_for"]
