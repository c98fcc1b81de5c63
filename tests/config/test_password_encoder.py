"""Kafka's password encoder: values in Kafka's map format, decrypted only with their secret, and
a value Java's JCE encrypted as Kafka's ``EncryptingPasswordEncoder`` does read back here."""

from __future__ import annotations

import pytest

from trio_broker.broker.security.password_encoder import (
    PasswordDecodeError,
    PasswordEncoder,
    is_encoded,
)

#: PBKDF2WithHmacSHA512 (4096 iterations, 128 bits) over a 256-byte salt, AES/CBC/PKCS5Padding,
#: written by Java 17's SecretKeyFactory and Cipher with secret "kafka-secret"
JAVA_ENCODED = (
    "keyFactoryAlgorithm:PBKDF2WithHmacSHA512,cipherAlgorithm:AES/CBC/PKCS5Padding,"
    "keyLength:128,iterations:4096,salt:cOnsDHoyTCEc3BAMXmOZ9fPGaBCZL96c8gH7NWkZi5b3OrjUPRhaIWP"
    "X6GxYQ3Rn7ASgKZqzoFE+R3xarzpLoU3BepmnnVZ7iA0MUY/rOYffqNYDxjQKfAhNk4hCi+s9hKIbHMGr6NZdhXiCS"
    "XjiHlnoGmaV33U0RmRf0st6pM5+0ub4K0zZKqUMvoS+LZeArqGpXoGSBvQ5a3qnBFgMLzfbLzivf+KSoqHTVrqLpzK"
    "j5WjC7mNUkIxG1DcwYrv38/4VdfCUK3odvOKrM8r5Dg1hjUUGfgeLwuvKb7ew8rAktD7BKdnwucF0Aqr1fcbRbkFc3"
    "6N24mAcqTMMU7R9Yw==,encryptedPassword:yblWKeuT+52ZJOulIuVmzttGd27+07bxYKmlxJMm96M=,"
    "passwordLength:16,initializationVector:7BMSOB/IrfwyjoIa7sNuSQ==")


def test_a_value_java_encrypted_as_kafka_does_decodes():
    assert PasswordEncoder("kafka-secret").decode(JAVA_ENCODED) == "ssl-key-pässword"
    with pytest.raises(PasswordDecodeError):
        PasswordEncoder("another-secret").decode(JAVA_ENCODED)


@pytest.mark.parametrize(("cipher", "key_length"), [("AES/CBC/PKCS5Padding", 128),
                                                ("AES/GCM/NoPadding", 256)])
def test_round_trip_in_kafkas_format(cipher, key_length):
    encoder = PasswordEncoder("s3cret", "PBKDF2WithHmacSHA256", cipher, key_length, 1024)
    password = "pä🎉ss"
    encoded = encoder.encode(password)
    fields = dict(item.split(":", 1) for item in encoded.split(","))
    assert {"keyFactoryAlgorithm", "cipherAlgorithm", "keyLength", "salt", "iterations",
            "encryptedPassword", "passwordLength", "initializationVector"} <= set(fields)
    assert (fields["cipherAlgorithm"], fields["keyLength"]) == (cipher, str(key_length))
    assert fields["passwordLength"] == "6"  # Java's String.length(): the emoji is two units
    assert password not in encoded
    assert is_encoded(encoded)
    assert not is_encoded(password)
    assert encoder.encode(password) != encoded  # a fresh salt and IV each time
    assert PasswordEncoder("s3cret").decode(encoded) == password  # the value names its params
    with pytest.raises(PasswordDecodeError):
        PasswordEncoder("wrong").decode(encoded)
