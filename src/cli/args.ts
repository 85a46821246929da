/** Small argument parsing for the data-directory commands: positionals plus `--flag value` / `--json`. */

/** A usage mistake: printed with the group's usage and exit code 2. */
export class UsageError extends Error {
  override name = 'UsageError';
}

/** A failure of the operation itself (not found, already exists): exit code 1. */
export class CommandError extends Error {
  override name = 'CommandError';
}

export interface ParsedArgs {
  positionals: string[];
  options: Map<string, string>;
  json: boolean;
  help: boolean;
}

/** Splits argv; `valued` names the options that take a value (`--plan pro` or `--plan=pro`). */
export function parseArgs(argv: readonly string[], valued: readonly string[]): ParsedArgs {
  const positionals: string[] = [];
  const options = new Map<string, string>();
  let json = false;
  let help = false;
  for (let index = 0; index < argv.length; index += 1) {
    const arg = argv[index]!;
    if (arg === '--json') json = true;
    else if (arg === '--help' || arg === '-h') help = true;
    else if (arg.startsWith('--')) {
      const eq = arg.indexOf('=');
      const name = arg.slice(2, eq === -1 ? undefined : eq);
      if (!valued.includes(name)) throw new UsageError(`unknown option --${name}`);
      const value = eq === -1 ? argv[++index] : arg.slice(eq + 1);
      if (value === undefined || value === '') throw new UsageError(`--${name} needs a value`);
      options.set(name, value);
    } else positionals.push(arg);
  }
  return { positionals, options, json, help };
}

/** Requires exactly `names.length` positionals and returns them. */
export function expectPositionals(args: ParsedArgs, names: readonly string[]): string[] {
  if (args.positionals.length !== names.length) {
    throw new UsageError(
      `expected ${names.length === 0 ? 'no arguments' : names.join(' ')}, got ${args.positionals.length === 0 ? 'none' : args.positionals.join(' ')}`,
    );
  }
  return args.positionals;
}

/**
 * The exit code of a command group that only prints its usage: help asked for (usage on stdout,
 * 0) or no subcommand given (usage on stderr, 2); undefined when the subcommand should run.
 */
export function usageOnlyExit(sub: string | undefined, args: ParsedArgs, usage: string): number | undefined {
  if (args.help || sub === '--help' || sub === 'help') {
    process.stdout.write(usage);
    return 0;
  }
  if (sub === undefined) {
    process.stderr.write(usage);
    return 2;
  }
  return undefined;
}

/** Formats rows as aligned columns with a header. */
export function table(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = header.map((title, column) => Math.max(title.length, ...rows.map((row) => (row[column] ?? '').length)));
  const line = (cells: readonly string[]) =>
    cells
      .map((cell, column) => cell.padEnd(widths[column]!))
      .join('  ')
      .trimEnd();
  return `${[line(header), ...rows.map(line)].join('\n')}\n`;
}
