"""A private certificate authority for local clusters: one CA, broker and client certificates.

Everything is PEM, which both sides read without conversion: librdkafka takes
`ssl.ca.location` / `ssl.certificate.location` / `ssl.key.location`, and Kafka's brokers take
`ssl.keystore.type=PEM` (one file holding the private key and its certificate chain) and
`ssl.truststore.type=PEM`. Broker certificates name 127.0.0.1 and localhost, because librdkafka
verifies the broker's host name by default (`ssl.endpoint.identification.algorithm=https`).
Private keys are written readable by their owner only.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["CertificateAuthority", "IssuedCertificate"]

_VALID_DAYS = 825  # the longest validity common TLS clients accept for a leaf certificate
_LOCAL_NAMES: tuple[x509.GeneralName, ...] = (
    x509.DNSName("localhost"),
    x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
)


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "ferry local clusters"),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    # Unencrypted PKCS#8: the form Kafka's PEM keystore reads without ssl.key.password.
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _write_private(path: Path, data: bytes) -> None:
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)


@dataclass(frozen=True)
class IssuedCertificate:
    """Files of one certificate: its key, the certificate, and both in one (Kafka's PEM
    keystore)."""

    key: Path
    certificate: Path
    keystore: Path


@dataclass(frozen=True)
class CertificateAuthority:
    """A CA kept in `directory` (ca.pem, ca.key); reused by every cluster of one local dir."""

    directory: Path

    @property
    def certificate(self) -> Path:
        return self.directory / "ca.pem"

    @property
    def _key_file(self) -> Path:
        return self.directory / "ca.key"

    @classmethod
    def open(cls, directory: Path) -> CertificateAuthority:
        """The CA in `directory`, created there first when it has none."""
        ca = cls(directory)
        if not (ca.certificate.exists() and ca._key_file.exists()):
            ca._create()
        return ca

    def _create(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(_name("ferry local CA"))
            .issuer_name(_name("ferry local CA"))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=_VALID_DAYS))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
            .sign(key, hashes.SHA256())
        )
        _write_private(self._key_file, _key_pem(key))
        self.certificate.write_bytes(cert.public_bytes(serialization.Encoding.PEM))

    def issue(self, name: str, *, server: bool) -> IssuedCertificate:
        """A certificate with common name `name`, signed by this CA: for a broker (`server`,
        valid for 127.0.0.1 and localhost, and as a client of its own controller) or for a
        client (mutual TLS)."""
        ca_key = serialization.load_pem_private_key(self._key_file.read_bytes(), password=None)
        assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
        ca_cert = x509.load_pem_x509_certificate(self.certificate.read_bytes())
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        usages = [ExtendedKeyUsageOID.CLIENT_AUTH]
        if server:
            usages.insert(0, ExtendedKeyUsageOID.SERVER_AUTH)
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(name))
            .issuer_name(ca_cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=_VALID_DAYS))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
            )
        )
        if server:
            builder = builder.add_extension(x509.SubjectAlternativeName(_LOCAL_NAMES), False)
        cert = builder.sign(ca_key, hashes.SHA256())
        key_pem = _key_pem(key)
        chain = cert.public_bytes(serialization.Encoding.PEM) + self.certificate.read_bytes()
        issued = IssuedCertificate(
            key=self.directory / f"{name}.key",
            certificate=self.directory / f"{name}.pem",
            keystore=self.directory / f"{name}.keystore.pem",
        )
        _write_private(issued.key, key_pem)
        issued.certificate.write_bytes(chain)
        _write_private(issued.keystore, key_pem + chain)
        return issued
