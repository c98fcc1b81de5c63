"""Kafka's ``PasswordEncoder``: secret dynamic configs encrypted with ``password.encoder.secret``.

Why Kafka's format, field for field: a dynamic password is stored as Kafka stores it, a map
string ``keyFactoryAlgorithm:...,cipherAlgorithm:...,keyLength:...,salt:...,iterations:...,
encryptedPassword:...,passwordLength:...,initializationVector:...`` (base64 byte fields), so the
values read the same to anyone who knows Kafka's, and a value written here decodes with
Kafka's ``EncryptingPasswordEncoder`` and back. The key is PBKDF2 of the secret over a fresh
256-byte salt per value (``password.encoder.keyfactory.algorithm``, default
PBKDF2WithHmacSHA512, ``password.encoder.iterations``, ``password.encoder.key.length`` bits);
the cipher is ``password.encoder.cipher.algorithm``, AES/CBC/PKCS5Padding by default (a random
16-byte IV) or AES/GCM/NoPadding (a random 12-byte IV, a 128-bit tag, which also tells a wrong
secret for certain).

Why ``passwordLength`` counts UTF-16 units: it is Java's ``String.length()``, Kafka's check
that a value decrypted with a wrong secret (CBC's padding then passes by chance, 1 in 256) is
not taken for the password.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

__all__ = ["CIPHER_ALGORITHMS", "KEY_FACTORY_ALGORITHMS", "PasswordDecodeError",
           "PasswordEncoder", "is_encoded"]

#: Java's SecretKeyFactory names -> hashlib's digest names
KEY_FACTORY_ALGORITHMS = {"PBKDF2WithHmacSHA512": "sha512", "PBKDF2WithHmacSHA384": "sha384",
                          "PBKDF2WithHmacSHA256": "sha256", "PBKDF2WithHmacSHA224": "sha224",
                          "PBKDF2WithHmacSHA1": "sha1"}
CBC, GCM = "AES/CBC/PKCS5Padding", "AES/GCM/NoPadding"
CIPHER_ALGORITHMS = (CBC, GCM)
_SALT_BYTES = 256  # as Kafka's encoder draws
_GCM_TAG_BITS = 128  # Java's default tag length, the one AESGCM makes
_FIELDS = ("keyFactoryAlgorithm", "cipherAlgorithm", "keyLength", "salt", "iterations",
           "encryptedPassword", "passwordLength", "initializationVector")


class PasswordDecodeError(ValueError):
    """A stored value that this secret cannot decrypt (a wrong secret, or a damaged value)."""


def _java_length(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _parse(encoded: str) -> dict[str, str]:
    """Kafka's ``Csv.parseCsvMap``: ``k:v`` pairs separated by commas."""
    fields = {}
    for item in encoded.split(","):
        name, colon, value = item.strip().partition(":")
        if colon:
            fields[name.strip()] = value.strip()
    return fields


def is_encoded(value: str) -> bool:
    """Whether a stored value is an encoded password rather than one in clear."""
    fields = _parse(value)
    return "encryptedPassword" in fields and "salt" in fields


class PasswordEncoder:
    """Encrypts and decrypts dynamic password configs with one secret, as Kafka's
    ``EncryptingPasswordEncoder`` does."""

    def __init__(self, secret: str, key_factory_algorithm: str | None = None,
                 cipher_algorithm: str = CBC, key_length: int = 128,
                 iterations: int = 4096) -> None:
        """Raises ValueError naming the unsupported algorithm or key length."""
        self.key_factory_algorithm = key_factory_algorithm or "PBKDF2WithHmacSHA512"
        if self.key_factory_algorithm not in KEY_FACTORY_ALGORITHMS:
            raise ValueError(f"password.encoder.keyfactory.algorithm={key_factory_algorithm!r} "
                             f"is not supported: one of {', '.join(KEY_FACTORY_ALGORITHMS)}")
        if cipher_algorithm not in CIPHER_ALGORITHMS:
            raise ValueError(f"password.encoder.cipher.algorithm={cipher_algorithm!r} is not "
                             f"supported: one of {', '.join(CIPHER_ALGORITHMS)}")
        if key_length not in (128, 192, 256):
            raise ValueError(f"password.encoder.key.length={key_length} is not an AES key "
                             "length: 128, 192 or 256")
        self._secret = secret.encode("utf-8")  # PBEKeySpec's chars, as PBKDF2 encodes them
        self.cipher_algorithm = cipher_algorithm
        self.key_length = key_length
        self.iterations = iterations

    def _key(self, factory: str, salt: bytes, iterations: int, key_length: int) -> bytes:
        digest = KEY_FACTORY_ALGORITHMS.get(factory)
        if digest is None:
            raise PasswordDecodeError(f"unknown key factory algorithm {factory!r}")
        return hashlib.pbkdf2_hmac(digest, self._secret, salt, iterations, key_length // 8)

    def encode(self, password: str) -> str:
        """``password`` encrypted under a fresh salt and IV, in Kafka's map string."""
        salt = os.urandom(_SALT_BYTES)
        key = self._key(self.key_factory_algorithm, salt, self.iterations, self.key_length)
        data = password.encode("utf-8")
        fields = {"keyFactoryAlgorithm": self.key_factory_algorithm,
                  "cipherAlgorithm": self.cipher_algorithm, "keyLength": str(self.key_length),
                  "salt": _b64(salt), "iterations": str(self.iterations)}
        if self.cipher_algorithm == GCM:
            iv = os.urandom(12)
            encrypted = AESGCM(key).encrypt(iv, data, None)
            fields["authenticationTagLength"] = str(_GCM_TAG_BITS)
        else:
            iv = os.urandom(16)
            padder = padding.PKCS7(128).padder()
            encryptor = Cipher(algorithms.AES(key), modes.CBC(iv)).encryptor()
            encrypted = encryptor.update(padder.update(data) + padder.finalize())
            encrypted += encryptor.finalize()
        fields.update(encryptedPassword=_b64(encrypted),
                      passwordLength=str(_java_length(password)), initializationVector=_b64(iv))
        return ",".join(f"{name}:{value}" for name, value in fields.items())

    def decode(self, encoded: str) -> str:
        """The password in a value ``encode`` (or Kafka's encoder) wrote; raises
        PasswordDecodeError when this secret cannot decrypt it."""
        fields = _parse(encoded)
        try:
            missing = [name for name in _FIELDS[1:] if name not in fields]
            if missing:
                raise PasswordDecodeError(f"not an encoded password: no {missing[0]}")
            cipher_algorithm = fields["cipherAlgorithm"]
            key = self._key(fields.get("keyFactoryAlgorithm", "PBKDF2WithHmacSHA512"),
                            base64.b64decode(fields["salt"], validate=True),
                            int(fields["iterations"]), int(fields["keyLength"]))
            iv = base64.b64decode(fields["initializationVector"], validate=True)
            encrypted = base64.b64decode(fields["encryptedPassword"], validate=True)
            if cipher_algorithm == GCM:
                if int(fields.get("authenticationTagLength", _GCM_TAG_BITS)) != _GCM_TAG_BITS:
                    raise PasswordDecodeError("only 128-bit GCM tags are supported")
                data = AESGCM(key).decrypt(iv, encrypted, None)
            elif cipher_algorithm == CBC:
                decryptor = Cipher(algorithms.AES(key), modes.CBC(iv)).decryptor()
                padded = decryptor.update(encrypted) + decryptor.finalize()
                unpadder = padding.PKCS7(128).unpadder()
                data = unpadder.update(padded) + unpadder.finalize()
            else:
                raise PasswordDecodeError(f"unsupported cipher algorithm {cipher_algorithm!r}")
            password = data.decode("utf-8")
            length = int(fields["passwordLength"])
        except PasswordDecodeError:
            raise
        except (ValueError, InvalidTag, binascii.Error) as exc:
            raise PasswordDecodeError("Password could not be decoded") from exc
        if _java_length(password) != length:
            raise PasswordDecodeError(
                "Password could not be decoded, sanity check of length failed")
        return password
