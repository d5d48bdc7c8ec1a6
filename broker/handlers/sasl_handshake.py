"""SaslHandshake: choose the mechanism of the connection's SASL exchange (or of its re-authentication)."""

from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.sasl_handshake import SASL_HANDSHAKE as API  # noqa: F401  (the registry reads API)


def handle(ctx, request):
    session = ctx.connection.sasl if ctx.connection is not None else None
    if session is None:   # a listener without SASL, as Kafka answers it
        ctx.log.warning("sasl_handshake_not_expected", listener=ctx.listener)
        return {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "mechanisms": []}
    error = session.handshake(request.mechanism, ctx.api_version)
    if error:
        ctx.log.warning("sasl_handshake_refused", mechanism=request.mechanism, error=error.name,
                        enabled=session.mechanisms)
    # (refused out of turn, the answer names no mechanism, as Kafka's error response does)
    return {"error_code": error,
            "mechanisms": [] if error == ErrorCode.ILLEGAL_SASL_STATE else list(session.mechanisms)}
