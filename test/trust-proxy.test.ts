import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { ConfigFile } from '../src/config/index.js';
import { loadConfig } from '../src/config/index.js';
import { bootServer } from './helpers/server.js';

/** The anonymous caller id the server sees for a request with these headers. */
async function callerFor(trust: ConfigFile['trust_proxy'], forwardedFor: string | undefined): Promise<string> {
  const server = await bootServer({ config: trust === undefined ? {} : { trust_proxy: trust } });
  try {
    const headers: Record<string, string> = forwardedFor === undefined ? {} : { 'x-forwarded-for': forwardedFor };
    const response = await server.fetch('/api/chat/quota/me', { headers });
    assert.equal(response.status, 200);
    return ((await response.json()) as { user_id: string }).user_id;
  } finally {
    await server.close();
  }
}

describe('trust_proxy: only what trusted proxies appended is believed', () => {
  test('without trust_proxy the peer address is the client, whatever X-Forwarded-For says', async () => {
    assert.equal(await callerFor(undefined, '203.0.113.7'), 'anon:127.0.0.1');
  });

  test('true trusts one hop: the rightmost entry (the one our proxy appended), not a client-written one', async () => {
    assert.equal(await callerFor(true, '198.51.100.1, 203.0.113.7'), 'anon:203.0.113.7');
    // A client that writes its own header cannot choose its identity: the proxy's entry wins.
    assert.equal(await callerFor(true, 'spoofed, 10.9.9.9, 203.0.113.7'), 'anon:203.0.113.7');
  });

  test('a number trusts that many hops from the right', async () => {
    assert.equal(await callerFor(2, '198.51.100.1, 203.0.113.7, 10.0.0.2'), 'anon:203.0.113.7');
    // Fewer entries than hops: the leftmost one there is.
    assert.equal(await callerFor(3, '203.0.113.7'), 'anon:203.0.113.7');
  });

  test('a list of proxies is walked from the right while the hop is one of them; malformed entries are ignored', async () => {
    const proxies = ['127.0.0.1', '10.0.0.0/8'];
    assert.equal(await callerFor(proxies, '198.51.100.1, 203.0.113.7, 10.1.2.3'), 'anon:203.0.113.7');
    assert.equal(await callerFor(proxies, '203.0.113.7, not-an-address, 10.1.2.3'), 'anon:203.0.113.7');
    // A header of nothing but junk leaves the peer as the client.
    assert.equal(await callerFor(proxies, 'x'.repeat(10_000)), 'anon:127.0.0.1');
  });

  test('a malformed trust_proxy value stops start-up naming the key', () => {
    assert.throws(() => loadConfig({}, { trust_proxy: ['10.0.0.0/99'] }), /trust_proxy/);
    assert.throws(() => loadConfig({}, { trust_proxy: -1 }), /trust_proxy/);
  });
});
