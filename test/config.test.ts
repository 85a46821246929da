import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { ConfigError, loadConfig } from '../src/config/index.js';

function configFile(content: unknown): string {
  const path = join(mkdtempSync(join(tmpdir(), 'colloquy-config-')), 'config.json');
  writeFileSync(path, typeof content === 'string' ? content : JSON.stringify(content));
  return path;
}

describe('configuration', () => {
  it('has offline defaults: loopback, port 8080, ./data, the builtin model, free and pro plans', () => {
    const config = loadConfig({});
    assert.equal(config.host, '127.0.0.1');
    assert.equal(config.port, 8080);
    assert.equal(config.dataDir, './data');
    assert.equal(config.defaultModel, 'builtin-extractive');
    assert.deepEqual(config.plans.free, { quota: 50, window_seconds: 86400 });
    assert.deepEqual(config.costs, { chat: 1, search: 1, image: 5, embeddings: 1 });
    assert.equal(config.search.provider, 'local');
    assert.equal(config.images.provider, 'builtin');
  });

  it('is frozen all the way down', () => {
    const config = loadConfig({});
    assert.ok(Object.isFrozen(config));
    assert.ok(Object.isFrozen(config.plans));
    assert.throws(() => {
      (config.costs as { chat: number }).chat = 9;
    }, TypeError);
  });

  it('reads the file named by COLLOQUY_CONFIG and resolves upstream keys from the environment', () => {
    const path = configFile({
      plans: { basic: { quota: 3, window_seconds: 60 } },
      anonymous_plan: 'basic',
      default_plan: 'basic',
      models: [{ id: 'm1', provider: 'openai', base_url: 'http://127.0.0.1:9/v1', api_key_env: 'MY_KEY' }],
    });
    const config = loadConfig({ COLLOQUY_CONFIG: path, MY_KEY: 'sk-test' });
    assert.equal(config.anonymousPlan, 'basic');
    assert.equal(config.defaultModel, 'm1');
    const model = config.models.find((entry) => entry.id === 'm1');
    assert.equal(model?.apiKey, 'sk-test');
    assert.equal(model?.upstreamModel, 'm1');
  });

  it('registers upstreams from OPENAI_*, ANTHROPIC_API_KEY and OLLAMA_HOST without a file', () => {
    const config = loadConfig({ OPENAI_BASE_URL: 'http://127.0.0.1:1/v1', ANTHROPIC_API_KEY: 'a', OLLAMA_HOST: '127.0.0.1:11434' });
    assert.deepEqual(
      config.models.map((model) => model.provider),
      ['builtin', 'openai', 'anthropic', 'ollama'],
    );
    assert.equal(config.models[3]?.baseUrl, 'http://127.0.0.1:11434');
  });

  it('stops with a message naming the bad key', () => {
    const path = configFile({ plans: { free: { quota: -1, window_seconds: 60 } } });
    assert.throws(
      () => loadConfig({ COLLOQUY_CONFIG: path }),
      (error: Error) => error instanceof ConfigError && /plans\.free\.quota/.test(error.message),
    );
  });

  it('session_cache_mb sizes the session cache in MiB (48 by default, 0 keeps none) and refuses a negative or fractional size', () => {
    assert.equal(loadConfig({}).sessionCacheChars, 48 * 1024 * 1024);
    assert.equal(loadConfig({ COLLOQUY_CONFIG: configFile({ session_cache_mb: 256 }) }).sessionCacheChars, 256 * 1024 * 1024);
    assert.equal(loadConfig({ COLLOQUY_CONFIG: configFile({ session_cache_mb: 0 }) }).sessionCacheChars, 0);
    for (const size of [-1, 1.5, '64']) {
      assert.throws(() => loadConfig({ COLLOQUY_CONFIG: configFile({ session_cache_mb: size }) }), /session_cache_mb/);
    }
  });

  it('refuses unknown keys, naming them', () => {
    const path = configFile({ auth_requried: true });
    assert.throws(() => loadConfig({ COLLOQUY_CONFIG: path }), /auth_requried/);
  });

  it('refuses a plan reference that does not exist and a file that is not JSON', () => {
    assert.throws(() => loadConfig({ COLLOQUY_CONFIG: configFile({ anonymous_plan: 'gold' }) }), /anonymous_plan: plan "gold"/);
    assert.throws(() => loadConfig({ COLLOQUY_CONFIG: configFile('{nope') }), /cannot read .* as JSON/);
  });

  it('refuses a non-numeric PORT', () => {
    assert.throws(() => loadConfig({ PORT: 'eighty' }), /PORT/);
  });
});
