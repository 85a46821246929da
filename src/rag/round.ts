/** Rounds to a fixed number of decimal places (reported scores and statistics). */
export function round(value: number, digits: number): number {
  const factor = 10 ** digits;
  return Math.round(value * factor) / factor;
}
