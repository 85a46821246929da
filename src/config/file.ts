/** Reading and checking the config file (and test overrides) against the schema. */
import { readFileSync } from 'node:fs';
import * as v from 'valibot';
import { issueDetails } from '../validation.js';
import { ConfigFileSchema, type ConfigFile } from './schema.js';
import { ConfigError } from './types.js';

/** The issues of a failed check as indented `path: sentence` lines, one per field. */
function issueLines(issues: readonly v.BaseIssue<unknown>[]): string {
  return issueDetails(issues, '(root)')
    .map((detail) => `  ${detail.path}: ${detail.message}`)
    .join('\n');
}

/** Parses and validates the JSON file that COLLOQUY_CONFIG names. */
export function readConfigFile(path: string): ConfigFile {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path, 'utf8'));
  } catch (error) {
    throw new ConfigError(`COLLOQUY_CONFIG: cannot read ${path} as JSON (${(error as Error).message})`);
  }
  const parsed = v.safeParse(ConfigFileSchema, raw, { abortEarly: false });
  if (!parsed.success) throw new ConfigError(`COLLOQUY_CONFIG: ${path} is invalid:\n${issueLines(parsed.issues)}`);
  return parsed.output;
}

/** The file's keys with overrides on top, checked again as one whole. */
export function mergeConfigFile(fromFile: ConfigFile, overrides: ConfigFile): ConfigFile {
  const checked = v.safeParse(ConfigFileSchema, { ...fromFile, ...overrides }, { abortEarly: false });
  if (!checked.success) throw new ConfigError(`configuration is invalid:\n${issueLines(checked.issues)}`);
  return checked.output;
}
