"""DescribeUserScramCredentials and AlterUserScramCredentials (KIP-554): users' SCRAM credentials,
kept salted and hashed by the security store; describing needs DESCRIBE on the cluster, altering
ALTER. One handler per API: `describe` and `alter`."""

from __future__ import annotations

from minikafka.security.acl import AclOperation
from minikafka.security.manager import UserAlteration
from minikafka.server.context import BrokerContext
from protocol import Request
from protocol.errors import ErrorCode
from protocol.typed.alter_user_scram_credentials import (
    AlterUserScramCredentialsRequestView,
    AlterUserScramCredentialsResponse,
)
from protocol.typed.describe_user_scram_credentials import (
    DescribeUserScramCredentialsRequestView,
    DescribeUserScramCredentialsResponse,
)

NOT_AUTHORIZED = "Not authorized to {} SCRAM credentials (Cluster:kafka-cluster)"


async def alter(request: Request[AlterUserScramCredentialsRequestView], ctx: BrokerContext
                ) -> AlterUserScramCredentialsResponse:
    body = request.body
    if not ctx.session.allowed_on_cluster(AclOperation.ALTER):
        users = dict.fromkeys([d.name for d in body.deletions] + [u.name for u in body.upsertions])
        return {"throttle_time_ms": 0, "results": [
            {"user": user, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
             "error_message": NOT_AUTHORIZED.format("alter")} for user in users]}
    alterations = [UserAlteration(d.name, d.mechanism, deletion=True) for d in body.deletions]
    alterations += [UserAlteration(u.name, u.mechanism, u.iterations, bytes(u.salt), bytes(u.salted_password))
                    for u in body.upsertions]
    results = await ctx.security.alter_users(alterations)
    return {"throttle_time_ms": 0, "results": [
        {"user": r.user, "error_code": r.error, "error_message": r.message} for r in results]}


async def describe(request: Request[DescribeUserScramCredentialsRequestView], ctx: BrokerContext
                   ) -> DescribeUserScramCredentialsResponse:
    if not ctx.session.allowed_on_cluster(AclOperation.DESCRIBE):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                "error_message": NOT_AUTHORIZED.format("describe"), "results": []}
    users = request.body.users
    found = ctx.security.describe_users(None if users is None else [u.name for u in users])
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None, "results": [
        {"user": d.user, "error_code": d.error, "error_message": d.message,
         "credential_infos": [{"mechanism": m, "iterations": i} for m, i in d.credentials]} for d in found]}
