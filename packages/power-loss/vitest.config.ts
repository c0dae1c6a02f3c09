import { defineProject, mergeConfig } from "vitest/config";
import { shared } from "../../vitest.shared.js";

// Each test here replays every crash image of a real sweep (hundreds of durable steps): about 10 s on a quiet
// machine, minutes at load average 15 or more (a clean-clone CI run next to other work timed one out at the
// 60 s default). The timeout is a hang guard, never a duration the test must meet; what they assert is unchanged.
export default mergeConfig(
  shared,
  defineProject({ test: { name: "power-loss", testTimeout: 600_000, hookTimeout: 120_000 } }),
);
