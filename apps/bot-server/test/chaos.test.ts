// The chaos test (chaos-suite.ts) on the default backend, file (today's JSON files).
import { chaosSuite } from "./chaos-suite.js";

chaosSuite("file");
