import { execFileSync } from "node:child_process";
import { cpus, loadavg, platform, release, totalmem } from "node:os";

export interface BenchEnvironment {
  cpu: string;
  cores: number;
  memoryGiB: number;
  os: string;
  node: string;
  fileSystem: string;
  benchDir: string;
  date: string;
  /** The 1-minute load average when the suite started: above the core count, the figures were taken under load. */
  loadAverage?: number;
}

/** The facts a reader needs to compare figures across machines: CPU, cores, Node, and the file system the
 *  durable writes went to (tmpfs makes fsync free; ext4 and xfs differ). */
export function describeEnvironment(benchDir: string): BenchEnvironment {
  let fileSystem = "unknown";
  try {
    fileSystem =
      execFileSync("df", ["-T", benchDir], { encoding: "utf8" }).trim().split("\n")[1]?.split(/\s+/)[1] ??
      "unknown";
  } catch {
    // df is missing on some minimal images; the table then says "unknown".
  }
  return {
    cpu: cpus()[0]?.model ?? "unknown",
    cores: cpus().length,
    memoryGiB: Math.round(totalmem() / 2 ** 30),
    os: `${platform()} ${release()}`,
    node: process.version,
    fileSystem,
    benchDir,
    date: new Date().toISOString(),
    loadAverage: Math.round((loadavg()[0] ?? 0) * 10) / 10,
  };
}
