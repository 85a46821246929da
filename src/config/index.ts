/** The configuration room's public face: load it, and the types the rest of the code reads. */
export { loadConfig } from './load.js';
export { ConfigFileSchema, type ConfigFile } from './schema.js';
export { BUILTIN_MODEL_ID, ConfigError, type Config, type ImagesConfig, type ModelConfig, type PlanConfig } from './types.js';
