"""UpdateFeatures (KIP-584, KIP-778): raise or lower finalized feature levels (``configuration/features``), all
updates of a request or none, with Kafka's checks; Alter on the cluster is required. A level 0 removes the
feature (a client then reads it as absent); ``validate_only`` checks without storing."""

from kbroker.broker.configuration import features
from kbroker.protocol.acls import ALTER
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.update_features import UPDATE_FEATURES as API  # noqa: F401  (the registry reads API)


async def handle(ctx, request):
    broker = ctx.broker
    if not ctx.cluster_authorized(ALTER):
        error, message = ErrorCode.CLUSTER_AUTHORIZATION_FAILED, ctx.needs(ALTER)
    else:
        updates = [(u.feature, u.max_version_level,
                    u.upgrade_type if ctx.api_version >= 1 else
                    (features.SAFE_DOWNGRADE if u.allow_downgrade else features.UPGRADE))
                   for u in request.feature_updates]
        stored = broker.metadata.features
        error, message = features.update(updates, broker.config, stored)
        if not error and not (ctx.api_version >= 1 and request.validate_only):
            levels = dict(stored)
            levels.update({name: level for name, level, _ in updates})
            await broker.admin.set_features(levels)
            ctx.log.warning("features_updated", levels={name: level for name, level, _ in updates})
    response = {"throttle_time_ms": 0, "error_code": error, "error_message": message}
    if ctx.api_version < 2:   # (none for a refused request: Kafka's error answer lists no feature)
        response["results"] = [] if error == ErrorCode.CLUSTER_AUTHORIZATION_FAILED else [
            {"feature": u.feature, "error_code": error, "error_message": message} for u in request.feature_updates]
    return response
