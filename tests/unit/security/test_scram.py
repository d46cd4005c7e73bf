"""SCRAM-SHA-256/512 against RFC 7677's exchange, and the server's refusals."""

import base64

import pytest

from minikafka.security import scram
from minikafka.security.sasl import AuthenticationFailed, SaslLogin, ScramMechanismServer
from minikafka.security.scram import ScramClient, ScramCredential, ScramError, ScramServer

# RFC 7677, section 3.
CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
SERVER_FIRST = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
CLIENT_FINAL = (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def rfc_credential() -> ScramCredential:
    return scram.new_credential(scram.SCRAM_SHA_256, "pencil", 4096, SALT)


def test_server_side_of_rfc_7677():
    server = ScramServer(scram.SCRAM_SHA_256, nonce=SERVER_NONCE)
    first, answer = server.client_first(CLIENT_FIRST, rfc_credential())
    assert first.username == "user" and answer == SERVER_FIRST
    assert server.client_final(CLIENT_FINAL) == SERVER_FINAL


def test_client_side_of_rfc_7677():
    client = ScramClient(scram.SCRAM_SHA_256, "user", "pencil", nonce=CLIENT_NONCE)
    assert client.first_message() == CLIENT_FIRST
    assert client.final_message(SERVER_FIRST) == CLIENT_FINAL
    client.verify_server_final(SERVER_FINAL)
    with pytest.raises(ScramError, match="signature"):
        client.verify_server_final(b"v=" + base64.b64encode(b"\0" * 32))


def test_a_wrong_password_and_an_unknown_user_fail_alike():
    for credential in (scram.new_credential(scram.SCRAM_SHA_256, "not pencil", 4096, SALT), None):
        server = ScramServer(scram.SCRAM_SHA_256, nonce=SERVER_NONCE)
        server.client_first(CLIENT_FIRST, credential)
        with pytest.raises(ScramError, match="Invalid user credentials"):
            server.client_final(CLIENT_FINAL)


def test_an_unknown_user_gets_the_same_salt_every_time():
    answers = set()
    for _ in range(2):
        _, answer = ScramServer(scram.SCRAM_SHA_512, nonce="x").client_first(b"n,,n=nobody,r=abc", None)
        answers.add(answer)
    assert len(answers) == 1


@pytest.mark.parametrize("mechanism", [scram.SCRAM_SHA_256, scram.SCRAM_SHA_512])
def test_client_and_server_agree(mechanism):
    credential = scram.new_credential(mechanism, "s3cret, with = signs", 4096)
    server = ScramMechanismServer(mechanism, lambda m, u: credential if (m, u) == (mechanism, "a,b=c") else None)
    tokens = SaslLogin(mechanism, "a,b=c", "s3cret, with = signs").tokens()
    answer = server.evaluate(tokens.first())
    final = tokens.next(answer)
    assert final is not None
    assert tokens.next(server.evaluate(final)) is None
    assert server.complete and server.username == "a,b=c"


@pytest.mark.parametrize("token", [
    b"", b"garbage", b"n,,", b"n,,r=abc,n=user", b"p=tls-unique,,n=user,r=abc", b"n,,n=us=er,r=abc",
    b"n,,n=user,r=a,b", b"n,,n=user,r=abc,tokenauth=true", b"n,a=other,n=user,r=abc", b"\xff\xfe",
])
def test_malformed_or_unsupported_first_messages_fail(token):
    server = ScramMechanismServer(scram.SCRAM_SHA_256, lambda m, u: rfc_credential())
    with pytest.raises(AuthenticationFailed):
        server.evaluate(token)


def test_a_final_message_with_another_nonce_or_binding_fails():
    for final in (CLIENT_FINAL.replace(b"r=rOpr", b"r=XOpr"), CLIENT_FINAL.replace(b"c=biws", b"c=eSws"),
                  CLIENT_FINAL[:-10], b"c=biws", b"\xff"):
        server = ScramMechanismServer(scram.SCRAM_SHA_256, lambda m, u: rfc_credential())
        server._exchange = ScramServer(scram.SCRAM_SHA_256, nonce=SERVER_NONCE)
        server.evaluate(CLIENT_FIRST)
        with pytest.raises(AuthenticationFailed):
            server.evaluate(final)


def test_credential_text_is_kafkas():
    credential = ScramCredential(b"\x01", b"\x02", b"\x03", 4096)
    assert credential.encode() == "salt=AQ==,stored_key=Ag==,server_key=Aw==,iterations=4096"
    assert ScramCredential.decode(credential.encode()) == credential
    with pytest.raises(ScramError):
        ScramCredential.decode("salt=AQ==,iterations=x")


def test_iteration_bounds():
    assert scram.iteration_error(4096) is None and scram.iteration_error(16384) is None
    assert "Too few" in (scram.iteration_error(4095) or "")
    assert "Too many" in (scram.iteration_error(16385) or "")
