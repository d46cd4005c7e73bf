"""DescribeUserScramCredentials (key 50, KIP-554): which SCRAM mechanisms each user has a
credential for, with its iteration count (never the credential itself)."""

from ..schema import ApiDefinition, Field

API = ApiDefinition(
    key=50,
    name="DescribeUserScramCredentials",
    versions="0",
    flexible="0+",
    request=[
        Field("users", "[]UserName", "0+", nullable="0+", fields=[
            Field("name", "string", "0+"),
        ]),
    ],
    response=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("error_code", "int16", "0+"),
        Field("error_message", "string", "0+", nullable="0+"),
        Field("results", "[]DescribeUserScramCredentialsResult", "0+", fields=[
            Field("user", "string", "0+"),
            Field("error_code", "int16", "0+"),
            Field("error_message", "string", "0+", nullable="0+"),
            Field("credential_infos", "[]CredentialInfo", "0+", fields=[
                Field("mechanism", "int8", "0+"),
                Field("iterations", "int32", "0+"),
            ]),
        ]),
    ],
)
