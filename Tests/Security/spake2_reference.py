#!/usr/bin/env python3
"""An independent reference of headunitd's pairing exchange (PROTOCOL.md
section 20.2), written from that section alone: BoringSSL's SPAKE2 over
edwards25519 (SPAKE2_CTX_new / SPAKE2_generate_msg / SPAKE2_process_msg),
then the headunitd key schedule (transcript, confirmations, signed bytes).

Pure Python 3, standard library only. The curve arithmetic follows RFC 8032's
reference code (section 6) in extended coordinates. It is slow and NOT
constant time: it exists to check the specification and to make test
vectors, never to pair a real phone.

Usage:
  spake2_reference.py vectors
      prints the test vectors of PROTOCOL.md 20.2 as JSON (fixed scalars).
  spake2_reference.py run --role phone|car --password DIGITS --scalar HEX64
          [--peer HEX32] [--car-key HEXDER] [--public-key HEX32] [--name NAME]
      prints JSON: this side's SPAKE2 message; with --peer also the 64-byte
      key, and with --car-key the transcript, both confirmations and the
      bytes the phone signs (--public-key/--name for the phone's).
  spake2_reference.py selftest
      runs both roles against each other and checks M, N and the vectors file.
"""

import hashlib
import hmac
import json
import os
import sys

# --- edwards25519 (RFC 8032, section 5.1 and the reference code of section 6)

p = 2**255 - 19
d = -121665 * pow(121666, p - 2, p) % p
L = 2**252 + 27742317777372353535851937790883648493  # the prime subgroup's order
SQRT_M1 = pow(2, (p - 1) // 4, p)


def inv(x):
    return pow(x, p - 2, p)


def point_add(P, Q):
    A = (P[1] - P[0]) * (Q[1] - Q[0]) % p
    B = (P[1] + P[0]) * (Q[1] + Q[0]) % p
    C = 2 * P[3] * Q[3] * d % p
    D = 2 * P[2] * Q[2] % p
    E, F, G, H = B - A, D - C, D + C, B + A
    return (E * F % p, G * H % p, F * G % p, E * H % p)


def point_neg(P):
    return ((-P[0]) % p, P[1], P[2], (-P[3]) % p)


def scalar_mult(s, P):
    Q = (0, 1, 1, 0)  # the neutral element
    while s > 0:
        if s & 1:
            Q = point_add(Q, P)
        P = point_add(P, P)
        s >>= 1
    return Q


def recover_x(y, sign):
    """x from y and the sign bit, as BoringSSL's x25519_ge_frombytes_vartime
    does: None when y is not on the curve. Unlike RFC 8032 it accepts x = 0
    with the sign bit set (x stays 0)."""
    x2 = (y * y - 1) * inv(d * y * y + 1) % p
    x = pow(x2, (p + 3) // 8, p)
    if (x * x - x2) % p != 0:
        x = x * SQRT_M1 % p
    if (x * x - x2) % p != 0:
        return None
    if (x & 1) != sign:
        x = (p - x) % p
    return x


def decode_point(b):
    """32 bytes -> point, as BoringSSL decodes a peer's message: y is the
    low 255 bits taken mod p (a non-canonical y is accepted), bit 255 the
    sign of x. No subgroup check (the cofactor is cleared by the scalar)."""
    if len(b) != 32:
        return None
    n = int.from_bytes(b, "little")
    y = (n & ((1 << 255) - 1)) % p
    x = recover_x(y, n >> 255)
    if x is None:
        return None
    return (x, y, 1, x * y % p)


def encode_point(P):
    zinv = inv(P[2])
    x, y = P[0] * zinv % p, P[1] * zinv % p
    return (y | ((x & 1) << 255)).to_bytes(32, "little")


G_Y = 4 * inv(5) % p
G = (recover_x(G_Y, 0), G_Y, 1, recover_x(G_Y, 0) * G_Y % p)

# --- BoringSSL's M and N (spake25519.cc): SHA-256 of a seed string, then
# SHA-256 again until the 32 bytes decode as a point (with the original
# ed25519.py decoder: y the low 255 bits, not reduced, must be on the curve).

M_SEED = b"edwards25519 point generation seed (M)"
N_SEED = b"edwards25519 point generation seed (N)"
M_ENCODED = "5ada7e4bf6ddd9adb6626d32131c6b5c51a1e347a3478f53cfcf441b88eed12e"
N_ENCODED = "10e3df0ae37d8e7a99b5fe74b44672103dbddcbd06af680d71329a11693bc778"


def generate_point(seed):
    v = hashlib.sha256(seed).digest()
    while True:
        n = int.from_bytes(v, "little")
        y = n & ((1 << 255) - 1)
        if y < p:
            x = recover_x(y, n >> 255)
            if x is not None:
                return (x, y, 1, x * y % p), v
        v = hashlib.sha256(v).digest()


M, M_BYTES = generate_point(M_SEED)
N, N_BYTES = generate_point(N_SEED)

# --- BoringSSL's SPAKE2

PHONE_NAME = b"headunitd phone"  # Alice
CAR_NAME = b"headunitd car"  # Bob


def private_scalar(random64):
    """SPAKE2_generate_msg: 64 random bytes, little-endian, reduced mod L
    (x25519_sc_reduce), times 8 (left_shift_3: clears the cofactor)."""
    assert len(random64) == 64
    return 8 * (int.from_bytes(random64, "little") % L)


def password_scalar(password):
    """SHA-512 of the password, little-endian, reduced mod L; then BoringSSL's
    "password scalar hack": add L if bit 0 is set, then 2L if bit 1 is set,
    then 4L if bit 2 is set (each test on the value so far), which makes the
    scalar a multiple of 8 without changing it mod L."""
    h = hashlib.sha512(password).digest()
    w = int.from_bytes(h, "little") % L
    if w & 1:
        w += L
    if w & 2:
        w += 2 * L
    if w & 4:
        w += 4 * L
    assert w % 8 == 0 and w < 2**256
    return w, h


def length_prefixed(data):
    return len(data).to_bytes(8, "little") + data


class SPAKE2:
    def __init__(self, role, password, random64):
        assert role in ("phone", "car")
        self.role = role
        self.x = private_scalar(random64)
        self.w, self.password_hash = password_scalar(password)
        mask = scalar_mult(self.w, M if role == "phone" else N)
        self.message = encode_point(point_add(scalar_mult(self.x, G), mask))

    def finish(self, peer):
        Q = decode_point(peer)
        if Q is None:
            raise ValueError("the peer's SPAKE2 message is not a point")
        peers_mask = scalar_mult(self.w, N if self.role == "phone" else M)
        K = encode_point(scalar_mult(self.x, point_add(Q, point_neg(peers_mask))))
        alice_msg, bob_msg = (self.message, peer) if self.role == "phone" else (peer, self.message)
        return hashlib.sha512(
            length_prefixed(PHONE_NAME) + length_prefixed(CAR_NAME) + length_prefixed(alice_msg)
            + length_prefixed(bob_msg) + length_prefixed(K) + length_prefixed(self.password_hash)
        ).digest()


# --- headunitd's key schedule (PROTOCOL.md 20.2), RFC 5869 HKDF and RFC 2104 HMAC

LABEL = b"headunitd-pair-v1"


def transcript_hash(phone_message, car_message, car_key):
    data = LABEL
    for part in (phone_message, car_message, car_key):
        data += len(part).to_bytes(2, "big") + part
    return hashlib.sha256(data).digest()


def hkdf(ikm, salt, info, length=32):
    prk = hmac.new(salt, ikm, hashlib.sha256).digest()
    out, block, counter = b"", b"", 1
    while len(out) < length:
        block = hmac.new(prk, block + info + bytes([counter]), hashlib.sha256).digest()
        out += block
        counter += 1
    return out[:length]


def schedule(key, transcript, public_key, name):
    k_car = hkdf(key, transcript, b"headunitd car confirmation")
    k_phone = hkdf(key, transcript, b"headunitd phone confirmation")
    return {
        "transcript": transcript.hex(),
        "car_confirmation": hmac.new(k_car, transcript, hashlib.sha256).hexdigest(),
        "confirmation": hmac.new(k_phone, transcript + public_key + name.encode(), hashlib.sha256).hexdigest(),
        "signed_bytes": (LABEL + transcript).hex(),
    }


# --- Ed25519 signing (RFC 8032 section 6's reference code), for test phones
# written in Python (Tests/SystemdIntegration): Pair's proof of possession
# and Authenticate. Not constant time; test keys only.


def ed25519_expand(secret):
    h = hashlib.sha512(secret).digest()
    a = int.from_bytes(h[:32], "little")
    a &= (1 << 254) - 8
    a |= 1 << 254
    return a, h[32:]


def ed25519_public_key(secret):
    a, _ = ed25519_expand(secret)
    return encode_point(scalar_mult(a, G))


def ed25519_sign(secret, message):
    a, prefix = ed25519_expand(secret)
    A = encode_point(scalar_mult(a, G))
    r = int.from_bytes(hashlib.sha512(prefix + message).digest(), "little") % L
    R = encode_point(scalar_mult(r, G))
    h = int.from_bytes(hashlib.sha512(R + A + message).digest(), "little") % L
    return R + ((r + h * a) % L).to_bytes(32, "little")


# --- fixed-scalar test vectors

VECTOR_PASSWORD = b"042917"
VECTOR_PHONE_RANDOM = bytes(range(0x00, 0x40))  # 00 01 ... 3f
VECTOR_CAR_RANDOM = bytes(range(0x40, 0x80))  # 40 41 ... 7f
VECTOR_CAR_KEY = bytes([0xC3]) * 91
VECTOR_PUBLIC_KEY = bytes([0xD4]) * 32
VECTOR_NAME = "Alice's phone"


def vectors():
    phone = SPAKE2("phone", VECTOR_PASSWORD, VECTOR_PHONE_RANDOM)
    car = SPAKE2("car", VECTOR_PASSWORD, VECTOR_CAR_RANDOM)
    phone_key, car_key = phone.finish(car.message), car.finish(phone.message)
    assert phone_key == car_key
    wrong = SPAKE2("phone", b"000000", VECTOR_PHONE_RANDOM)
    w, h = password_scalar(VECTOR_PASSWORD)
    out = {
        "M": M_BYTES.hex(),
        "N": N_BYTES.hex(),
        "password": VECTOR_PASSWORD.decode(),
        "password_hash": h.hex(),
        "password_scalar": w.to_bytes(32, "little").hex(),
        "phone_random": VECTOR_PHONE_RANDOM.hex(),
        "phone_scalar": phone.x.to_bytes(32, "little").hex(),
        "phone_message": phone.message.hex(),
        "car_random": VECTOR_CAR_RANDOM.hex(),
        "car_scalar": car.x.to_bytes(32, "little").hex(),
        "car_message": car.message.hex(),
        "key": phone_key.hex(),
        "wrong_password_phone_message": wrong.message.hex(),
        "wrong_password_car_key": SPAKE2("car", VECTOR_PASSWORD, VECTOR_CAR_RANDOM).finish(wrong.message).hex(),
        "car_key_der": VECTOR_CAR_KEY.hex(),
        "public_key": VECTOR_PUBLIC_KEY.hex(),
        "device_name": VECTOR_NAME,
    }
    out.update(schedule(phone_key, transcript_hash(phone.message, car.message, VECTOR_CAR_KEY), VECTOR_PUBLIC_KEY, VECTOR_NAME))
    return out


def selftest():
    assert M_BYTES.hex() == M_ENCODED and N_BYTES.hex() == N_ENCODED, "M or N differ from BoringSSL's"
    assert encode_point(M) == M_BYTES and encode_point(N) == N_BYTES
    a = SPAKE2("phone", b"123456", os.urandom(64))
    b = SPAKE2("car", b"123456", os.urandom(64))
    assert a.finish(b.message) == b.finish(a.message)
    c = SPAKE2("phone", b"654321", os.urandom(64))
    assert c.finish(b.message) != SPAKE2("car", b"123456", os.urandom(64)).finish(c.message)
    # RFC 8032 section 7.1, TEST 1.
    secret = bytes.fromhex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
    assert ed25519_public_key(secret).hex() == "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"
    assert ed25519_sign(secret, b"").hex() == (
        "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e06522490155"
        "5fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b")
    # The vectors live with the protocol's others (PROTOCOL.md 20.2).
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "Protocol", "vectors", "spake2_vectors.json")
    with open(path) as f:
        assert json.load(f) == vectors(), "Protocol/vectors/spake2_vectors.json differs from what this file computes"
    print(json.dumps({"selftest": "ok"}))


def main(argv):
    if not argv or argv[0] == "selftest":
        selftest()
        return 0
    if argv[0] == "vectors":
        print(json.dumps(vectors(), indent=2, sort_keys=True))
        return 0
    if argv[0] != "run":
        print(__doc__, file=sys.stderr)
        return 2
    options = dict(zip(argv[1::2], argv[2::2]))
    role = options["--role"]
    side = SPAKE2(role, options["--password"].encode(), bytes.fromhex(options["--scalar"]))
    out = {"message": side.message.hex()}
    if "--peer" in options:
        peer = bytes.fromhex(options["--peer"])
        try:
            key = side.finish(peer)
        except ValueError as error:
            print(json.dumps({"error": str(error)}))
            return 1
        out["key"] = key.hex()
        if "--car-key" in options:
            phone_msg, car_msg = (side.message, peer) if role == "phone" else (peer, side.message)
            transcript = transcript_hash(phone_msg, car_msg, bytes.fromhex(options["--car-key"]))
            out.update(schedule(key, transcript, bytes.fromhex(options.get("--public-key", "")), options.get("--name", "")))
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
