/** Creating, listing and revoking API keys: the one code path used by the admin API, the caller routes and the CLI. */
import { ApiError } from '../errors.js';
import { keyPrefix, mintKey } from './keys.js';
import type { ApiKeyInfo, ApiKeyRecord, ApiKeyStore } from '../store/types.js';

/** Active keys one user may hold; a bound on what a single caller can make us store. */
const MAX_ACTIVE_KEYS = 100;
/** Keys a listing returns at most (active and revoked). */
const KEY_LIST_LIMIT = 1000;

/** What creation returns; `key` is shown this once and never stored. */
export interface CreatedKey extends ApiKeyInfo {
  key: string;
}

/** The listing view of a key record (no hash, no secret). */
function keyInfo(record: ApiKeyRecord): ApiKeyInfo {
  return {
    key_id: record.key_id,
    prefix: keyPrefix(record.key_id),
    name: record.name ?? null,
    created: record.created,
    last_used: record.last_used ?? null,
    revoked: record.revoked_at !== undefined,
    revoked_at: record.revoked_at ?? null,
  };
}

/** Mints a key for a user and stores its hash; refuses past MAX_ACTIVE_KEYS active keys. */
export async function createKey(store: ApiKeyStore, userId: string, name: string | undefined, now = new Date()): Promise<CreatedKey> {
  const active = (await store.listForUser(userId, KEY_LIST_LIMIT)).filter((record) => record.revoked_at === undefined).length;
  if (active >= MAX_ACTIVE_KEYS) {
    throw new ApiError('forbidden', `A user can hold at most ${MAX_ACTIVE_KEYS} active keys; revoke one first.`);
  }
  const minted = mintKey();
  const record: ApiKeyRecord = {
    key_id: minted.keyId,
    user_id: userId,
    hash: minted.hash,
    name,
    created: now.toISOString(),
    last_used: undefined,
    revoked_at: undefined,
  };
  await store.add(record);
  return { ...keyInfo(record), key: minted.key };
}

/** A user's keys for listing, newest first. */
export async function listKeys(store: ApiKeyStore, userId: string): Promise<ApiKeyInfo[]> {
  return (await store.listForUser(userId, KEY_LIST_LIMIT))
    .map(keyInfo)
    .sort((a, b) => (a.created < b.created ? 1 : a.created > b.created ? -1 : 0));
}
