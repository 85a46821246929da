/** The configuration room's public face: load it, and the types the rest of the code reads. */
export { loadConfig } from './load.js';
export type { ConfigFile } from './schema.js';
export { ConfigError, type Config, type ModelConfig, type PlanConfig, type StorageConfig } from './types.js';
