/**
 * Checked readers for upstream frames. Every field a dialect reads is type-checked here before
 * use, so a frame is never trusted through a cast; a frame whose fields have the wrong types is
 * malformed. These replace schema parsing on the hot path: a parser that copies each frame into a
 * new object cost a fifth of the gateway's CPU per request in the bench (docs/benchmarks.md).
 */

/** A JSON object, or undefined for anything else. */
export function objectOf(value: unknown): Record<string, unknown> | undefined {
  return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
}

/** Marks a field present with the wrong type. */
export const WRONG = Symbol('wrong type');

/** A string field: the string, undefined when absent or null, WRONG when it is something else. */
export function stringField(record: Record<string, unknown> | undefined, key: string): string | undefined | typeof WRONG {
  const value = record?.[key];
  if (value === undefined || value === null) return undefined;
  return typeof value === 'string' ? value : WRONG;
}

/** A number field: the number, undefined when absent or null, WRONG when it is something else. */
export function numberField(record: Record<string, unknown> | undefined, key: string): number | undefined | typeof WRONG {
  const value = record?.[key];
  if (value === undefined || value === null) return undefined;
  return typeof value === 'number' && Number.isFinite(value) ? value : WRONG;
}

/** An object field: the object, undefined when absent or null, WRONG when it is something else. */
export function objectField(record: Record<string, unknown> | undefined, key: string): Record<string, unknown> | undefined | typeof WRONG {
  const value = record?.[key];
  if (value === undefined || value === null) return undefined;
  return objectOf(value) ?? WRONG;
}

/** An array field: the array, undefined when absent or null, WRONG when it is something else. */
export function arrayField(record: Record<string, unknown> | undefined, key: string): unknown[] | undefined | typeof WRONG {
  const value = record?.[key];
  if (value === undefined || value === null) return undefined;
  return Array.isArray(value) ? value : WRONG;
}

/** The first item of an array field as an object: undefined when absent or empty, WRONG when malformed. */
export function firstObjectOf(
  record: Record<string, unknown> | undefined,
  key: string,
): Record<string, unknown> | undefined | typeof WRONG {
  const value = record?.[key];
  if (value === undefined || value === null) return undefined;
  if (!Array.isArray(value)) return WRONG;
  if (value.length === 0) return undefined;
  return objectOf(value[0]) ?? WRONG;
}

/** Parses a frame's JSON text and reads it with `read`: undefined when it is not JSON or malformed. */
export function readFrame<T>(text: string, read: (json: unknown) => T | undefined): T | undefined {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return undefined;
  }
  return read(json);
}
