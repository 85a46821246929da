import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { ERROR_CATALOGUE } from '../src/errors.js';

describe('the error catalogue', () => {
  const doc = readFileSync(new URL('../../docs/errors.md', import.meta.url), 'utf8');
  const documented = new Map<string, number>();
  for (const match of doc.matchAll(/^\| `([a-z_]+)` \| (\d{3}) \|/gm)) documented.set(match[1]!, Number(match[2]));

  it('documents every code of src/errors.ts with its status', () => {
    for (const [code, entry] of Object.entries(ERROR_CATALOGUE)) {
      assert.equal(documented.get(code), entry.status, `docs/errors.md must list ${code} with status ${entry.status}`);
    }
  });

  it('documents no code that src/errors.ts does not have', () => {
    for (const code of documented.keys()) assert.ok(code in ERROR_CATALOGUE, `docs/errors.md lists unknown code ${code}`);
  });

  it('holds every code the contract names, with the contract status', () => {
    const contract: Record<string, number> = {
      invalid_json: 400,
      invalid_request: 400,
      unauthorized: 401,
      forbidden: 403,
      not_found: 404,
      method_not_allowed: 405,
      payload_too_large: 413,
      unsupported_media_type: 415,
      quota_exceeded: 429,
      internal: 500,
      upstream_error: 502,
      unavailable: 503,
      upstream_timeout: 504,
    };
    for (const [code, status] of Object.entries(contract)) {
      assert.equal(ERROR_CATALOGUE[code as keyof typeof ERROR_CATALOGUE]?.status, status, code);
    }
  });
});
