// Judge of the lock-torture log (see torture.test.ts), separate so its own tests can prove it catches faults.

export interface Section {
  id: string;
  seq: number;
  /** Counter value read inside the section. */
  read: number;
  completed: boolean;
}

export interface Verdict {
  sections: Section[];
  completed: number;
  killedLanded: number;
  killedLost: number;
  problems: string[];
}

/**
 * Judges the O_APPEND log. A section is open from its enter line until its exit line; a killed worker's
 * section never gets one and stays open until the next enter, which is only legitimate if that worker was
 * killed: any later line from it proves it was still inside while someone else entered. Counter chain: a
 * completed section must have advanced the counter by exactly one for the next reader; a killed one by zero or
 * one, and which of the two it was is read off the next section (or the final counter), so the count is exact.
 */
export function judge(log: string, killed: ReadonlySet<string>, finalCounter: number): Verdict {
  const problems: string[] = [];
  const sections: Section[] = [];
  const superseded = new Set<string>();
  let open: Section | null = null;
  for (const line of log.split("\n").filter(Boolean)) {
    const [kind, id = "", seqText, valueText] = line.split(" ");
    const seq = Number(seqText);
    const value = Number(valueText);
    if (superseded.has(id))
      problems.push(`line from ${id} after another worker entered its section: ${line}`);
    if (kind === "enter") {
      if (open !== null) {
        if (!killed.has(open.id)) problems.push(`overlap: ${line} while ${open.id} ${open.seq} was inside`);
        superseded.add(open.id);
      }
      open = { id, seq, read: value, completed: false };
      sections.push(open);
    } else if (kind === "exit") {
      if (open === null || open.id !== id || open.seq !== seq)
        problems.push(`exit without its enter: ${line}`);
      else {
        if (value !== open.read + 1) problems.push(`section wrote ${value} after reading ${open.read}`);
        open.completed = true;
      }
      open = null;
    } else problems.push(`malformed line: ${line}`);
  }
  let killedLanded = 0;
  let killedLost = 0;
  let expected = 0;
  for (const [i, section] of sections.entries()) {
    if (section.read !== expected)
      problems.push(`section ${i} read ${section.read}, counter should be ${expected}`);
    const next = sections[i + 1]?.read ?? finalCounter;
    if (section.completed) {
      if (next !== section.read + 1)
        problems.push(`completed section ${i} was not counted exactly once (next read ${next})`);
    } else if (next === section.read + 1) killedLanded += 1;
    else if (next === section.read) killedLost += 1;
    else problems.push(`killed section ${i} moved the counter from ${section.read} to ${next}`);
    expected = next;
  }
  const completed = sections.filter((section) => section.completed).length;
  if (finalCounter !== completed + killedLanded) {
    problems.push(`counter ${finalCounter} != ${completed} completed + ${killedLanded} killed-after-write`);
  }
  return { sections, completed, killedLanded, killedLost, problems };
}
