/**
 * API key material: `ck_<key_id>_<secret>`. The key id is public (it is how a key is found without
 * scanning and how it is listed and revoked); only a SHA-256 of the secret is ever stored, and it is
 * compared in constant time.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

const KEY_PREFIX = 'ck_';
const KEY_ID_BYTES = 8;
const SECRET_BYTES = 32;
const KEY_ID_PATTERN = /^[0-9a-f]{16}$/;
const KEY_PATTERN = /^ck_([0-9a-f]{16})_([A-Za-z0-9_-]{43})$/;

/** A freshly minted key: the clear text goes to the caller once, the hash goes to storage. */
export interface MintedKey {
  keyId: string;
  key: string;
  hash: Buffer;
}

/** Creates a new random key (256-bit secret). */
export function mintKey(): MintedKey {
  const keyId = randomBytes(KEY_ID_BYTES).toString('hex');
  const secret = randomBytes(SECRET_BYTES).toString('base64url');
  return { keyId, key: `${KEY_PREFIX}${keyId}_${secret}`, hash: hashSecret(secret) };
}

/** Splits a presented key into its id and secret; undefined when it does not have the key shape. */
export function parseKey(key: string): { keyId: string; secret: string } | undefined {
  const match = KEY_PATTERN.exec(key);
  if (!match) return undefined;
  return { keyId: match[1]!, secret: match[2]! };
}

/** True for a string that can be a key id (used to validate route parameters). */
export function isKeyId(value: string): boolean {
  return KEY_ID_PATTERN.test(value);
}

/** The stored form of a secret. A plain SHA-256 is enough: the secret has 256 bits of entropy. */
function hashSecret(secret: string): Buffer {
  return createHash('sha256').update(secret, 'utf8').digest();
}

/** Constant-time check of a presented secret against a stored hash. */
export function secretMatches(secret: string, storedHash: Uint8Array): boolean {
  const presented = hashSecret(secret);
  return storedHash.length === presented.length && timingSafeEqual(presented, storedHash);
}

/** Constant-time string equality (for the admin token); the lengths are hidden by hashing first. */
export function tokensEqual(presented: string, expected: string): boolean {
  return timingSafeEqual(hashSecret(presented), hashSecret(expected));
}

/** The visible part of a key shown in listings (`ck_<key_id>`). */
export function keyPrefix(keyId: string): string {
  return `${KEY_PREFIX}${keyId}`;
}
