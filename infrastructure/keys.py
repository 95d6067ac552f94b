"""The server's key file: the Ed25519 key that signs every append, and the optional
AES-256 key that turns encryption at rest on.

The file lives outside the database (`DUNE_LEDGER_KEY_FILE`, default
`dune-ledger.key` in the working directory), mode 0600, as JSON:

    {"version": 1, "signing_key": B64, "public_key": B64,
     "cipher_key": B64,                      (only with `keys init --cipher`)
     "retired_public_keys": [B64, ...]}      (optional: see docs/security.md)

Someone who can write the database but not read this file can neither sign an
edited stream nor read an encrypted one. A command that writes creates the file
when it is missing (a signing key only) and says so once on stderr, so that a
room is signed from its first event; a read never creates it.
"""

from __future__ import annotations

import base64
import binascii
import functools
import os
import sys
import threading
from pathlib import Path
from typing import Any

import orjson
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from eventsourcing.cryptography import AESCipher
from nacl.exceptions import BadSignatureError
from nacl.signing import SigningKey, VerifyKey

from dune_ledger.infrastructure import settings
from dune_ledger.infrastructure.errors import UsageError

KEY_FILE_ENV = settings.variable("key_file")
CIPHER_TOPIC = "eventsourcing.cryptography:AESCipher"
FORMAT = 1


class KeyFileError(UsageError):
    """The key file cannot be read, written or understood (a usage error: exit 2)."""


def key_path(path: str | os.PathLike[str] | None = None) -> Path:
    return Path(path or settings.current().key_file)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def unb64(text: Any, what: str, size: int) -> bytes:
    try:
        raw = base64.b64decode(str(text).encode(), validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != size:
        raise KeyFileError(f"the key file's {what} is not {size} bytes of base64")
    return raw


VERIFIED_KEPT = 4096  # verified signatures kept in memory, per process


class Keys:
    """The key file of one process, read once, created on the first signature if missing.

    Implements the application's `Signer` port (application/stream.py). The signatures
    of the hot path (every append signed, every load's last append verified) are made
    and checked with libsodium (PyNaCl): the same Ed25519, the same bytes, in half the
    instructions of `cryptography`'s (callgrind: a signature 0.27 M against 0.46 M, a
    verification 0.68 M against 1.45 M; a command of the bench's mix made 2.7 M).
    `cryptography` keeps the file's keys, the PEM and the row key's HKDF.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = key_path(path)
        self.lock = threading.Lock()
        self.signing: Ed25519PrivateKey | None = None
        self.public: list[Ed25519PublicKey] = []  # the current key first, then retired ones
        self.sodium: SigningKey | None = None  # `signing`, as libsodium signs with it
        self.verifiers: list[VerifyKey] = []  # `public`, as libsodium checks with them
        self.cipher_key: str | None = None
        self.verified: dict[tuple[bytes, str], None] = {}  # signatures that verified
        self.loaded = False
        if not self.load():
            # Created by the first write: a setting that cannot work is said now, not
            # in the middle of a command.
            folder = self.path.parent
            if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
                raise KeyFileError(f"there is no key file at {self.path}, and it cannot be "
                                   f"created in {folder}: set {KEY_FILE_ENV} to a writable "
                                   "place, or run `dune-ledger keys init --file PATH`")

    # --- reading and creating the file --------------------------------------------------

    def load(self) -> bool:
        """Read the file if it exists; False when it does not (yet)."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return False
        except OSError as e:
            raise KeyFileError(f"cannot read the key file {self.path}: {e.strerror}") from None
        try:
            data = orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise KeyFileError(f"the key file {self.path} is not JSON: "
                               "restore it from your backup") from None
        if not isinstance(data, dict) or data.get("version") != FORMAT:
            raise KeyFileError(f"the key file {self.path} is not a dune-ledger key file "
                               f"(version {FORMAT})")
        signing = Ed25519PrivateKey.from_private_bytes(
            unb64(data.get("signing_key"), "signing_key", 32))
        public = [signing.public_key()]
        for text in data.get("retired_public_keys") or []:
            public.append(Ed25519PublicKey.from_public_bytes(
                unb64(text, "retired public key", 32)))
        cipher = data.get("cipher_key")
        if cipher is not None:
            unb64(cipher, "cipher_key", 32)
        self.signing, self.public, self.cipher_key = signing, public, cipher
        self.sodium = SigningKey(unb64(data.get("signing_key"), "signing_key", 32))
        self.verifiers = [VerifyKey(raw_public(key)) for key in public]
        if not self.loaded and self.path.stat().st_mode & 0o077:
            print(f"dune-ledger: the key file {self.path} can be read by others: "
                  f"chmod 600 {self.path}", file=sys.stderr)
        self.loaded = True
        return True

    def create(self, *, cipher: bool = False, announce: bool = True) -> None:
        """Write a new key file, mode 0600; never replaces one (another process may have
        written it just now: then it is read)."""
        signing = Ed25519PrivateKey.generate()
        data: dict[str, Any] = {
            "version": FORMAT,
            "signing_key": b64(signing.private_bytes(
                serialization.Encoding.Raw, serialization.PrivateFormat.Raw,
                serialization.NoEncryption())),
            "public_key": b64(raw_public(signing.public_key())),
        }
        if cipher:
            data["cipher_key"] = AESCipher.create_key(32)
        # Written whole to a file of its own, then linked into place: a process that
        # starts at the same moment reads either no file or all of it, and a link
        # never replaces a file another process put there first.
        temp = self.path.with_name(f".{self.path.name}.{os.getpid()}.{threading.get_ident()}")
        try:
            write_private(temp, data)
            try:
                os.link(temp, self.path)
            except FileExistsError:
                self.load()
                return
        except OSError as e:
            raise KeyFileError(f"cannot create the key file {self.path}: {e.strerror}") from None
        finally:
            temp.unlink(missing_ok=True)
        if announce:
            print(f"dune-ledger: created the key file {self.path} (an Ed25519 signing key): "
                  "keep it outside the database and back it up; without it no room "
                  "can be verified", file=sys.stderr)
        self.load()

    # --- the Signer port ----------------------------------------------------------------

    def sign(self, message: bytes) -> str:
        if self.sodium is None:
            with self.lock:
                if self.sodium is None and not self.load():
                    self.create()
        assert self.sodium is not None
        signature = b64(self.sodium.sign(message).signature)
        # What this process signed verifies: a load of a room whose last append it
        # wrote checks nothing again.
        self.keep_verified(message, signature)
        return signature

    def verify(self, message: bytes, signature: str) -> bool:
        if (message, signature) in self.verified:
            return True
        if not self.verifiers:
            self.load()  # another process may have created it since
        try:
            raw = base64.b64decode(signature, validate=True)
        except (binascii.Error, ValueError):
            return False
        for key in self.verifiers:
            try:
                key.verify(message, raw)
            except (BadSignatureError, ValueError):
                continue
            self.keep_verified(message, signature)
            return True
        return False

    def keep_verified(self, message: bytes, signature: str) -> None:
        """The same bytes verify the same way: a load and the audit, or the audit and the
        load it compares with, check the last append's signature once. Only successes
        are kept, a bounded few."""
        if len(self.verified) >= VERIFIED_KEPT:
            self.verified.clear()
        self.verified[message, signature] = None

    def row_key(self, create: bool = True) -> bytes | None:
        """The key that authenticates the read-model rows (projections/store.py), derived
        from the signing key with HKDF-SHA256: whoever cannot sign cannot write a row
        that is served either. `create`: make the key file if it is missing, as the
        first signature does; else None while there is none."""
        if self.signing is None:
            with self.lock:
                if self.signing is None and not self.load():
                    if not create:
                        return None
                    self.create()
        assert self.signing is not None
        raw = self.signing.private_bytes(serialization.Encoding.Raw,
                                         serialization.PrivateFormat.Raw,
                                         serialization.NoEncryption())
        return HKDF(algorithm=hashes.SHA256(), length=32, salt=None,
                    info=b"dune-ledger:read-model-rows").derive(raw)

    def verify_with(self, public_key: str, message: bytes, signature: str) -> bool:
        """Check a signature with a key named at an import (`import --trust-key`)."""
        try:
            trusted_key(public_key).verify(message, base64.b64decode(signature, validate=True))
        except (KeyFileError, BadSignatureError, binascii.Error, ValueError):
            return False
        return True

    def missing(self) -> str | None:
        """Why no signature can be checked (no key file), or None."""
        if self.public or self.load():
            return None
        return (f"there is no key file at {self.path}: set {KEY_FILE_ENV} to the "
                "server's key file")

    # --- encryption at rest -------------------------------------------------------------

    def cipher_env(self) -> dict[str, str]:
        """The eventsourcing library's cipher settings, when the file has a cipher key."""
        if self.cipher_key is None:
            return {}
        return {"CIPHER_TOPIC": CIPHER_TOPIC, "CIPHER_KEY": self.cipher_key}


@functools.lru_cache(maxsize=64)
def trusted_key(public_key: str) -> VerifyKey:
    """A key named at an import, made once per process (a load of an imported room checks
    its last append with it)."""
    return VerifyKey(unb64(public_key, "public key", 32))


def write_private(path: Path, data: dict[str, Any]) -> None:
    """`data` as a key file's JSON in a new file of mode 0600, on disk when it returns."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, orjson.dumps(data, option=orjson.OPT_INDENT_2) + b"\n")
        os.fsync(fd)
    finally:
        os.close(fd)


def raw_public(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def public_key_info(path: str | os.PathLike[str] | None = None, *,
                    create: bool = False) -> dict[str, Any]:
    """The public signing key: what `keys show` prints and `GET /keys` serves, so that
    anyone holding an export can verify it. A missing key file is an error, or
    (`create`: a server, which is about to write) created."""
    keys = Keys(path)
    if not keys.loaded:
        if not create:
            raise KeyFileError(f"there is no key file at {keys.path}: run "
                               "`dune-ledger keys init`, or set " + KEY_FILE_ENV)
        keys.create()
    current = keys.public[0]
    return {
        "algorithm": "Ed25519",
        "public_key": b64(raw_public(current)),
        "pem": current.public_bytes(serialization.Encoding.PEM,
                                    serialization.PublicFormat.SubjectPublicKeyInfo).decode(),
        "retired_public_keys": [b64(raw_public(k)) for k in keys.public[1:]],
        "encryption_at_rest": keys.cipher_key is not None,
        "signs": "each append: the chain hash of its last event, as "
                 "b'dune-ledger:append:' + hex; each snapshot: b'dune-ledger:snapshot:' + hex",
    }


def init_key_file(path: str | os.PathLike[str] | None = None, *, cipher: bool = False
                  ) -> dict[str, Any]:
    """`keys init`: a new key file; an existing one is never replaced."""
    target = key_path(path)
    if target.exists():
        raise KeyFileError(f"the key file {target} exists already: it is never replaced "
                           "(the rooms it signed would no longer verify); move it away "
                           "first if you mean to start over")
    keys = Keys(target)
    keys.create(cipher=cipher, announce=False)
    return {"ok": True, "file": str(target), "cipher": cipher, **public_key_info(target)}
