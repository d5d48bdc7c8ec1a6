"""Certificates for TLS tests, made at run time with the ``cryptography`` package: a CA, a broker certificate for
127.0.0.1/localhost, client certificates (trusted, from a stranger CA, expired). PEM files, as Kafka's PEM
keystores hold them: private key and certificate chain in one file."""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


@dataclass
class Pki:
    ca: str              # the CA certificate (a truststore)
    broker: str          # key + chain of the broker, valid for 127.0.0.1 and localhost
    client: str          # key + chain of CN=alice,OU=eng,O=acme
    client_cert: str     # the client certificate alone, and its key alone (for clients that want them apart)
    client_key: str
    stranger: str        # key + chain signed by a CA nobody trusts
    expired: str         # key + chain signed by the CA, expired yesterday


def _name(**attrs) -> x509.Name:
    oids = {"C": NameOID.COUNTRY_NAME, "O": NameOID.ORGANIZATION_NAME, "OU": NameOID.ORGANIZATIONAL_UNIT_NAME,
            "CN": NameOID.COMMON_NAME}
    return x509.Name([x509.NameAttribute(oids[k], v) for k, v in attrs.items()])


def _issue(subject: x509.Name, issuer_name: x509.Name, issuer_key, *, ca: bool = False, hosts: bool = False,
           days: tuple[int, int] = (-1, 30)):
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer_name)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now + datetime.timedelta(days=days[0]))
               .not_valid_after(now + datetime.timedelta(days=days[1]))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if hosts:
        builder = builder.add_extension(x509.SubjectAlternativeName(
            [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]), critical=False)
    cert = builder.sign(issuer_key if issuer_key is not None else key, hashes.SHA256())
    return key, cert


def _pem(key=None, *certs) -> bytes:
    out = b""
    if key is not None:
        out += key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                 serialization.NoEncryption())
    return out + b"".join(c.public_bytes(serialization.Encoding.PEM) for c in certs)


def make_pki(directory: str) -> Pki:
    os.makedirs(directory, exist_ok=True)
    ca_name = _name(O="kbroker tests", CN="test CA")
    ca_key, ca_cert = _issue(ca_name, ca_name, None, ca=True)
    stranger_name = _name(CN="stranger CA")
    stranger_key, stranger_cert = _issue(stranger_name, stranger_name, None, ca=True)
    files = {
        "ca": _pem(None, ca_cert),
        "broker": _pem(*(_issue(_name(CN="broker"), ca_name, ca_key, hosts=True)), ca_cert),
        "stranger": _pem(*(_issue(_name(CN="mallory"), stranger_name, stranger_key)), stranger_cert),
        "expired": _pem(*(_issue(_name(CN="late"), ca_name, ca_key, days=(-30, -1))), ca_cert),
    }
    client_key, client_cert = _issue(_name(C="US", O="acme", OU="eng", CN="alice"), ca_name, ca_key)
    files["client"] = _pem(client_key, client_cert, ca_cert)
    files["client_cert"] = _pem(None, client_cert)
    files["client_key"] = _pem(client_key)
    paths = {}
    for name, data in files.items():
        paths[name] = os.path.join(directory, f"{name}.pem")
        with open(paths[name], "wb") as f:
            f.write(data)
    return Pki(**paths)

