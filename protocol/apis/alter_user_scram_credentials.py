"""AlterUserScramCredentials (key 51, KIP-554): create, change and delete users' SCRAM
credentials; the client sends the salted password, never the password."""

from ..schema import ApiDefinition, Field

API = ApiDefinition(
    key=51,
    name="AlterUserScramCredentials",
    versions="0",
    flexible="0+",
    request=[
        Field("deletions", "[]ScramCredentialDeletion", "0+", fields=[
            Field("name", "string", "0+"),
            Field("mechanism", "int8", "0+"),
        ]),
        Field("upsertions", "[]ScramCredentialUpsertion", "0+", fields=[
            Field("name", "string", "0+"),
            Field("mechanism", "int8", "0+"),
            Field("iterations", "int32", "0+"),
            Field("salt", "bytes", "0+"),
            Field("salted_password", "bytes", "0+"),
        ]),
    ],
    response=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("results", "[]AlterUserScramCredentialsResult", "0+", fields=[
            Field("user", "string", "0+"),
            Field("error_code", "int16", "0+"),
            Field("error_message", "string", "0+", nullable="0+"),
        ]),
    ],
)
