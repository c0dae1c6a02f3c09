/**
 * A crash hook: called with a point's name right after each durable step. The default does nothing; the
 * crash-test fixture's entry file passes one that SIGKILLs the process at a chosen point.
 */
export interface CrashHook {
  point(name: string): void;
}

export const noCrash: CrashHook = { point: () => {} };
