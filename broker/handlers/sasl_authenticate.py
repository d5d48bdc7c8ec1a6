"""SaslAuthenticate: one step of the connection's SASL exchange; the last one makes it authenticated."""

from kbroker.broker.security.sasl import SaslFailure, State
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.sasl_authenticate import SASL_AUTHENTICATE as API  # noqa: F401  (the registry reads API)


def handle(ctx, request):
    session = ctx.connection.sasl if ctx.connection is not None else None
    if session is None or session.state is State.AUTHENTICATED:
        message = "SaslAuthenticate request received after successful authentication" if session else \
            "SaslAuthenticate on a listener without SASL"
        ctx.log.warning("sasl_authenticate_not_expected", listener=ctx.listener)
        return {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "error_message": message, "auth_bytes": b""}
    try:
        answer = session.authenticate(request.auth_bytes)
    except SaslFailure as exc:
        ctx.log.warning("authentication_failed", mechanism=session.mechanism, user=session.attempted_user,
                        reason=str(exc))
        return {"error_code": exc.error, "error_message": str(exc), "auth_bytes": b""}
    if session.state is State.AUTHENTICATED:
        ctx.connection.authenticated()
    # (an empty message, not none: the field's default in Kafka's answer, each step of the exchange)
    return {"error_code": ErrorCode.NONE, "error_message": "", "auth_bytes": answer,
            "session_lifetime_ms": session.session_lifetime_ms}
