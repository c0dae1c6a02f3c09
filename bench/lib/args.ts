/** `pnpm bench`'s command line: `--quick`, `--only a,b` (or bare suite names) and `--<option>=<value>`. */
export interface SuiteOptions {
  quick: boolean;
  /** `--<option>=<value>` pairs, checked against the chosen suites' option names. */
  options: Readonly<Record<string, string>>;
}

export function parseBenchArgs(
  argv: readonly string[],
  known: readonly string[],
  suiteOptions: Readonly<Record<string, readonly string[]>>,
): { quick: boolean; suites: string[]; options: Record<string, string> } {
  let quick = false;
  const suites: string[] = [];
  const options: Record<string, string> = {};
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    if (arg === "--quick") quick = true;
    else if (arg === "--only" || arg.startsWith("--only=")) {
      const value = arg === "--only" ? argv[++i] : arg.slice("--only=".length);
      if (!value) throw new Error("--only needs a suite name (or several, comma-separated)");
      suites.push(...value.split(",").filter(Boolean));
    } else if (arg.startsWith("--")) {
      const eq = arg.indexOf("=");
      if (eq === -1) throw new Error(`${arg}: options are written --<option>=<value>`);
      options[arg.slice(2, eq)] = arg.slice(eq + 1);
    } else suites.push(arg);
  }
  const unknown = suites.filter((s) => !known.includes(s));
  if (unknown.length) throw new Error(`unknown suite(s): ${unknown.join(", ")}; known: ${known.join(", ")}`);
  const chosen = suites.length ? suites : known;
  const readable = new Set(chosen.flatMap((s) => suiteOptions[s] ?? []));
  const unread = Object.keys(options).filter((o) => !readable.has(o));
  if (unread.length) {
    throw new Error(
      `--${unread.join(", --")}: no chosen suite reads ${unread.length > 1 ? "these options" : "this option"} (${
        [...Object.entries(suiteOptions)]
          .filter(([s]) => chosen.includes(s))
          .map(([s, o]) => `${s}: ${o.map((x) => `--${x}`).join(" ")}`)
          .join("; ") || "the chosen suites take none"
      })`,
    );
  }
  return { quick, suites: [...new Set(suites)], options };
}

/** A comma-separated list of positive integers (`--rows=1,4095,100000`), or `fallback` when absent. */
export function intList(options: SuiteOptions["options"], name: string, fallback: number[]): number[] {
  const raw = options[name];
  if (raw === undefined) return fallback;
  const values = raw.split(",").map((v) => Number(v.replaceAll("_", "")));
  if (!values.length || values.some((v) => !Number.isSafeInteger(v) || v < 1)) {
    throw new Error(`--${name}=${raw}: expected positive integers separated by commas`);
  }
  return values;
}

/** One positive integer (`--window=500`), or `fallback` when absent. */
export function intOption(options: SuiteOptions["options"], name: string, fallback: number): number {
  const [value] = intList(options, name, [fallback]);
  if (options[name]?.includes(",")) throw new Error(`--${name}=${options[name]}: expected one integer`);
  return value as number;
}
