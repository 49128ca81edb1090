"""The SCRAM server (cluster/security/scram.py) against an independent client (scramp) and the
RFC 7677 example, with Kafka's rules: unknown users fail at the first message, an authorization
id equal to the user is fine, no channel binding, no SASLprep, escaped names, too few iterations."""

from __future__ import annotations

import base64

import pytest
import scramp

from cluster.security.scram import (
    ScramCredential,
    ScramError,
    ScramServer,
    credential_from_salted,
    make_credential,
    salted_password,
    unescape_name,
)


def store(**users: tuple[str, str]) -> dict[tuple[str, str], ScramCredential]:
    return {(u, mech): make_credential(mech, pw) for u, (mech, pw) in users.items()}


def exchange(mech: str, user: str, password: str, creds: dict[tuple[str, str], ScramCredential]) -> ScramServer:
    client = scramp.ScramClient([mech], user, password)
    server = ScramServer(mech, lambda u, m: creds.get((u, m)))
    client.set_server_first(server.first(client.get_client_first().encode()).decode())
    client.set_server_final(server.final(client.get_client_final().encode()).decode())  # checks the signature
    return server


@pytest.mark.parametrize("mech", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_a_scramp_client_authenticates_and_checks_the_server(mech: str) -> None:
    server = exchange(mech, "alice", "alice-secret", store(alice=(mech, "alice-secret")))
    assert server.user == "alice"


@pytest.mark.parametrize("mech", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_a_wrong_password_fails_at_the_final_message(mech: str) -> None:
    creds = store(alice=(mech, "right"))
    client = scramp.ScramClient([mech], "alice", "wrong")
    server = ScramServer(mech, lambda u, m: creds.get((u, m)))
    client.set_server_first(server.first(client.get_client_first().encode()).decode())
    with pytest.raises(ScramError):
        server.final(client.get_client_final().encode())
    assert server.user is None


def test_an_unknown_user_or_mechanism_fails_at_the_first_message() -> None:
    creds = store(alice=("SCRAM-SHA-256", "pw"))
    for mech, user in (("SCRAM-SHA-256", "bob"), ("SCRAM-SHA-512", "alice")):
        client = scramp.ScramClient([mech], user, "pw")
        with pytest.raises(ScramError, match="Invalid user credentials"):
            ScramServer(mech, lambda u, m: creds.get((u, m))).first(client.get_client_first().encode())


def test_the_rfc7677_example() -> None:
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    mech = "SCRAM-SHA-256"
    cred = credential_from_salted(mech, salt, salted_password(mech, "pencil", salt, 4096), 4096)
    server = ScramServer(mech, lambda u, m: cred)
    server.first(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    server._nonce = "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"  # the RFC's server nonce
    server._server_first = f"r={server._nonce},s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    final = server.final(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                         b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def test_kafkas_message_rules() -> None:
    creds = {("al,i=ce", "SCRAM-SHA-256"): make_credential("SCRAM-SHA-256", "pw")}

    def server() -> ScramServer:
        return ScramServer("SCRAM-SHA-256", lambda u, m: creds.get((u, m)))

    server().first(b"n,,n=al=2Ci=3Dce,r=abc")  # escaped name
    server().first(b"n,a=al=2Ci=3Dce,n=al=2Ci=3Dce,r=abc")  # authorization id = the user
    server().first(b"n,,m=reserved,n=al=2Ci=3Dce,r=abc,tokenauth=true")  # reserved m=, a long extension key
    for bad in (b"y,,n=al=2Ci=3Dce,r=abc", b"p=tls-unique,,n=al=2Ci=3Dce,r=abc",  # channel binding
                b"n,a=bob,n=al=2Ci=3Dce,r=abc",  # someone else's authorization
                b"n,,n=al=ice,r=abc", b"n,,n=al=2Ci=3Dce", b"\xff"):
        with pytest.raises(ScramError):
            server().first(bad)
    s = server()
    s.first(b"n,,n=al=2Ci=3Dce,r=abc")
    with pytest.raises(ScramError, match="nonces"):
        s.final(b"c=biws,r=abcOTHER,p=AAAA")
    with pytest.raises(ScramError):
        unescape_name("a=b")


def test_too_few_stored_iterations_do_not_authenticate() -> None:
    creds = {("u", "SCRAM-SHA-256"): make_credential("SCRAM-SHA-256", "pw", iterations=1024)}
    client = scramp.ScramClient(["SCRAM-SHA-256"], "u", "pw")
    with pytest.raises(ScramError, match="Iterations"):
        ScramServer("SCRAM-SHA-256", lambda u, m: creds.get((u, m))).first(client.get_client_first().encode())
